"""The one sentence `tephra job why` (and the dashboard's job page) says first: what blocks a job.

Why this exists: the scheduler's reasons are precise but written for its own vocabulary ("0/4
nodes are unavailable: 4 Insufficient nvidia.com/gpu", "would pass its fair share", a PodGroup
name). A user needs one actionable sentence that names the blocker: the gang can never fit (and
why), the queue it waits for (with its share and use), the preemption under way (and whose pods
go), GPUs free but scattered over nodes, the queue's quota. This module turns the scheduler's
verdict (the reason text it wrote into the PodGroup's Unschedulable condition) and the facts a
`batch.kube.why.WhyLookup` hands over into that sentence; the figures stay in the details below it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batch.api.fairshare import read_fair_share
from batch.api.resources import CPU, GPU, MEMORY, describe_amount, parse_resource_list

__all__ = ["Blocker", "amount_of", "blocker", "fragmentation"]

Obj = Mapping[str, Any]

_FAIR = re.compile(r"queue '([^']+)' would pass its fair share.*?queue '([^']+)' waits", re.S)
_QUOTA = re.compile(r"queue '([^']+)' cannot hold")
_OVERUSED = re.compile(
    r"needs (\S+) (\S+?)(?: with \S+ admitted to other jobs)?; cluster has (\S+),"
)
_IN_USE = re.compile(r"; (\S+) in use")
_INSUFFICIENT = re.compile(r"Insufficient (\S+?)[,;.]?(?:\s|$)")
_RELEASED = re.compile(r"waiting for resources (?:being|that are being) released(?: by (.+))?")


def amount_of(res: str, amount: int) -> str:
    """An internal amount in plain words: `8 GPUs`, `1.5 CPUs`, `64Gi of memory`."""
    shown = describe_amount(res, amount)
    if res == GPU:
        return f"{shown} GPU{'' if shown == '1' else 's'}"
    if res == CPU:
        return f"{shown} CPU{'' if shown == '1' else 's'}"
    if res == MEMORY:
        return f"{shown} of memory"
    return f"{shown} {res}"


@dataclass(frozen=True, slots=True)
class Blocker:
    """What the gang needs, and where: for `blocker` to say what stops it."""

    who: str  # "Job default/train", "PyTorchJob kf/pt-big"
    queue_name: str
    queue: Obj | None
    min_resources: Mapping[str, int]
    #: the gang's pods not on a node yet (`batch.kube.why.pod_facts`)
    unplaced: Sequence[Obj]


def _main_resource(amounts: Mapping[str, int]) -> str:
    return GPU if amounts.get(GPU) else CPU


def _fair_share(b: Blocker, verdict: str) -> str | None:
    found = _FAIR.search(verdict)
    if found is None:
        return None
    queue, first = found.groups()
    share = read_fair_share(b.queue) if b.queue is not None else None
    if share is None:
        return (
            f"{b.who} waits for queue {queue}: it is at its fair share, and queue {first} "
            "goes first."
        )
    res = _main_resource(b.min_resources or share.deserved)
    held, deserved = share.allocated.get(res, 0), share.deserved.get(res, 0)
    return (
        f"{b.who} waits for queue {queue}: it uses {amount_of(res, held)} of its fair share of "
        f"{describe_amount(res, deserved)}, and queue {first}, below its own share, goes first."
    )


def _quota(b: Blocker, verdict: str) -> str | None:
    if "quota insufficient" not in verdict:
        return None
    found = _QUOTA.search(verdict)
    queue = found.group(1) if found else b.queue_name
    spec = (b.queue or {}).get("spec") or {}
    cap = parse_resource_list(spec.get("capability") or {})
    held = parse_resource_list(((b.queue or {}).get("status") or {}).get("allocated") or {})
    short = [r for r in sorted(b.min_resources) if r in cap] or [_main_resource(b.min_resources)]
    res = short[0]
    if res not in cap:
        return f"{b.who} waits for queue {queue}'s quota (capability): it cannot hold the gang now."
    return (
        f"{b.who} waits for queue {queue}'s quota: it may hold {amount_of(res, cap[res])} and "
        f"holds {describe_amount(res, held.get(res, 0))}; the gang needs "
        f"{describe_amount(res, b.min_resources.get(res, 0))}."
    )


def _overused(b: Blocker, verdict: str) -> str | None:
    if "resource in cluster is overused" not in verdict:
        return None
    found, used = _OVERUSED.search(verdict), _IN_USE.search(verdict)
    if found is None:
        return f"{b.who} waits for free capacity: the cluster's resources are in use or promised."
    needs, res, total = found.groups()
    in_use = f", {used.group(1)} in use" if used else ""
    noun = amount_of(res, 0).split(" ", 1)[1] if res in (GPU, CPU) else res
    return (
        f"{b.who} waits for free {noun}: it needs {needs}, the cluster has {total}{in_use} "
        "or promised to admitted jobs."
    )


def fragmentation(
    unplaced: Sequence[Obj], free: Mapping[str, Mapping[str, int]], res: str
) -> tuple[int, int, int] | None:
    """(free in all, most free on one node, each pod's need) of `res` when the free total would
    hold the unplaced pods but no node holds one of them; None otherwise."""
    needs = [int((p.get("requests") or {}).get(res, 0)) for p in unplaced]
    needs = [n for n in needs if n > 0]
    if not needs or not free:
        return None
    amounts = [int(f.get(res, 0)) for f in free.values()]
    total, largest, each = sum(amounts), max(amounts), max(needs)
    if total >= sum(needs) and largest < each:
        return total, largest, each
    return None


def _insufficient(b: Blocker, verdict: str, free: Mapping[str, Mapping[str, int]]) -> str | None:
    short = _INSUFFICIENT.findall(verdict)
    if not short:
        return None
    for res in short:
        frag = fragmentation(b.unplaced, free, res)
        if frag is not None:
            total, largest, each = frag
            return (
                f"{b.who} waits for room on one node: {amount_of(res, total)} are free but at "
                f"most {describe_amount(res, largest)} on one node; each pod needs "
                f"{describe_amount(res, each)}."
            )
    res = short[0]
    total = sum(int(f.get(res, 0)) for f in free.values())
    needs = sum(int((p.get("requests") or {}).get(res, 0)) for p in b.unplaced)
    have = f": {amount_of(res, total)} free, its pods need {describe_amount(res, needs)}"
    return f"{b.who} waits for {res} to be freed{have if free and needs else ''}."


def _released(b: Blocker, verdict: str, victims: Sequence[str]) -> str | None:
    found = _RELEASED.search(verdict)
    if found is None:
        return None
    how = (found.group(1) or "eviction").strip()
    if victims:
        named = ", ".join(victims[:3]) + (
            f" and {len(victims) - 3} more" if len(victims) > 3 else ""
        )
        return f"{b.who} waits for {how} in progress: pods of {named} are being evicted for it."
    return f"{b.who} waits for {how} in progress: pods evicted for it are still releasing."


def _never(b: Blocker, verdict: str) -> str | None:
    at = verdict.find("can never fit:")
    if at < 0:
        return None
    why = verdict[at + len("can never fit:") :].strip().rstrip(".")
    return f"{b.who} can never run on this cluster as it stands: {why}."


def blocker(
    b: Blocker,
    verdict: str,
    *,
    free: Mapping[str, Mapping[str, int]],
    victims: Sequence[str],
) -> str:
    """The sentence naming what stops the gang, from the scheduler's `verdict` (the reason
    text of its Unschedulable condition; empty when it has said nothing)."""
    said = (
        _never(b, verdict)
        or _released(b, verdict, victims)
        or _fair_share(b, verdict)
        or _quota(b, verdict)
        or _overused(b, verdict)
        or _insufficient(b, verdict, free)
    )
    if said:
        return said
    if not verdict or "not admitted by enqueue" in verdict or verdict == "pod group is not ready":
        return f"{b.who} waits for the scheduler to admit its gang (nothing says it cannot yet)."
    if "scheduling gates" in verdict:
        return f"{b.who} waits for its pods' scheduling gates to be removed: {verdict}."
    return f"{b.who} waits: {verdict.rstrip('.')}."
