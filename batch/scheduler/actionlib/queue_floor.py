"""What a victim's queue must keep: the floors of the reclaiming actions, reclaim and gangreclaim.

Both evict from other queues for a starving one; both must not take a queue below its
``guarantee`` on a guaranteed resource (always), and with ``keepVictimQueueAtDeserved`` not below
its deserved share either: the queue's share after the eviction (max over resources of
allocated / deserved, as proportion computes it) stays at or above ``1 - reclaimHysteresis``, so a
queue that was reclaimed from is never left entitled to reclaim straight back (no ping-pong).
Except a whole gang larger than its queue's share (``borrowed``): it ran on room its queue was
not owed, and the queue could never reclaim it back within its share, so it may go whole.
``QueueLedger`` keeps each queue's allocated live through the session's dry runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from batch.model.info import TaskInfo
from batch.model.status import ALLOCATED_STATUS, TaskStatus
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.feasibility import holds_nothing
from batch.scheduler.framework.session import Session

Vec = npt.NDArray[np.int64]

#: the ledger's sums leave out jobs that hold nothing (no task in an allocated status: their
#: ``allocated`` is zero) instead of adding their zeros (False: every job; tests compare both)
SKIP_IDLE_JOBS = True


class QueueLedger:
    """Live per-queue allocated (Σ job.allocated), kept by an event handler while active.

    The reclaiming actions only pipeline (no change to job.allocated), evict (Running ->
    Releasing: the deallocate handler sees Releasing) and undo evictions (the allocate handler
    sees the task back in an allocated status).
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.alloc: dict[str, Vec] = {}
        for job in ssn.jobs.values():
            cur = self.alloc.get(job.queue)
            if cur is None:
                self.alloc[job.queue] = job.allocated.copy()
            elif not (SKIP_IDLE_JOBS and holds_nothing(job)):  # adding zero: a backlog's jobs
                self.alloc[job.queue] = cur + job.allocated
        self.active = True

        def on_alloc(t: TaskInfo) -> None:
            if self.active and t.status in ALLOCATED_STATUS:
                self._add(t, 1)

        def on_dealloc(t: TaskInfo) -> None:
            if self.active and t.status is TaskStatus.RELEASING:
                self._add(t, -1)

        ssn.hooks.add_event_handler(on_alloc, on_dealloc)

    def _add(self, t: TaskInfo, sign: int) -> None:
        job = self.ssn.jobs.get(t.job_id or "")
        if job is None:
            return
        cur = self.alloc.get(job.queue)
        if cur is None:
            cur = self.alloc[job.queue] = self.ssn.resources.zeros()
        if sign > 0:
            cur += t.req
        else:
            cur -= t.req

    def allocated(self, queue: str) -> Vec:
        got = self.alloc.get(queue)
        return got if got is not None else self.ssn.resources.zeros()


@dataclass(slots=True, frozen=True)
class FloorArgs:
    keep_deserved: bool
    factor: float  # 1 - reclaimHysteresis


#: the victim-queue floor arguments of reclaim and gangreclaim (read by ``parse_floor_arguments``)
FLOOR_ARGS: tuple[Arg, ...] = (
    Arg(
        "keepVictimQueueAtDeserved",
        "bool",
        False,
        "never leave a victim queue below its deserved share",
    ),
    Arg(
        "reclaimHysteresis",
        "float",
        0.0,
        "a victim queue may be left at (1 - this) of its deserved share",
        min=0,
        max=1,
        max_open=True,
    ),
)


def parse_floor_arguments(arguments: Arguments, owner: str) -> FloorArgs:
    """``keepVictimQueueAtDeserved`` (false) and ``reclaimHysteresis`` (0.0, within 0..1)."""
    keep = arguments.get_bool("keepVictimQueueAtDeserved", False)
    hysteresis = arguments.get_float("reclaimHysteresis", 0.0)
    if not 0.0 <= hysteresis < 1.0:
        raise ConfigError(
            f"configurations[{owner}]: argument 'reclaimHysteresis' must be within 0..1, "
            f"got {hysteresis!r}"
        )
    return FloorArgs(keep, 1.0 - hysteresis)


class QueueFloor:
    """May a victim queue be left with ``after`` allocated? (module docstring)"""

    def __init__(self, ssn: Session, args: FloorArgs) -> None:
        self.ssn = ssn
        self.args = args

    def allows(self, queue: str, after: Vec, *, borrowed: bool = False) -> bool:
        """``borrowed``: the eviction takes a gang larger than the queue's whole deserved
        share; only the guarantee holds then (the queue could never hold that gang within its
        share, so taking it leaves nothing to reclaim back)."""
        ssn = self.ssn
        q = ssn.queues.get(queue)
        if q is None:
            return True
        for rname, amount in q.guarantee.items():
            d = ssn.resources.get(rname)
            if d is not None and amount > 0 and after[d] < amount:
                return False
        if self.args.keep_deserved and not borrowed:
            des = ssn.dispatch.deserved(queue)
            if des is not None:
                present = np.flatnonzero(des[1:] >= 0.1) + 1
                share = float((after[present] / des[present]).max()) if len(present) else 0.0
                if share < self.args.factor - 1e-9:
                    return False
        return True
