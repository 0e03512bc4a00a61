"""overcommit: Volcano's overcommit plugin — cluster-wide admission gate (volcano.md §4.6).

idle = TotalResource x ``overcommit-factor`` (default 1.2; values < 1 reset to 1.2) - Σ node
used; inqueue = Σ minResources of Inqueue jobs (minus scheduling-gated pods) + the un-started part
of Running jobs (per resource, max(0, minResources - allocated), minus gated pods).
JobEnqueueable permits iff inqueue + job.minResources <= idle on the dimensions minResources
requests; otherwise Reject with event "resource in cluster is overused".
JobEnqueued adds the job's minResources to inqueue.
"""

from __future__ import annotations

import numpy as np

from batch.model.info import JobInfo
from batch.model.resources import IntVec
from batch.model.status import ALLOCATED_STATUS
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.registry import Plugin, register_plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import PERMIT, REJECT

DEFAULT_FACTOR = 1.2


def inqueue_contribution(job: JobInfo) -> IntVec | None:
    """The resources ``job`` holds admitted but not yet allocated: minResources (less gated
    pods) of an Inqueue job, the un-started part of a Running one."""
    mr = job.min_resources
    if mr is None:
        return None
    if job.phase == "Inqueue":
        admitted: IntVec = np.maximum(mr - job.gated_req, 0)
        return admitted
    if job.phase == "Running" and job.count(*ALLOCATED_STATUS) >= job.min_available:
        # per resource, as proportion's inqueue part (volcano.md §5.1): a job above its
        # minResources on one resource still holds the un-started part of the others
        gap: IntVec = np.maximum(np.maximum(mr - job.allocated, 0) - job.gated_req, 0)
        return gap
    return None


@register_plugin
class OvercommitPlugin(Plugin):
    name = "overcommit"

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        factor = arguments.get_float("overcommit-factor", DEFAULT_FACTOR)
        self.factor = factor if factor >= 1.0 else DEFAULT_FACTOR

    def on_session_open(self, ssn: Session) -> None:
        nd = ssn.nodes
        # total x factor, exactly and without int64 overflow (memory totals reach 1e15+ bytes):
        # split total into millions and a remainder before multiplying.
        k = round(self.factor * 1_000_000)
        millions, rest = np.divmod(ssn.total_resource, 1_000_000)
        scaled = millions * k + rest * k // 1_000_000
        used = nd.used[:, nd.valid].sum(axis=1)
        self.idle = scaled - used
        sums = JobSums.of(ssn.cache, "overcommit", (ssn.resources.capacity,))
        sums.refresh(ssn.jobs, inqueue_contribution)
        inqueue = ssn.resources.zeros()
        for part in sums.sums.values():
            inqueue += part
        self.inqueue = inqueue

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return PERMIT
            mr = job.min_resources
            dims = np.flatnonzero(mr[1:] > 0) + 1
            need = self.inqueue[dims] + mr[dims]
            if bool((need <= self.idle[dims]).all()):
                return PERMIT
            ssn.event(job, "Warning", "Unschedulable", "resource in cluster is overused")
            ssn.set_reason(
                PendingReason(
                    job.uid,
                    "NotEnqueued",
                    "resource in cluster is overused: the job's minResources plus already "
                    f"admitted jobs exceed {self.factor:g} x cluster capacity minus used",
                    details={"rejected_by": "overcommit"},
                )
            )
            return REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                self.inqueue = self.inqueue + np.maximum(job.min_resources - job.gated_req, 0)

        ssn.add_job_enqueueable_fn(enqueueable)
        ssn.add_job_enqueued_fn(enqueued)
