"""overcommit: Volcano's overcommit plugin — cluster-wide admission gate
(docs/volcano-semantics.md#plugins).

idle = TotalResource x ``overcommit-factor`` (default 1.2; values < 1 reset to 1.2) - Σ node
used; inqueue = Σ minResources of Inqueue jobs (minus scheduling-gated pods) + the un-started part
of Running jobs (per resource, max(0, minResources - allocated), minus gated pods).
JobEnqueueable permits iff inqueue + job.minResources <= idle on the dimensions minResources
requests; otherwise Reject with event "resource in cluster is overused", and a pending reason
giving, for each resource short, what the job needs, what other admitted jobs hold, the cluster's
capacity with and without the factor, and what is in use (details["resources"]).
JobEnqueued adds the job's minResources to inqueue.

With proportion's ``fairShare`` (Tephra's default configuration) the budget also permits a job
whose minResources fit its queue's fair share when it would fit were what the other queues hold
beyond their own shares not counted (``Dispatch.held_beyond_share``): neither gangs admitted
before a queue below its share submitted nor pods that reclaim takes back keep that queue out
(docs/volcano-semantics.md#proportion-fair-share).
"""

from __future__ import annotations

import numpy as np

from batch.api.resources import describe_amount
from batch.model.info import JobInfo
from batch.model.resources import IntVec
from batch.model.status import ALLOCATED_STATUS
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.arguments import Arg, Arguments
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import positive_dims
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
        # per resource, as proportion's inqueue part (docs/volcano-semantics.md#proportion-inputs):
        # a job above its minResources on one resource still holds the un-started part of the others
        gap: IntVec = np.maximum(np.maximum(mr - job.allocated, 0) - job.gated_req, 0)
        return gap
    return None


class OvercommitPlugin(Plugin):
    name = "overcommit"
    ARGUMENTS = (
        Arg(
            "overcommit-factor",
            "float",
            DEFAULT_FACTOR,
            f"admission multiplies the cluster's capacity by this (below 1: {DEFAULT_FACTOR})",
        ),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        factor = arguments.get_float("overcommit-factor", DEFAULT_FACTOR)
        self.factor = factor if factor >= 1.0 else DEFAULT_FACTOR
        #: the cluster's total and its scaled budget, as last computed (``_scaled_total``)
        self._scaled: tuple[bytes, IntVec] | None = None

    keeps_callbacks = True

    def on_session_open(self, ssn: Session) -> None:
        nd = ssn.nodes
        self.total = ssn.total_resource
        self.scaled = scaled = self._scaled_total(ssn.total_resource)
        self.used = nd.valid_sum(nd.used)
        self.idle = scaled - self.used
        sums = JobSums.of(ssn.cache, "overcommit", (ssn.resources.capacity,))
        sums.refresh(ssn.jobs, inqueue_contribution, follow=ssn.skip_settled)
        self.inqueue = sums.grand.copy()

    def register_kept(self, hooks: Hooks) -> None:
        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return PERMIT
            ssn = self.ssn
            mr = job.min_resources
            dims = positive_dims(mr)
            need = self.inqueue[dims] + mr[dims]
            if bool((need <= self.idle[dims]).all()):
                return PERMIT
            spare = ssn.dispatch.held_beyond_share(job)
            if spare is not None and bool((need - spare[dims] <= self.idle[dims]).all()):
                return PERMIT
            ssn.event(job, "Warning", "Unschedulable", "resource in cluster is overused")
            ssn.set_reason(self._overused(ssn, job, mr, dims[need > self.idle[dims]]))
            return REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                self.inqueue = self.inqueue + np.maximum(job.min_resources - job.gated_req, 0)

        hooks.add_job_enqueueable_fn(enqueueable)
        hooks.add_job_enqueued_fn(enqueued)

    def _scaled_total(self, total: IntVec) -> IntVec:
        """``total`` x the factor, exactly and without int64 overflow (memory totals reach
        1e15+ bytes: split into millions and a remainder before multiplying); the last result
        is kept (read-only) while the cluster's total is the same."""
        key = total.tobytes()
        kept = self._scaled
        if kept is not None and kept[0] == key:
            return kept[1]
        k = round(self.factor * 1_000_000)
        millions, rest = np.divmod(total, 1_000_000)
        scaled: IntVec = millions * k + rest * k // 1_000_000
        scaled.flags.writeable = False
        self._scaled = (key, scaled)
        return scaled

    def _overused(self, ssn: Session, job: JobInfo, needs: IntVec, dims: IntVec) -> PendingReason:
        """Why `job` (minResources `needs`) is not admitted, with the figures of each resource
        in `dims`, those that are short."""
        figures = {
            ssn.resources.names[d]: {
                "needs": int(needs[d]),
                "admitted": int(self.inqueue[d]),
                "capacity": int(self.total[d]),
                "overcommitted": int(self.scaled[d]),
                "used": int(self.used[d]),
            }
            for d in dims
        }
        said = ". ".join(self._explain(name, f) for name, f in figures.items())
        return PendingReason(
            job.uid,
            "NotEnqueued",
            f"resource in cluster is overused: {said}",
            details={"rejected_by": "overcommit", "resources": figures},
        )

    def _explain(self, name: str, f: dict[str, int]) -> str:
        def amount(key: str) -> str:
            return describe_amount(name, f[key])

        admitted = f" with {amount('admitted')} admitted to other jobs" if f["admitted"] else ""
        return (
            f"needs {amount('needs')} {name}{admitted}; cluster has {amount('capacity')}, "
            f"{amount('overcommitted')} with overcommit factor {self.factor:g}; "
            f"{amount('used')} in use"
        )
