"""sjf: shortest expected job first, with aging — an opt-in job order that uses
``runningEstimate``.

Why this exists: when run times are known roughly (``Job.spec.runningEstimate``, copied by the
Job controller into the PodGroup annotation ``tephra.io/running-estimate``), running short jobs
first minimises mean JCT; aging keeps long jobs from starving behind a stream of short ones.

JobOrder key = estimate x GPUs (``sjf.gpuWeighted``, default true: GPU-time, so a 64-GPU
hour counts as 64 one-GPU hours) minus ``sjf.agingFactor`` (default 1) x seconds waited since
the PodGroup was created; smaller first. A job without an estimate takes
``sjf.defaultRunningEstimate`` (default ``24h``). No preemption: jobs that run are left alone.
"""

from __future__ import annotations

from batch.api.resources import GPU
from batch.model.info import JobInfo
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError, check_arguments
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.pluginlib.durations import job_estimate, parse_duration


class SjfPlugin(Plugin):
    name = "sjf"
    ARGUMENTS = (
        Arg(
            "sjf.agingFactor", "float", 1.0, "seconds of estimate forgiven per second waited", min=0
        ),
        Arg("sjf.defaultRunningEstimate", "duration", "24h", "estimate of a job without one"),
        Arg("sjf.gpuWeighted", "bool", True, "multiply the estimate by the job's GPUs"),
    )
    time_dependent = True  # aging moves the order with time alone

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        check_arguments("plugin sjf", self.ARGUMENTS, arguments.raw)
        try:
            self.default = parse_duration(arguments.raw.get("sjf.defaultRunningEstimate", "24h"))
        except ValueError as exc:
            raise ConfigError(f"plugin sjf: argument 'sjf.defaultRunningEstimate': {exc}") from None
        self.aging = arguments.get_float("sjf.agingFactor", 1.0)
        if self.aging < 0:
            raise ConfigError(f"plugin sjf: sjf.agingFactor must be >= 0, got {self.aging:g}")
        self.gpu_weighted = arguments.get_bool("sjf.gpuWeighted", True)

    def on_session_open(self, ssn: Session) -> None:
        gpu = ssn.resources.get(GPU)
        now = ssn.now
        keys: dict[str, float] = {}

        def key(job: JobInfo) -> float:
            got = keys.get(job.uid)
            if got is None:
                est = job_estimate(job, self.default)
                size = 1.0
                if self.gpu_weighted and gpu is not None and job.min_resources is not None:
                    size = max(int(job.min_resources[gpu]) / 1000, 1.0)
                got = keys[job.uid] = (est or self.default) * size - self.aging * max(
                    now - job.creation, 0.0
                )
            return got

        ssn.hooks.add_job_order_key(key)
