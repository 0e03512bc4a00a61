"""priority: Volcano's priority plugin (docs/volcano-semantics.md#plugins).

TaskOrder: higher pod priority first. JobOrder: higher job priority (PodGroup PriorityClass value)
first. Preemptable: victims are tasks of other jobs with a lower job priority than the preemptor's
job, or tasks of the same job with a lower task priority. JobStarving: ready + waiting < #tasks.
"""

from __future__ import annotations

from batch.model.info import JobInfo, TaskInfo
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.votes import PERMIT


class PriorityPlugin(Plugin):
    name = "priority"
    ARGUMENTS = ()
    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        hooks.add_task_order_key(lambda t: -t.priority)
        hooks.add_job_order_key(lambda j: -j.priority, pure=True)

        def preemptable(
            preemptor: TaskInfo, candidates: list[TaskInfo]
        ) -> tuple[list[TaskInfo], int]:
            ssn = self.ssn
            pjob = ssn.jobs.get(preemptor.job_id or "")
            victims: list[TaskInfo] = []
            for t in candidates:
                vjob = ssn.jobs.get(t.job_id or "")
                if pjob is None or vjob is None:
                    continue
                if vjob.uid != pjob.uid:
                    if vjob.priority < pjob.priority:
                        victims.append(t)
                elif t.priority < preemptor.priority:
                    victims.append(t)
            return victims, PERMIT

        hooks.add_preemptable_fn(preemptable)

        def starving(job: JobInfo) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        hooks.add_job_starving_fn(starving, pure=True)
