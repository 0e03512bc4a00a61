"""Why a job is (or was) pending, as lines of text, from the API objects that say so.

Why this exists: `tephra job why` and the dashboard's job page give the same explanation, so it
lives once, below both. The reasoning is a pure function of the job and the objects a `WhyLookup`
hands it (the PodGroup, its queue, its events, the waiting PodGroups, PriorityClasses, queues and
the cluster's capacity); the CLI looks them up with the API client, the dashboard in its
watch-fed cache. Lookups are made lazily, in the order the explanation needs them, so a job that
is not pending costs no list of every PodGroup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from batch.api.fairshare import read_fair_share
from batch.api.resources import CPU, GPU, describe_amount, parse_resource_list

__all__ = [
    "WhyLookup",
    "cluster_capacity",
    "explain",
    "queue_parent",
    "queue_position",
    "queue_share",
    "queue_weight",
]

Obj = Mapping[str, Any]

#: minResources keys that are quota names (requests.cpu, count/pods), not resources
_QUOTA_KEYS = ("requests.", "limits.", "count/")
_FINISHED = ("Completed", "Failed", "Terminated", "Aborted")


class WhyLookup(Protocol):
    """Where `explain` finds the objects around a job (None: the object does not exist)."""

    def podgroup(self, namespace: str, name: str) -> Obj | None: ...

    def queue(self, name: str) -> Obj | None: ...

    def events(self, namespace: str, involved: str) -> Sequence[Obj]:
        """Events about the object named `involved`, oldest first (reason, message)."""

    def podgroups(self) -> Sequence[Obj]: ...

    def priorities(self) -> Mapping[str, int]:
        """PriorityClass name -> value."""

    def queues(self) -> Sequence[Obj]: ...

    def capacity(self) -> Mapping[str, int]:
        """The nodes' allocatable resources, summed (internal amounts)."""


def cluster_capacity(allocatables: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Sum the nodes' `status.allocatable` maps into internal amounts per resource."""
    total: dict[str, int] = {}
    for allocatable in allocatables:
        for res, amount in parse_resource_list(allocatable or {}).items():
            total[res] = total.get(res, 0) + amount
    return total


def queue_position(
    podgroup: Obj, others: Sequence[Obj], priorities: Mapping[str, int]
) -> tuple[int, int]:
    """(1-based position, count) of a waiting PodGroup among its queue's waiting PodGroups,
    ordered as the scheduler's job order does: priority (high first), then creation time."""
    queue = (podgroup.get("spec") or {}).get("queue") or "default"

    def waiting(pg: Obj) -> bool:
        phase = (pg.get("status") or {}).get("phase") or "Pending"
        return (
            phase in ("Pending", "Inqueue")
            and ((pg.get("spec") or {}).get("queue") or "default") == queue
        )

    def order(pg: Obj) -> tuple[int, str, str]:
        pcn = str((pg.get("spec") or {}).get("priorityClassName") or "")
        m = pg.get("metadata") or {}
        return (-priorities.get(pcn, 0), str(m.get("creationTimestamp") or ""), str(m.get("name")))

    line = sorted((pg for pg in others if waiting(pg)), key=order)
    uid = (podgroup.get("metadata") or {}).get("uid")
    for i, pg in enumerate(line):
        if (pg.get("metadata") or {}).get("uid") == uid:
            return i + 1, len(line)
    return 0, len(line)


def queue_parent(queue: Obj) -> str:
    """A queue's parent: spec.parent, else root (root itself has none)."""
    name = (queue.get("metadata") or {}).get("name")
    return str((queue.get("spec") or {}).get("parent") or ("" if name == "root" else "root"))


def queue_weight(queue: Obj) -> int:
    """A queue's weight as the scheduler reads it (1 when unset or not positive)."""
    weight = (queue.get("spec") or {}).get("weight")
    return weight if isinstance(weight, int) and weight > 0 else 1


def queue_share(
    queue: Obj, queues: Sequence[Obj], capacity: Mapping[str, int], resources: Sequence[str]
) -> str:
    """A queue's weight among the queues of its parent, and what it holds (status.allocated)
    of the cluster's `capacity` (internal amounts) in each of `resources`."""
    name = str((queue.get("metadata") or {}).get("name"))
    parent = queue_parent(queue)
    siblings = sum(queue_weight(q) for q in queues if queue_parent(q) == parent and queue_parent(q))
    allocated = parse_resource_list((queue.get("status") or {}).get("allocated") or {})
    held = []
    for res in resources:
        amount, total = allocated.get(res, 0), capacity.get(res, 0)
        of = f" of {describe_amount(res, total)}" if total else ""
        pct = f" ({100 * amount / total:.0f}%)" if total else ""
        held.append(f"{describe_amount(res, amount)}{of} {res}{pct}")
    return (
        f"queue {name}: weight {queue_weight(queue)} of {max(siblings, queue_weight(queue))} "
        f"among the queues under {parent or '(none)'}; holds {', '.join(held)}"
    )


def _job_phase(job: Obj) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _queue_lines(queue_name: str, queue: Obj | None) -> list[str]:
    if queue is None:
        return [f"  queue {queue_name} does not exist: the scheduler ignores this job"]
    state = (queue.get("status") or {}).get("state") or "Open"
    closed = [f"  queue {queue_name} is {state}: nothing new is admitted from it"]
    return [*(closed if state != "Open" else []), *_deserved_line(queue_name, queue)]


def _deserved_line(queue_name: str, queue: Obj) -> list[str]:
    """What the queue holds of what the scheduler says it deserves (the figures it published
    on the Queue, `batch.api.fairshare`), in GPUs, or cpu on a cluster without GPUs."""
    published = read_fair_share(queue)
    if published is None:
        return []
    res = GPU if GPU in published.deserved or GPU in published.allocated else CPU
    held = describe_amount(res, published.allocated.get(res, 0))
    deserved = describe_amount(res, published.deserved.get(res, 0))
    return [
        f"  queue {queue_name}: allocated {held} of deserved {deserved} {res} "
        f"(weight {queue_weight(queue)})"
    ]


def _verdict(pg: Obj) -> list[str]:
    """The latest scheduling verdict of the PodGroup's conditions, if any."""
    conds = [
        cond
        for cond in (pg.get("status") or {}).get("conditions") or []
        if cond.get("status") == "True" and cond.get("type") in ("Unschedulable", "Scheduled")
    ]
    conds.sort(key=lambda x: str(x.get("lastTransitionTime") or ""))
    if not conds:
        return []
    cond = conds[-1]
    text = f"{cond.get('reason') or ''} {cond.get('message') or ''}".strip()
    return [f"  {cond.get('type')}: {text}"]


def _waiting_lines(look: WhyLookup, pg: Obj, queue: Obj | None, queue_name: str) -> list[str]:
    lines: list[str] = []
    pos, total = queue_position(pg, look.podgroups(), look.priorities())
    if pos:
        lines.append(f"  queue position: {pos} of {total} waiting in queue {queue_name}")
    if queue is not None:
        asked = (pg.get("spec") or {}).get("minResources") or {}
        resources = [r for r in sorted(asked) if r != "pods" and not r.startswith(_QUOTA_KEYS)]
        share = queue_share(queue, look.queues(), look.capacity(), resources or ["cpu"])
        lines.append(f"  {share}")
    return lines


def explain(job: Obj, look: WhyLookup) -> list[str]:
    """The lines of `tephra job why` for `job` (a VCJob object as the API serves it)."""
    meta = job.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
    phase = _job_phase(job) or "(new)"
    queue_name = (job.get("spec") or {}).get("queue") or "default"
    lines = [f"Job {namespace}/{name}: phase {phase}, queue {queue_name}"]
    state = (job.get("status") or {}).get("state") or {}
    if phase == "Pending" and state.get("reason"):  # the job controller's own reason first
        lines.append(f"  {state['reason']}: {state.get('message') or ''}")
    pg_name = f"{name}-{meta.get('uid')}"
    pg = look.podgroup(namespace, pg_name)
    queue = look.queue(queue_name)
    lines += _queue_lines(queue_name, queue)
    if pg is None:
        if phase in _FINISHED:
            return [*lines, f"  the job is {phase}; its PodGroup was removed"]
        return [*lines, "  no PodGroup yet: the job controller has not initialised the job"]
    pg_phase = (pg.get("status") or {}).get("phase") or "Pending"
    minm = (pg.get("spec") or {}).get("minMember")
    lines.append(f"  PodGroup {pg_name}: phase {pg_phase}, minMember {minm}")
    if pg_phase == "Pending":
        lines.append(
            "  waiting for the scheduler to admit the gang (enqueue): pods are not created yet"
        )
    if pg_phase in ("Running", "Completed") or phase not in ("Pending", "Restarting", "(new)"):
        st = job.get("status") or {}
        return [
            *lines,
            f"  not pending: job {phase} (running {st.get('running', 0)}, "
            f"succeeded {st.get('succeeded', 0)}, failed {st.get('failed', 0)})",
        ]
    reasons = _verdict(pg)
    reasons += [
        f"  event {ev.get('reason')}: {ev.get('message')}"
        for ev in list(look.events(namespace, pg_name))[-3:]
    ]
    lines += reasons
    if pg_phase in ("Pending", "Inqueue"):
        lines += _waiting_lines(look, pg, queue, queue_name)
        if not reasons:
            lines.append("  no reason recorded yet (the scheduler has not examined this gang)")
    return lines
