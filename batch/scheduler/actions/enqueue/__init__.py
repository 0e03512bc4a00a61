"""enqueue: admit Pending PodGroups (Pending -> Inqueue) — Volcano's enqueue action (§4.3).

Queues are visited by QueueOrder and, per queue, Pending jobs by JobOrder. A job without
minResources is always admitted; otherwise JobEnqueueable must vote yes (proportion/capacity
check the queue, overcommit the cluster, sla can Permit). Admitted jobs are passed to
JobEnqueued (plugins count their minResources as "inqueue"). A rejected job does not block the
rest of its queue. A gang that can never fit the cluster or its queue (a pod larger than every
node, minResources beyond the cluster or the queue's capability: framework/feasibility.py) is
not even put to JobEnqueueable: it stays Pending with that reason and takes none of the queue's
share. A PodGroup whose admission the requeue plugin gave back is held out of admission for a
while, then tried after its queue's other pending PodGroups until admitted again
(framework/admissions.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from batch.model.info import JobInfo, QueueInfo
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.actionlib.selection import jobs_by_queue
from batch.scheduler.framework.admissions import Admissions, held_admissions
from batch.scheduler.framework.arguments import Arg
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.feasibility import never_fits, starts_now
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session


def _later_if_given_back(ssn: Session, held: Mapping[str, float]) -> Callable[[JobInfo], Any]:
    """JobOrder, with the PodGroups whose admission was given back after the others."""
    jkey = ssn.dispatch.job_order_key()
    if not held:
        return jkey
    return lambda job: (job.uid in held, jkey(job))


def _not_put(ssn: Session, job: JobInfo, held: Mapping[str, float]) -> PendingReason | None:
    """Why ``job`` is not even put to JobEnqueueable: its admission was given back and is held
    (unless it could start on the idle nodes now), or it can never fit."""
    if held and held.get(job.uid, 0.0) > ssn.now and not starts_now(ssn, job):
        return Admissions.of(ssn.cache).held_reason(job)
    return never_fits(ssn, job)


class Enqueue(Action):
    name = "enqueue"
    ARGUMENTS = (
        Arg(
            "overcommit-factor",
            "float",
            None,
            "accepted (Volcano 1.0-1.2 read it here); no effect: the overcommit plugin's counts",
        ),
    )

    def execute(self, ssn: Session) -> None:
        t0 = time.perf_counter()
        held = held_admissions(ssn.cache)
        jkey = _later_if_given_back(ssn, held)
        # a Pending PodGroup is never settled
        per_queue = jobs_by_queue((j for j in ssn.active_jobs() if j.is_pending()), jkey)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.dispatch.queue_order_key())
        for name in per_queue:
            queues.push(ssn.queues[name])
        while queues:
            queue = queues.pop()
            jobs = per_queue[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            not_now = _not_put(ssn, job, held)
            if not_now is not None:
                ssn.set_reason(not_now)
                if jobs:
                    queues.push(queue)
                continue
            ok, rejecter = (
                (True, "") if job.min_resources is None else ssn.dispatch.job_enqueueable(job)
            )
            if ok:
                ssn.dispatch.job_enqueued(job)
                ssn.set_phase(job, "Inqueue")
                ssn.reasons.pop(job.uid, None)
            else:
                ssn.set_reason(
                    PendingReason(
                        job.uid,
                        "NotEnqueued",
                        f"PodGroup not admitted to queue {queue.name!r}: rejected by {rejecter}",
                        details={"rejected_by": rejecter},
                    ),
                    overwrite=False,
                )
            if jobs:
                queues.push(queue)
        ssn.timings["enqueue"] = time.perf_counter() - t0
