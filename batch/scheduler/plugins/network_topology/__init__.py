"""network-topology-aware: keep a gang inside one network domain (HyperNodes).

Volcano's plugin of the same name (docs/volcano-semantics.md#plugins) with Volcano's HyperNode
objects (``topology.volcano.sh/v1alpha1``: ``spec.tier``, ``spec.tierName``, ``spec.members[]``
of type ``Node`` or ``HyperNode`` selected by ``exactMatch.name``, ``regexMatch.pattern`` or
``labelMatch`` {matchLabels, matchExpressions}). A HyperNode's domain is the set of nodes it
reaches through its members, recursively. A PodGroup's ``spec.networkTopology`` ``{mode: hard |
soft, highestTierAllowed | highestTierName}`` limits where its tasks may go:

* the job's domain is the HyperNode of the **lowest tier** (≤ the highest allowed tier) that can
  hold the job's missing tasks on the nodes' FutureIdle (and static predicates); among domains of
  that tier the one left **fullest** after placement wins (HyperNode-level bin-packing, weights
  ``hypernode.binpack.cpu`` / ``.memory`` / ``.resources`` / ``.resources.<name>``), so big empty
  domains stay free for big gangs;
* once some of the job's tasks hold nodes, the domain is chosen the same way among the allowed
  HyperNodes that contain all of them;
* ``hard``: tasks can only go to nodes of that domain; no domain -> no node (the job waits);
  ``soft``: the domain is preferred (it restricts placement while one fits), else anywhere.

When no HyperNode objects exist, HyperNodes are derived from node labels: argument
``autoTierLabels`` (default ``topology.tephra.io/rack,topology.tephra.io/spine``, the labels of
``tephra sandbox --topology``) lists one label key per tier starting at tier 1; every distinct
value forms a domain ``tier<k>-<value>``. ``autoTierLabels: ""`` turns derivation off.

The restriction is a dynamic predicate (it depends on in-session placements), so allocate,
backfill and preempt all honour it; ``preempt`` with ``enableTopologyAwarePreemption`` pins a
domain per attempt (``preemption_domains`` / ``pin`` / ``unpin``). Volcano's remaining arguments
(``weight``, ``hypernode.binpack.normal-pod.enable``, ``.fading``,
``hypernode.gradient.evict.max-hypernodes``) are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.api.topology import RACK_LABEL, SPINE_LABEL, member_matches as _matches
from batch.model.info import JobInfo, TaskInfo
from batch.model.status import ALLOCATED_STATUS, TaskStatus
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.nodes import BoolVec, SessionNodes
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session

DEFAULT_AUTO_LABELS = f"{RACK_LABEL},{SPINE_LABEL}"
HOLDING = ALLOCATED_STATUS | {TaskStatus.PIPELINED}


@dataclass(slots=True, eq=False)
class Domain:
    name: str
    tier: int
    tier_name: str
    mask: BoolVec


def build_domains(hypernodes: Mapping[str, Mapping[str, Any]], nodes: SessionNodes) -> list[Domain]:
    """Domains of HyperNode objects over the session's nodes (members resolved recursively)."""
    n = nodes.n
    metas = [(i, nodes.arrays.meta[i]) for i in range(n)]
    specs: dict[str, Mapping[str, Any]] = {}
    for name, obj in hypernodes.items():
        spec = obj.get("spec")
        if isinstance(spec, Mapping):
            specs[name] = spec
    memo: dict[str, BoolVec] = {}

    def reach(name: str, stack: frozenset[str]) -> BoolVec:
        got = memo.get(name)
        if got is not None:
            return got
        mask = np.zeros(n, dtype=np.bool_)
        for member in specs[name].get("members") or []:
            if not isinstance(member, Mapping):
                continue
            sel = member.get("selector") or {}
            if member.get("type") == "HyperNode":
                for child in specs:
                    if child not in stack and child != name and _matches(sel, child, None):
                        mask |= reach(child, stack | {child})
            else:
                for i, meta in metas:
                    if meta is not None and _matches(sel, meta.name, meta.labels):
                        mask[i] = True
        memo[name] = mask
        return mask

    out = []
    for name, spec in sorted(specs.items()):
        try:
            tier = int(spec.get("tier", 0))
        except (TypeError, ValueError):
            continue
        out.append(Domain(name, tier, str(spec.get("tierName") or ""), reach(name, frozenset())))
    return out


def auto_domains(keys: list[str], nodes: SessionNodes) -> list[Domain]:
    """One domain per distinct value of each label key (tier = position + 1)."""
    out = []
    for tier, key in enumerate(keys, start=1):
        col = nodes.arrays.labels.get(key)
        if col is None:
            continue
        codes = col.codes[: nodes.n]
        for code, value in enumerate(col.values):
            mask = codes == code
            if mask.any():
                out.append(Domain(f"tier{tier}-{value}", tier, key, mask))
    return out


class NetworkTopologyPlugin(Plugin):
    name = "network-topology-aware"
    ARGUMENTS = (
        Arg(
            "autoTierLabels",
            "list",
            DEFAULT_AUTO_LABELS,
            "node label keys, one per tier from tier 1, that derive HyperNodes when none exist "
            '(`""`: off)',
        ),
        Arg("weight", "int", 1, "accepted (Volcano's score weight)"),
        Arg("hypernode.binpack.cpu", "float", 1, "weight of cpu packing HyperNodes", min=0),
        Arg("hypernode.binpack.memory", "float", 1, "weight of memory packing HyperNodes", min=0),
        Arg("hypernode.binpack.resources", "list", "", "further resources to pack (names)"),
        Arg(
            "hypernode.binpack.resources.<resource>",
            "float",
            1,
            "weight of a resource named in `hypernode.binpack.resources`",
            min=0,
        ),
        Arg("hypernode.binpack.normal-pod.enable", "bool", True, "accepted (Volcano)"),
        Arg("hypernode.binpack.normal-pod.fading", "float", 0.8, "accepted (Volcano)"),
        Arg("hypernode.gradient.evict.max-hypernodes", "int", 8, "accepted (Volcano)"),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        raw = arguments.get_str("autoTierLabels", DEFAULT_AUTO_LABELS)
        self.auto_keys = [k.strip() for k in raw.split(",") if k.strip()]
        self.weight = arguments.get_int("weight", 1)
        self.bp: dict[str, float] = {
            "cpu": arguments.get_float("hypernode.binpack.cpu", 1.0),
            "memory": arguments.get_float("hypernode.binpack.memory", 1.0),
        }
        extra = arguments.get_str("hypernode.binpack.resources", "")
        for name in (x.strip() for x in extra.split(",")):
            if name:
                self.bp[name] = arguments.get_float(f"hypernode.binpack.resources.{name}", 1.0)
        if any(w < 0 for w in self.bp.values()):
            raise ConfigError("plugin network-topology-aware: binpack weights must be >= 0")
        arguments.get_bool("hypernode.binpack.normal-pod.enable", True)
        arguments.get_float("hypernode.binpack.normal-pod.fading", 0.8)
        arguments.get_int("hypernode.gradient.evict.max-hypernodes", 8)
        self.pinned: dict[str, Domain] = {}
        self.domains: list[Domain] = []
        #: the auto domains last built, with the nodes they were built from (``_auto_domains``)
        self._auto: tuple[tuple[object, int, int], list[Domain]] | None = None

    # -- session --------------------------------------------------------------------------
    keeps_callbacks = True

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        nd = ssn.nodes
        if ssn.cache.hypernodes:
            self.domains = build_domains(ssn.cache.hypernodes, nd)
            self.domains.sort(key=lambda d: (d.tier, d.name))
        else:
            self.domains = self._auto_domains(nd)
        self.pinned = {}
        self._memo: dict[str, tuple[int, Domain | None]] = {}
        self.chosen: dict[str, str] = {}

    def register_kept(self, hooks: Hooks) -> None:
        hooks.add_dynamic_predicate(self._predicate)
        hooks.add_topology_preemption(self)

    def _auto_domains(self, nd: SessionNodes) -> list[Domain]:
        """``auto_domains`` in order, kept while the nodes' labels and membership are those
        they were built from (``NodeArrays.meta_gen``; domains are never changed once built)."""
        key = (nd.arrays, nd.arrays.meta_gen, nd.n)
        kept = self._auto
        if kept is None or kept[0] != key:
            domains = auto_domains(self.auto_keys, nd)
            domains.sort(key=lambda d: (d.tier, d.name))
            kept = self._auto = (key, domains)
        return list(kept[1])

    @staticmethod
    def spec(job: JobInfo) -> Mapping[str, Any] | None:
        nt = job.network_topology
        return nt if isinstance(nt, Mapping) and nt else None

    def max_tier(self, nt: Mapping[str, Any]) -> int:
        name = nt.get("highestTierName")
        if name:
            tiers = [d.tier for d in self.domains if d.tier_name == name]
            return max(tiers) if tiers else -1
        hta = nt.get("highestTierAllowed")
        if hta is None:
            return max((d.tier for d in self.domains), default=-1)
        try:
            return int(hta)
        except (TypeError, ValueError):
            return -1

    def _predicate(self, task: TaskInfo, nodes: SessionNodes) -> list[tuple[str, BoolVec]]:
        job = self.ssn.jobs.get(task.job_id or "")
        if job is None:
            return []
        nt = self.spec(job)
        if nt is None:
            return []
        hard = str(nt.get("mode") or "hard") == "hard"
        dom = self.domain_for(job)
        if dom is None:
            if hard:
                return [
                    (
                        "no HyperNode within the allowed tier can hold the job",
                        np.ones(nodes.n, dtype=np.bool_),
                    )
                ]
            return []
        self.chosen[job.uid] = dom.name
        return [(f"node(s) outside the job's HyperNode {dom.name}", ~dom.mask)]

    # -- domain choice --------------------------------------------------------------------
    def allowed(self, job: JobInfo) -> list[Domain]:
        nt = self.spec(job)
        if nt is None:
            return []
        top = self.max_tier(nt)
        return [d for d in self.domains if d.tier <= top]

    def domain_for(self, job: JobInfo) -> Domain | None:
        pinned = self.pinned.get(job.uid)
        if pinned is not None:
            return pinned
        pos = len(self.ssn.nodes.log)
        hit = self._memo.get(job.uid)
        if hit is not None and hit[0] == pos:
            return hit[1]
        got = self._choose(job)
        self._memo[job.uid] = (pos, got)
        return got

    def _choose(self, job: JobInfo) -> Domain | None:
        allowed = self.allowed(job)
        if not allowed:
            return None
        held = [t.node_idx for t in job.tasks.values() if t.status in HOLDING and t.node_idx >= 0]
        if held:
            idx = np.asarray(held, dtype=np.intp)
            allowed = [d for d in allowed if bool(d.mask[idx].all())]
            if not allowed:
                return None
        pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.gated]
        need = job.min_available - job.ready_task_num() - job.waiting_task_num()
        if need <= 0:
            need = min(len(pending), 1)
        pending.sort(key=self.ssn.dispatch.task_order_key())
        want = pending[:need]
        if len(want) < need:
            return None
        if held and not want:
            return allowed[0]
        best: tuple[float, Domain] | None = None
        tier = None
        for d in allowed:
            if tier is not None and d.tier != tier:
                break
            score = self._fit_score(d, want)
            if score is None:
                continue
            tier = d.tier
            if best is None or score > best[0]:
                best = (score, d)
        return best[1] if best is not None else None

    def _fit_score(self, d: Domain, tasks: list[TaskInfo]) -> float | None:
        """Bin-packing score of ``d`` after greedily placing ``tasks``; None if they do not fit."""
        ssn = self.ssn
        nd = ssn.nodes
        idx = np.flatnonzero(d.mask & nd.valid)
        if len(idx) == 0:
            return None
        fut = (nd.future_idle() if nd.has_future else nd.idle)[:, idx].copy()
        placer = ssn.placer
        need_total = np.zeros(fut.shape[0], dtype=np.int64)
        by_tmpl: dict[int, list[TaskInfo]] = {}
        for t in tasks:
            by_tmpl.setdefault(t.template.tid, []).append(t)
        for group in by_tmpl.values():
            tmpl = group[0].template
            ok = placer.state(tmpl).static_ok[idx]
            dims = np.flatnonzero(tmpl.fit > 0)
            left = len(group)
            for j in np.flatnonzero(ok):
                if left == 0:
                    break
                col = fut[dims, j]
                k = int((col // tmpl.fit[dims]).min()) if len(dims) else left
                k = min(k, left)
                if k > 0:
                    fut[:, j] -= tmpl.req * k
                    left -= k
            if left:
                return None
            need_total += tmpl.req * len(group)
        alloc = nd.alloc[:, idx].sum(axis=1)
        free_after = np.maximum(fut, 0).sum(axis=1)
        num = 0.0
        den = 0.0
        for rname, w in self.bp.items():
            r = ssn.resources.get(rname)
            if r is None or w <= 0 or alloc[r] <= 0:
                continue
            num += w * float(alloc[r] - free_after[r]) / float(alloc[r])
            den += w
        return num / den if den else 0.0

    def on_session_close(self, ssn: Session) -> None:
        """Say in the pending reason which domain a topology job was held to (or that none fit)."""
        for uid, reason in ssn.reasons.items():
            job = ssn.jobs.get(uid)
            if job is None:
                continue
            nt = self.spec(job)
            if nt is None:
                continue
            reason.details["networkTopology"] = {
                "mode": str(nt.get("mode") or "hard"),
                "highestTier": self.max_tier(nt),
                "hyperNode": self.chosen.get(job.uid),
            }
            if job.uid not in self.chosen and str(nt.get("mode") or "hard") == "hard":
                reason.message += (
                    f"; no HyperNode up to tier {self.max_tier(nt)} can hold the job's tasks"
                )

    # -- topology-aware preemption hooks ---------------------------------------------------
    def preemption_domains(self, job: JobInfo) -> list[Domain]:
        """Allowed domains, lowest tier first (largest capacity first inside a tier)."""
        held = [t.node_idx for t in job.tasks.values() if t.status in HOLDING and t.node_idx >= 0]
        doms = self.allowed(job)
        if held:
            idx = np.asarray(held, dtype=np.intp)
            doms = [d for d in doms if bool(d.mask[idx].all())]
        alloc = self.ssn.nodes.alloc
        return sorted(doms, key=lambda d: (d.tier, -int(alloc[1][d.mask].sum()), d.name))

    def pin(self, job: JobInfo, domain: Domain) -> None:
        self.pinned[job.uid] = domain

    def unpin(self, job: JobInfo) -> None:
        self.pinned.pop(job.uid, None)

    def domain_nodes(self, domain: Domain) -> npt.NDArray[np.intp]:
        return np.flatnonzero(domain.mask)
