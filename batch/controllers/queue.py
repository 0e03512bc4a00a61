"""The Queue reconciler: Open/Closed/Closing, hierarchy propagation and PodGroup counts.

Reproduces Volcano's queue controller (`volcano-semantics.md#queue-status, #queue-state-machine`):
OpenQueue/CloseQueue Commands
(executed, then deleted; both are idempotent so a repeat after a crash changes nothing), Closing
until the queue holds no PodGroup, closing propagated to children (marked
`volcano.sh/closed-by-parent=true`) and reopened with the parent, a child never opened under a
closed parent, `spec.parent` defaulted to `root`, and `status.{pending,inqueue,running,unknown,
completed}` counted from the queue's PodGroups. Pure: the caller passes the queue, every queue
(for parent/children), the queue's PodGroups and its Commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.controllers import constants as c
from batch.controllers.actions import (
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.jobspec import meta
from batch.controllers.timeutil import parse_time

JSON = dict[str, Any]

_COUNT_KEYS = {
    c.PG_PENDING: "pending",
    c.PG_INQUEUE: "inqueue",
    c.PG_RUNNING: "running",
    c.PG_UNKNOWN: "unknown",
    c.PG_COMPLETED: "completed",
}


def queue_state(queue: Mapping[str, Any] | None) -> str:
    if queue is None:
        return ""
    return str((queue.get("status") or {}).get("state") or "")


def parent_of(queue: Mapping[str, Any]) -> str | None:
    name = meta(queue).get("name")
    if name == c.ROOT_QUEUE:
        return None
    return str((queue.get("spec") or {}).get("parent") or c.ROOT_QUEUE)


def children_of(name: str, queues: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(
        str(meta(q).get("name"))
        for q in queues
        if meta(q).get("name") != name and parent_of(q) == name
    )


def podgroup_counts(podgroups: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(_COUNT_KEYS.values(), 0)
    for pg in podgroups:
        phase = str((pg.get("status") or {}).get("phase") or c.PG_PENDING)
        counts[_COUNT_KEYS.get(phase, "pending")] += 1
    return counts


def oldest_pending(podgroups: Sequence[Mapping[str, Any]]) -> float | None:
    """Creation time (epoch seconds) of the oldest PodGroup still Pending, None if none is:
    what an alert on gangs waiting too long to be admitted compares with the clock."""
    stamps = [
        created.timestamp()
        for pg in podgroups
        if str((pg.get("status") or {}).get("phase") or c.PG_PENDING) == c.PG_PENDING
        and (created := parse_time(meta(pg).get("creationTimestamp"))) is not None
    ]
    return min(stamps, default=None)


def reconcile_queue(
    queue: Mapping[str, Any],
    *,
    queues: Sequence[Mapping[str, Any]],
    podgroups: Sequence[Mapping[str, Any]],
    commands: Sequence[Mapping[str, Any]] = (),
) -> ReconcileResult:
    """Intended changes for one Queue (cluster-scoped)."""
    result = ReconcileResult()
    m = meta(queue)
    if m.get("deletionTimestamp"):
        return result
    name = str(m.get("name"))
    ref = ObjectRef(c.SCHED_API, "Queue", "", name, m.get("uid"), m.get("resourceVersion"))
    by_name = {str(meta(q).get("name")): q for q in queues}
    state = queue_state(queue)
    annotations = dict(m.get("annotations") or {})
    closed_by_parent = annotations.get(c.CLOSED_BY_PARENT) == "true"
    parent = parent_of(queue)
    parent_state = queue_state(by_name.get(parent)) if parent else ""
    parent_closed = parent_state in (c.Q_CLOSED, c.Q_CLOSING)
    drained = len(podgroups) == 0
    new_state = state or c.Q_OPEN
    new_mark: bool | None = None  # None = leave the annotation as it is

    if name != c.ROOT_QUEUE and not (queue.get("spec") or {}).get("parent"):
        result.actions.append(PatchObject(ref, {"spec": {"parent": c.ROOT_QUEUE}}))

    cmds = sorted(
        commands, key=lambda x: (str(meta(x).get("creationTimestamp") or ""), meta(x).get("name"))
    )
    deletes: list[Any] = []
    for cmd in cmds:
        action = str(cmd.get("action") or "")
        cm = meta(cmd)
        deletes.append(
            DeleteObject(
                ObjectRef(
                    c.BUS_API,
                    "Command",
                    str(cm.get("namespace") or ""),
                    str(cm.get("name")),
                    cm.get("uid"),
                )
            )
        )
        result.actions.append(
            EmitEvent(ref, c.COMMAND_ISSUED, f"Start to execute command {action}, and clean it up")
        )
        if action == c.OPEN_QUEUE:
            if parent_closed:
                result.actions.append(
                    EmitEvent(
                        ref,
                        "OpenQueueFailed",
                        f"queue {name} cannot be opened while its parent {parent} "
                        f"is {parent_state}",
                        type="Warning",
                    )
                )
                continue
            new_state = c.Q_OPEN
            new_mark = False
        elif action == c.CLOSE_QUEUE:
            new_state = c.Q_CLOSED if drained else c.Q_CLOSING
            new_mark = False
        else:
            result.actions.append(
                EmitEvent(ref, "UnknownCommand", f"unknown queue action {action!r}", type="Warning")
            )

    if not cmds:
        if new_state == c.Q_UNKNOWN:
            new_state = c.Q_OPEN
        if parent_closed and new_state == c.Q_OPEN:
            new_state = c.Q_CLOSED if drained else c.Q_CLOSING
            new_mark = True
        elif (
            closed_by_parent
            and parent_state in (c.Q_OPEN, "")
            and new_state in (c.Q_CLOSED, c.Q_CLOSING)
        ):
            new_state = c.Q_OPEN
            new_mark = False
    if new_state == c.Q_CLOSING and drained:
        new_state = c.Q_CLOSED

    if new_mark is True and not closed_by_parent:
        result.actions.append(
            PatchObject(ref, {"metadata": {"annotations": {c.CLOSED_BY_PARENT: "true"}}})
        )
    elif new_mark is False and closed_by_parent:
        result.actions.append(
            PatchObject(ref, {"metadata": {"annotations": {c.CLOSED_BY_PARENT: None}}})
        )

    status = queue.get("status") or {}
    desired: JSON = {"state": new_state, **podgroup_counts(podgroups)}
    patch = {k: v for k, v in desired.items() if status.get(k) != v}
    if patch:
        result.actions.append(PatchStatus(ref, patch))
    result.actions.extend(deletes)
    return result


def queue_command(queue_name: str, action: str, *, namespace: str = "default") -> JSON:
    """A bus Command for a queue (`tephra queue operate`)."""
    target = {
        "apiVersion": c.SCHED_API,
        "kind": "Queue",
        "name": queue_name,
        "uid": "",
    }
    return {
        "apiVersion": c.BUS_API,
        "kind": "Command",
        "metadata": {"generateName": f"{queue_name}-{action.lower()}-", "namespace": namespace},
        "action": action,
        "target": target,
    }
