"""What-if: replay the same workload with today's queue configuration and a proposed one.

Why this exists: admins tune queue weights by guessing. `compare_queue_configs` replays one
workload (usually the ledger's recorded submissions) twice through the real scheduler — once
with the queues as they are, once with the changes applied — and reports per queue how waiting
time and GPU share move, so the admin sees who gains and who loses before applying anything.
What the workload assumed or left out (`Workload.assumptions`, e.g. the run time given to jobs
that never started) is part of the answer: `format_whatif` prints it under the table.

Changes are written like `queue=q1,weight=3` or
`queue=q2,capability.nvidia.com/gpu=16,reclaimable=false`. A change naming a queue the workload
does not have adds that queue (weight 1 unless the change says otherwise): it has no recorded
jobs, but it takes part in the share and capacity decisions of the proposed run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from batch.sim.cluster import QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.policies import Policy, policies_for
from batch.sim.runner import BackendFactory, PolicyRun, run_policy
from batch.sim.workload import Workload

__all__ = [
    "QueueChange",
    "apply_changes",
    "compare_queue_configs",
    "format_whatif",
    "new_queues",
    "parse_change",
]


@dataclass(frozen=True, slots=True)
class QueueChange:
    queue: str
    weight: int | None = None
    capability: tuple[tuple[str, str], ...] = ()
    guarantee: tuple[tuple[str, str], ...] = ()
    reclaimable: bool | None = None


def parse_change(text: str) -> QueueChange:
    """Parse one `--set` value (comma separated key=value; `queue` is required)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise SimInputError(f"--set {text!r}: {part!r} is not key=value")
        fields[key.strip()] = value.strip()
    queue = fields.pop("queue", None)
    if not queue:
        raise SimInputError(f"--set {text!r}: needs queue=NAME")
    weight: int | None = None
    capability: list[tuple[str, str]] = []
    guarantee: list[tuple[str, str]] = []
    reclaimable: bool | None = None
    for key, value in fields.items():
        if key == "weight":
            try:
                weight = int(value)
            except ValueError:
                weight = -1
            if weight < 1:
                raise SimInputError(f"--set {text!r}: weight must be an integer >= 1")
        elif key.startswith("capability."):
            capability.append((key.removeprefix("capability."), value))
        elif key.startswith("guarantee."):
            guarantee.append((key.removeprefix("guarantee."), value))
        elif key == "reclaimable":
            if value.lower() not in ("true", "false"):
                raise SimInputError(f"--set {text!r}: reclaimable must be true or false")
            reclaimable = value.lower() == "true"
        else:
            raise SimInputError(
                f"--set {text!r}: unknown key {key!r} (weight, capability.<resource>, "
                "guarantee.<resource>, reclaimable)"
            )
    return QueueChange(queue, weight, tuple(capability), tuple(guarantee), reclaimable)


def new_queues(queues: Sequence[QueueSpec], changes: Sequence[QueueChange]) -> list[str]:
    """The queues that `changes` name and `queues` lack, in order: `apply_changes` adds them."""
    known = {q.name for q in queues}
    return list(dict.fromkeys(ch.queue for ch in changes if ch.queue not in known))


def apply_changes(queues: Sequence[QueueSpec], changes: Sequence[QueueChange]) -> list[QueueSpec]:
    """`queues` with `changes` applied; a queue not in `queues` is added after them."""
    by_name = {q.name: q for q in queues}
    for ch in changes:
        q = by_name.get(ch.queue) or QueueSpec(ch.queue)
        if ch.weight is not None:
            q = replace(q, weight=ch.weight)
        if ch.capability:
            q = replace(q, capability={**(q.capability or {}), **dict(ch.capability)})
        if ch.guarantee:
            q = replace(q, guarantee={**(q.guarantee or {}), **dict(ch.guarantee)})
        if ch.reclaimable is not None:
            q = replace(q, reclaimable=ch.reclaimable)
        by_name[ch.queue] = q
    return list(by_name.values())


@dataclass(slots=True)
class WhatIfResult:
    current: PolicyRun
    proposed: PolicyRun
    rows: list[dict[str, Any]]
    #: what the replay assumed or left out (`Workload.assumptions`): part of the answer
    assumptions: list[str] = field(default_factory=list)


def compare_queue_configs(
    workload: Workload,
    changes: Sequence[QueueChange],
    *,
    conf: str | None = None,
    period: float = 1.0,
    backend_factory: BackendFactory | None = None,
) -> WhatIfResult:
    """Run `workload` with its queues and with `changes` applied; per-queue comparison rows."""
    policy: Policy = policies_for(conf=conf, compare=[], period=period)[0]
    proposed_queues = apply_changes(workload.cluster.queues, changes)
    current = run_policy(workload, policy, backend_factory=backend_factory)
    proposed = run_policy(
        workload.with_queues(proposed_queues),
        replace(policy, name="proposed"),
        backend_factory=backend_factory,
    )
    weights_now = {q.name: q.weight for q in workload.cluster.queues}
    weights_new = {q.name: q.weight for q in proposed_queues}
    added = set(new_queues(workload.cluster.queues, changes))
    names = dict.fromkeys([*current.result.metrics.queue_names, *weights_new])
    rows = [
        _row(name, name in added, current.summary, proposed.summary, weights_now, weights_new)
        for name in names
    ]
    return WhatIfResult(current, proposed, rows, list(workload.assumptions))


def _verdict(new: bool, a: dict[str, Any], b: dict[str, Any]) -> str:
    if new:
        return "new"
    wa, wb = a.get("queue_delay_mean_s"), b.get("queue_delay_mean_s")
    sa, sb = a.get("allocated_share") or 0.0, b.get("allocated_share") or 0.0
    if wa is not None and wb is not None and abs(wb - wa) > 1e-9:
        return "gains" if wb < wa else "loses"
    if abs(sb - sa) > 1e-9:
        return "gains" if sb > sa else "loses"
    return "same"


def _row(
    name: str,
    new: bool,
    current: dict[str, Any],
    proposed: dict[str, Any],
    weights_now: dict[str, int],
    weights_new: dict[str, int],
) -> dict[str, Any]:
    """One queue's comparison; a queue without jobs (or new) has no waits and zero shares."""
    a: dict[str, Any] = current["queues"].get(name) or {}
    b: dict[str, Any] = proposed["queues"].get(name) or {}
    wa, wb = a.get("queue_delay_mean_s"), b.get("queue_delay_mean_s")
    sa, sb = a.get("allocated_share") or 0.0, b.get("allocated_share") or 0.0
    return {
        "queue": name,
        "new": new,
        "weight_now": None if new else weights_now.get(name, 1),
        "weight_proposed": weights_new.get(name, 1),
        "jobs": a.get("jobs") or b.get("jobs") or 0,
        "wait_mean_now_s": wa,
        "wait_mean_proposed_s": wb,
        "wait_p99_now_s": a.get("queue_delay_p99_s"),
        "wait_p99_proposed_s": b.get("queue_delay_p99_s"),
        "share_now": sa,
        "share_proposed": sb,
        "deserved_now": a.get("deserved_share"),
        "deserved_proposed": b.get("deserved_share"),
        "verdict": _verdict(new, a, b),
    }


def format_whatif(result: WhatIfResult) -> str:
    def s(v: Any) -> str:
        if v is None:
            return "-"
        return f"{float(v):.0f}s"

    def p(v: Any) -> str:
        return "-" if v is None else f"{float(v) * 100:.1f}%"

    def pair(fmt: Callable[[Any], str], now: Any, proposed: Any) -> str:
        return "-" if now is None and proposed is None else f"{fmt(now)}->{fmt(proposed)}"

    head = ["queue", "weight", "jobs", "wait mean", "wait p99", "GPU share", "deserved", "verdict"]
    table = [head]
    for r in result.rows:
        table.append(
            [
                r["queue"],
                f"{'new' if r['weight_now'] is None else r['weight_now']}->{r['weight_proposed']}",
                str(r["jobs"]),
                pair(s, r["wait_mean_now_s"], r["wait_mean_proposed_s"]),
                pair(s, r["wait_p99_now_s"], r["wait_p99_proposed_s"]),
                f"{p(r['share_now'])}->{p(r['share_proposed'])}",
                pair(p, r["deserved_now"], r["deserved_proposed"]),
                r["verdict"],
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    cur, new = result.current.summary, result.proposed.summary
    lines.append("")
    lines.append(
        f"overall: wait mean {s(cur['queue_delay_mean_s'])} -> {s(new['queue_delay_mean_s'])}, "
        f"JCT mean {s(cur['jct_mean_s'])} -> {s(new['jct_mean_s'])}, "
        f"utilization {p(cur['utilization'])} -> {p(new['utilization'])}, "
        f"Jain {cur['jain_index'] or 0:.3f} -> {new['jain_index'] or 0:.3f}"
    )
    if result.assumptions:
        lines += ["", "assumed:", *(f"  {a}" for a in result.assumptions)]
    return "\n".join(lines)
