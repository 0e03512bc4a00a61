"""The Queue reconciler: Open/Closed/Closing, hierarchy propagation and PodGroup counts.

Reproduces Volcano's queue controller (`volcano-semantics.md#queue-status, #queue-state-machine`):
OpenQueue/CloseQueue Commands
(executed, then deleted; both are idempotent so a repeat after a crash changes nothing), Closing
until the queue holds no PodGroup, closing propagated to children (marked
`volcano.sh/closed-by-parent=true`) and reopened with the parent, a child never opened under a
closed parent, `spec.parent` defaulted to `root`, and `status.{pending,inqueue,running,unknown,
completed}` counted from the queue's PodGroups (a queue's first status carries an empty
`allocated`, which Volcano's Queue CRD requires). Pure: the caller passes the queue, every queue
(for parent/children), the queue's PodGroups and its Commands.

Who may send a queue Command is the webhook's check (`batch.api.admission.access`); an admin can
also name the one namespace queue Commands are taken from (`--queue-command-namespace`): a
Command from any other is refused, never executed (a `CommandRefused` warning on the Queue and
on the Command, then deleted), which holds even without the webhook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batch.api.queueview import QueueView, queue_view
from batch.controllers import constants as c
from batch.controllers.effects import (
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
    return "" if queue is None else queue_view(queue).state


def parent_of(queue: Mapping[str, Any]) -> str | None:
    return queue_view(queue).parent


def children_of(name: str, queues: Sequence[Mapping[str, Any]]) -> list[str]:
    views = (queue_view(q) for q in queues)
    return sorted(v.name for v in views if v.name != name and v.parent == name)


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


@dataclass(frozen=True, slots=True)
class _QueueView:
    """What one Queue's reconcile reads: the queue, its parent's state, whether it is drained."""

    name: str
    ref: ObjectRef
    parent: str | None
    parent_state: str
    closed_by_parent: bool
    drained: bool

    @property
    def parent_closed(self) -> bool:
        return self.parent_state in (c.Q_CLOSED, c.Q_CLOSING)


@dataclass(slots=True)
class _Transition:
    """The state the reconcile moves to, and the closed-by-parent mark (None: leave it)."""

    state: str
    mark: bool | None = None


def reconcile_queue(
    queue: Mapping[str, Any],
    *,
    queues: Sequence[Mapping[str, Any]],
    podgroups: Sequence[Mapping[str, Any]],
    commands: Sequence[Mapping[str, Any]] = (),
    command_namespace: str | None = None,
) -> ReconcileResult:
    """Intended changes for one Queue (cluster-scoped); with `command_namespace`, Commands from
    other namespaces are refused."""
    result = ReconcileResult()
    queue_read = queue_view(queue)
    if queue_read.deleting:
        return result
    view = _view(queue_read, queues, podgroups)
    if view.name != c.ROOT_QUEUE and not queue_read.parent_written:
        result.actions.append(PatchObject(view.ref, {"spec": {"parent": c.ROOT_QUEUE}}))
    move = _Transition(queue_read.state or c.Q_OPEN)
    cmds = sorted(
        commands, key=lambda x: (str(meta(x).get("creationTimestamp") or ""), meta(x).get("name"))
    )
    if not _take_commands(view, cmds, move, result, command_namespace):
        _follow_parent(view, move)
    if move.state == c.Q_CLOSING and view.drained:
        move.state = c.Q_CLOSED
    _patch_mark(view, move.mark, result)
    status = queue_read.status
    desired: JSON = {"state": move.state, **podgroup_counts(podgroups)}
    if not status:
        desired["allocated"] = {}  # Volcano's Queue CRD requires it in any status written
    patch = {k: v for k, v in desired.items() if status.get(k) != v}
    if patch:
        result.actions.append(PatchStatus(view.ref, patch))
    result.actions.extend(DeleteObject(_command_ref(cmd)) for cmd in cmds)
    return result


def _view(
    queue: QueueView,
    queues: Sequence[Mapping[str, Any]],
    podgroups: Sequence[Mapping[str, Any]],
) -> _QueueView:
    parent = queue.parent
    by_name = {v.name: v for v in map(queue_view, queues)}
    parent_view = by_name.get(parent) if parent else None
    return _QueueView(
        name=queue.name,
        ref=ObjectRef(
            c.SCHED_API, "Queue", "", queue.name, queue.uid or None, queue.resource_version or None
        ),
        parent=parent,
        parent_state=parent_view.state if parent_view is not None else "",
        closed_by_parent=queue.closed_by_parent,
        drained=len(podgroups) == 0,
    )


def _command_ref(cmd: Mapping[str, Any]) -> ObjectRef:
    cm = meta(cmd)
    return ObjectRef(
        c.BUS_API, "Command", str(cm.get("namespace") or ""), str(cm.get("name")), cm.get("uid")
    )


def _take_commands(
    view: _QueueView,
    cmds: Sequence[Mapping[str, Any]],
    move: _Transition,
    result: ReconcileResult,
    command_namespace: str | None,
) -> bool:
    """Execute the Commands in order, refusing those from outside `command_namespace`: whether
    any was executed."""
    executed = False
    for cmd in cmds:
        if _trusted(cmd, command_namespace):
            _execute_command(view, cmd, move, result)
            executed = True
        else:
            _refuse_command(view, cmd, str(command_namespace), result)
    return executed


def _trusted(cmd: Mapping[str, Any], command_namespace: str | None) -> bool:
    """Whether a queue Command comes from where queue Commands are taken (anywhere when unset)."""
    return not command_namespace or meta(cmd).get("namespace") == command_namespace


def _refuse_command(
    view: _QueueView, cmd: Mapping[str, Any], command_namespace: str, result: ReconcileResult
) -> None:
    """Say on the Queue and on the Command why it is not executed (it is deleted, as every
    Command the controller has handled)."""
    cm = meta(cmd)
    message = (
        f"command {cm.get('namespace')}/{cm.get('name')} ({cmd.get('action')}) refused: "
        f"queue Commands are taken from namespace {command_namespace} only "
        "(--queue-command-namespace)"
    )
    for ref in (view.ref, _command_ref(cmd)):
        result.actions.append(EmitEvent(ref, c.COMMAND_REFUSED, message, type="Warning"))


def _execute_command(
    view: _QueueView, cmd: Mapping[str, Any], move: _Transition, result: ReconcileResult
) -> None:
    """OpenQueue / CloseQueue (a child is never opened under a closed parent)."""
    action = str(cmd.get("action") or "")
    result.actions.append(
        EmitEvent(view.ref, c.COMMAND_ISSUED, f"Start to execute command {action}, and clean it up")
    )
    if action == c.OPEN_QUEUE and view.parent_closed:
        message = (
            f"queue {view.name} cannot be opened while its parent {view.parent} "
            f"is {view.parent_state}"
        )
        result.actions.append(EmitEvent(view.ref, "OpenQueueFailed", message, type="Warning"))
    elif action == c.OPEN_QUEUE:
        move.state, move.mark = c.Q_OPEN, False
    elif action == c.CLOSE_QUEUE:
        move.state, move.mark = (c.Q_CLOSED if view.drained else c.Q_CLOSING), False
    else:
        message = f"unknown queue action {action!r}"
        result.actions.append(EmitEvent(view.ref, "UnknownCommand", message, type="Warning"))


def _follow_parent(view: _QueueView, move: _Transition) -> None:
    """With no Command: close with a closing parent (marked), reopen with a reopened one."""
    if move.state == c.Q_UNKNOWN:
        move.state = c.Q_OPEN
    if view.parent_closed and move.state == c.Q_OPEN:
        move.state, move.mark = (c.Q_CLOSED if view.drained else c.Q_CLOSING), True
    elif (
        view.closed_by_parent
        and view.parent_state in (c.Q_OPEN, "")
        and move.state in (c.Q_CLOSED, c.Q_CLOSING)
    ):
        move.state, move.mark = c.Q_OPEN, False


def _patch_mark(view: _QueueView, mark: bool | None, result: ReconcileResult) -> None:
    if mark is True and not view.closed_by_parent:
        value: str | None = "true"
    elif mark is False and view.closed_by_parent:
        value = None
    else:
        return
    result.actions.append(
        PatchObject(view.ref, {"metadata": {"annotations": {c.CLOSED_BY_PARENT: value}}})
    )


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
