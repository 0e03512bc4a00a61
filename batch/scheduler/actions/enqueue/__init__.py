"""enqueue: admit Pending PodGroups (Pending -> Inqueue) — Volcano's enqueue action (§4.3).

Queues are visited by QueueOrder and, per queue, Pending jobs by JobOrder. A job without
minResources is always admitted; otherwise JobEnqueueable must vote yes (proportion/capacity
check the queue, overcommit the cluster, sla can Permit). Admitted jobs are passed to
JobEnqueued (plugins count their minResources as "inqueue"). A rejected job does not block the
rest of its queue. A gang that can never fit the cluster or its queue (a pod larger than every
node, minResources beyond the cluster or the queue's capability: framework/feasibility.py) is
not even put to JobEnqueueable: it stays Pending with that reason and takes none of the queue's
share.
"""

from __future__ import annotations

import time

from batch.model.info import JobInfo, QueueInfo
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.framework.arguments import Arg
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.feasibility import never_fits
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session


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
        jkey = ssn.dispatch.job_order_key()
        per_queue: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.active_jobs():  # a Pending PodGroup is never settled
            if not job.is_pending():
                continue
            pq = per_queue.get(job.queue)
            if pq is None:
                pq = per_queue[job.queue] = PriorityQueue(jkey)
            pq.push(job)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.dispatch.queue_order_key())
        for name in per_queue:
            queues.push(ssn.queues[name])
        while queues:
            queue = queues.pop()
            jobs = per_queue[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            impossible = never_fits(ssn, job)
            if impossible is not None:
                ssn.set_reason(impossible)
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
