"""sla: Volcano's sla plugin — job waiting-time deadlines (docs/volcano-semantics.md#plugins).

A job's ``sla-waiting-time`` comes from the PodGroup annotation ``volcano.sh/sla-waiting-time``
(or ``sla-waiting-time``), else the plugin argument ``sla-waiting-time``; values are Go durations
(``1h30m``, ``90s``). JobOrder: jobs with a deadline before jobs without, earlier deadline
(creation + waiting time) first. JobEnqueueable and JobPipelined: once the job has waited at
least its waiting time the plugin votes Permit (which overrides rejections of later tiers),
otherwise it abstains.
"""

from __future__ import annotations

from batch.api.durations import duration_or_none as parse_duration
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import ABSTAIN, PERMIT

ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")


class SlaPlugin(Plugin):
    name = "sla"
    ARGUMENTS = (
        Arg(
            "sla-waiting-time",
            "duration",
            None,
            "waiting-time deadline of a job without the annotation (none: no deadline)",
        ),
    )
    time_dependent = True

    @classmethod
    def next_change(cls, cache: ClusterCache, arguments: Arguments, since: float) -> float | None:
        """The first job's waiting-time deadline after ``since``."""
        sla = cls(arguments)
        first: float | None = None
        for job in cache.jobs.values():
            wt = sla.waiting_time(job)
            if wt is not None and job.creation + wt > since:
                deadline = job.creation + wt
                first = deadline if first is None else min(first, deadline)
        return first

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        raw = arguments.get_str("sla-waiting-time", "")
        self.default: float | None = None
        if raw:
            self.default = parse_duration(raw)
            if self.default is None:
                raise ConfigError(f"plugin sla: sla-waiting-time {raw!r} is not a duration")

    def waiting_time(self, job: JobInfo) -> float | None:
        for key in ANNOTATIONS:
            value = job.annotations.get(key)
            if value:
                parsed = parse_duration(value)
                if parsed is not None:
                    return parsed
        return self.default

    def on_session_open(self, ssn: Session) -> None:
        def deadline(job: JobInfo) -> float | None:
            wt = self.waiting_time(job)
            return None if wt is None else job.creation + wt

        def order(job: JobInfo) -> tuple[int, float]:
            d = deadline(job)
            return (1, 0.0) if d is None else (0, d)

        def vote(job: JobInfo) -> int:
            d = deadline(job)
            if d is not None and ssn.now >= d:
                return PERMIT
            return ABSTAIN

        ssn.hooks.add_job_order_key(order)
        ssn.hooks.add_job_enqueueable_fn(vote)
        ssn.hooks.add_job_pipelined_fn(vote)
