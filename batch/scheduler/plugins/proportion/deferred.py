"""proportion's queue answers while allocate defers its allocation handler
(``hooks.DeferredQueues``).

allocate asks a queue's QueueOrder key, Overused and Allocatable around every placement, and
the handler updates the queue's ``allocated`` vector after each: four numpy-backed steps per
pod. While allocate places one-task jobs it calls ``DeferredShares.allocated`` instead of the
handler: the queue's ``allocated`` is then kept as a Python list, added to with the same IEEE
additions (``np.add`` of the int request to the float vector, pods zeroed), and the answers are
worked out from the lists with the same arithmetic as the callbacks (``ratio_lists``,
``le_lists``); ``flush`` writes the lists back. Only without fair shares (no queue has a
``held`` vector: Allocatable is then the deserved-share test alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from batch.model.info import QueueInfo, TaskInfo
from batch.scheduler.framework.hooks import EventHandler
from batch.scheduler.framework.shares import le_lists

from .attrs import QueueAttr, deserved_dims, ratio_lists, within_deserved

if TYPE_CHECKING:
    from . import ProportionPlugin

#: offer allocate the deferred answers (exact; tests switch it off to compare)
DEFER = True


class DeferredShares:
    """``hooks.DeferredQueues`` for one session of proportion without fair shares."""

    __slots__ = ("allocatable_fn", "asked", "handler", "key_fn", "overused_fn", "p", "pending")

    def __init__(self, p: ProportionPlugin, handler: EventHandler) -> None:
        self.p = p
        self.handler = handler
        assert p.queue_fns is not None
        #: the callbacks these answers stand for (asked for queues with nothing deferred)
        self.key_fn, self.overused_fn, self.allocatable_fn = p.queue_fns
        #: queue name -> (its figures, allocated and deserved as lists, the resources it
        #: deserves something of), for the queues with deferred placements
        self.pending: dict[str, tuple[QueueAttr, list[float], list[float], list[int]]] = {}
        #: template id -> ``_asked``
        self.asked: dict[int, list[int]] = {}

    def stands_for(self) -> tuple[Any, Any, Any, EventHandler]:
        return self.key_fn, self.overused_fn, self.allocatable_fn, self.handler

    def key(self, queue: QueueInfo) -> Any:
        got = self.pending.get(queue.name)
        if got is None:
            return self.key_fn(queue)
        return (-queue.priority, ratio_lists(got[1], got[2], got[3]))  # ``order_share``, no held

    def overused(self, queue: QueueInfo) -> bool:
        got = self.pending.get(queue.name)
        if got is None:
            return bool(self.overused_fn(queue))
        return le_lists(got[2], got[1])

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        got = self.pending.get(queue.name)
        if got is None:
            return bool(self.allocatable_fn(queue, task))
        if not queue.is_open():
            return False
        # the callback's test without held
        return within_deserved(self.p.dims_by_tid, task, got[1], got[2])

    def allocated(self, task: TaskInfo) -> None:
        """The handler's ``on_allocate(task)``, deferred (done at once when the queue's vectors
        or the task's request do not have the plain form the lists follow)."""
        p = self.p
        job = p.ssn.jobs.get(task.job_id or "")
        if job is None:
            return
        got = self.pending.get(job.queue)
        first = got is None
        if got is None:
            a = p.attrs.get(job.queue)
            if a is None:
                return
            if not _plain(a, task):
                self.handler.on_allocate(task)
                return
            des = a.deserved.tolist()
            got = self.pending[job.queue] = (a, a.allocated.tolist(), des, deserved_dims(des))
        rl = task.template.req_list
        alloc = got[1]
        if task.req is not task.template.req or len(rl) != len(alloc):
            self.flush()
            self.handler.on_allocate(task)
            return
        if first:  # ``np.add`` of the int request: the same IEEE additions, in every slot
            for i, r in enumerate(rl):
                alloc[i] += r
        else:
            # the first addition left no -0.0 (IEEE gives -0.0 only as the sum of two), and
            # adding 0 changes nothing else: the slots the request asks for are enough
            for i in self._asked(task):
                alloc[i] += rl[i]
        alloc[0] = 0.0

    def _asked(self, task: TaskInfo) -> list[int]:
        """The slots (pods left out) where ``task``'s template's request is not 0 (a negative
        one, which the model accepts, is added too: unlike ``attrs.task_dims``)."""
        tmpl = task.template
        got = self.asked.get(tmpl.tid)
        if got is None:
            got = self.asked[tmpl.tid] = [i for i, r in enumerate(tmpl.req_list) if r and i]
        return got

    def flush(self) -> None:
        """Write the deferred placements into the queues' figures."""
        for a, alloc, _, _ in self.pending.values():
            a.allocated[:] = alloc
            a.changed()
        self.pending.clear()


def _plain(a: QueueAttr, task: TaskInfo) -> bool:
    """Float vectors of one length, the task's request its template's (of that length)."""
    alloc, des = a.allocated, a.deserved
    return (
        alloc.dtype == np.float64
        and des.dtype == np.float64
        and alloc.ndim == 1
        and alloc.shape == des.shape
        and task.req is task.template.req
        and len(task.template.req_list) == len(alloc)
    )
