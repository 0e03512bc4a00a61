"""Statement: Volcano's transaction over in-session placements
(docs/volcano-semantics.md#statement).

``allocate``/``pipeline``/``evict`` take effect in the session immediately (shares, node idle)
and are recorded; ``commit`` turns them into decisions (Allocate -> Binding + a Bind, Evict -> an
Eviction, Pipeline stays in-session), ``discard`` undoes them exactly in reverse order.
``save_operations``/``recover_operations`` and ``merge`` support the per-node dry runs of preempt
and reclaim.
"""

from __future__ import annotations

from dataclasses import dataclass

from batch.model.info import TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.framework.session import Session


@dataclass(slots=True)
class Operation:
    kind: str  # "allocate" | "pipeline" | "evict"
    task: TaskInfo
    reason: str = ""
    prev: TaskStatus = TaskStatus.PENDING


class Statement:
    """A list of operations on the session (see module docstring)."""

    __slots__ = ("ops", "ssn")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[Operation] = []

    def allocate(self, task: TaskInfo, node_idx: int) -> None:
        self.ssn.place(task, node_idx, TaskStatus.ALLOCATED)
        self.placed(task)

    def placed(self, task: TaskInfo) -> None:
        """Take over ``task``, which the session already placed Allocated (``Session.place``),
        as if ``allocate`` had placed it."""
        self.ops.append(Operation("allocate", task))

    def pipeline(self, task: TaskInfo, node_idx: int) -> None:
        self.ssn.place(task, node_idx, TaskStatus.PIPELINED)
        self.ops.append(Operation("pipeline", task))

    def evict(self, task: TaskInfo, reason: str) -> None:
        prev = self.ssn.evict(task)
        self.ops.append(Operation("evict", task, reason, prev))

    def _undo(self, op: Operation) -> None:
        if op.kind == "evict":
            self.ssn.unevict(op.task, op.prev)
        else:
            self.ssn.unplace(op.task)

    def discard(self) -> None:
        """Undo every operation, last first."""
        for op in reversed(self.ops):
            self._undo(op)
        self.ops.clear()

    def commit(self) -> None:
        """Evictions become Eviction decisions, allocations become Binding + Bind decisions."""
        ssn = self.ssn
        for op in self.ops:
            if op.kind == "evict":
                ssn.record_eviction(op.task, op.reason)
            elif op.kind == "pipeline":
                ssn.record_pipeline(op.task)
            else:
                ssn.set_status_placed(op.task, TaskStatus.BINDING)
                ssn.record_bind(op.task)
        self.ops.clear()

    def keep_pipelined(self) -> None:
        """The job is pipelined: keep the in-session effects, report the pipelined tasks."""
        for op in self.ops:
            if op.kind == "pipeline":
                self.ssn.record_pipeline(op.task)
        self.ops.clear()

    def save_operations(self) -> int:
        """A mark for ``recover_operations``."""
        return len(self.ops)

    def recover_operations(self, mark: int) -> None:
        """Undo the operations recorded after ``mark``."""
        while len(self.ops) > mark:
            self._undo(self.ops.pop())

    def merge(self, other: Statement) -> None:
        """Adopt ``other``'s operations (already applied) into this statement."""
        self.ops.extend(other.ops)
        other.ops.clear()

    def __len__(self) -> int:
        return len(self.ops)
