"""drf: Volcano's drf plugin — dominant resource fairness between jobs
(docs/volcano-semantics.md#drf).

Job share = max over resources of the cluster total of allocated_r / total_r. JobOrder: smaller
share first. Preemptable (unless disabled): a candidate is a victim when the preemptor's share
after adding its request is <= the victim job's share after removing the candidate (1e-6
tolerance). With ``enableHierarchy: true`` the hierarchical variant orders and reclaims between
queues along their ``volcano.sh/hierarchy`` paths (see ``hierarchy.py``).
"""

from __future__ import annotations

from batch.model.info import JobInfo, TaskInfo
from batch.model.resources import IntVec
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import positive_dims
from batch.scheduler.framework.votes import PERMIT
from batch.scheduler.plugins.drf.hierarchy import HierarchicalDrf

SHARE_DELTA = 1e-6


def dominant_share(allocated: IntVec, total: IntVec, dims: IntVec) -> float:
    if len(dims) == 0:
        return 0.0
    return float((allocated[dims] / total[dims]).max())


class DrfPlugin(Plugin):
    name = "drf"
    ARGUMENTS = ()

    keeps_callbacks = True

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource
        dims = positive_dims(total)  # kept while the total is the same
        self.total = total
        self.dims = dims
        #: this session's job shares: uid -> (the job's alloc_version, its share)
        self._shares: dict[str, tuple[int, float]] = {}
        option = self.option
        if option is not None and option.hierarchy:
            HierarchicalDrf(ssn, total, dims).register()

    def register_kept(self, hooks: Hooks) -> None:
        def share(alloc: IntVec) -> float:
            return dominant_share(alloc, self.total, self.dims)

        def job_key(j: JobInfo) -> float:
            c = j.counts
            if not (c[2] or c[4] or c[5] or c[6]):
                # no task Allocated, Binding, Bound or Running: ``allocated`` (their sum) is
                # zero, so is the share (a backlog's jobs, also after a session undid them)
                return 0.0
            cache = self._shares
            hit = cache.get(j.uid)
            if hit is not None and hit[0] == j.alloc_version:
                return hit[1]
            # nothing allocated (a backlog's jobs, also after a session undid its placements):
            # the share is 0.0 without the vector arithmetic
            s = share(j.allocated) if j.alloc_version and j.allocated.any() else 0.0
            cache[j.uid] = (j.alloc_version, s)
            return s

        # the share reads the job and the cluster total of the session (``self.total`` is
        # set again at each open: the token asks for the session's one)
        hooks.add_job_order_key(job_key, pure=lambda: self.total.tobytes())  # noqa: PLW0108

        def preemptable(
            preemptor: TaskInfo, candidates: list[TaskInfo]
        ) -> tuple[list[TaskInfo], int]:
            jobs = self.ssn.jobs
            pjob = jobs.get(preemptor.job_id or "")
            if pjob is None:
                return [], PERMIT
            ls = share(pjob.allocated + preemptor.req)
            remaining: dict[str, IntVec] = {}
            victims: list[TaskInfo] = []
            for t in candidates:
                vjob = jobs.get(t.job_id or "")
                if vjob is None:
                    continue
                alloc = remaining.get(vjob.uid)
                if alloc is None:
                    alloc = vjob.allocated.copy()
                alloc = alloc - t.req
                rs = share(alloc)
                remaining[vjob.uid] = alloc
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        hooks.add_preemptable_fn(preemptable)
