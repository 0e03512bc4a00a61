"""tiresias: least attained service first, in discrete levels, with preemption by level — an
opt-in job order in the spirit of Tiresias (Gu et al., NSDI 2019, "2D-LAS").

Why this exists: with gang FIFO a long job that started first keeps its GPUs while short jobs
queue behind it; mean JCT on heavy-tailed workloads (Philly) is dominated by such waits. Without
durations known, Tiresias orders by *attained service*: GPUs x time a job has run so far.

* A job's attained service is accumulated across sessions (``ClusterCache.derived``, keyed by job
  id, so it survives the job's restarts; a scheduler restart forgets it): at each session, every
  job's allocated GPUs x the time since the previous session.
* Levels: service below ``tiresias.quantum`` (GPU-time, a duration: one GPU for that long;
  default ``1h``) is level 0; each further level starts at ``tiresias.factor`` (default 10) times
  the previous threshold; ``tiresias.levels`` (default 3) levels in all. JobOrder: lower level
  first (FIFO inside a level, the fallback order).
* Preemptable (``tiresias.preempt``, default true): a preemptor may take tasks of jobs in a
  higher level than its own. Configure the plugin in a tier of its own *before* gang so its vote
  decides (gang would spare every gang at its minimum) and use Volcano's victim selection for
  preempt; the evicted job restarts (RestartJob) and keeps its level. minruntime's guard still
  applies, which bounds the churn, and a job that already lost all its tasks
  ``tiresias.maxEvictions`` times (default 2, below a VCJob's default maxRetry of 3; 0: no
  limit) is no longer a victim: its attained service keeps it in the last level, so it would
  be evicted until it failed.
* Starvation limit (``tiresias.starveLimit``, default 0: off), as Tiresias's STARVE_LIMIT: a job
  that lost its resources and has waited longer than the limit x the length of its latest run
  gets service 0, i.e. the highest level, once per wait. Checked at session open (the
  simulator runs sessions only at events, so there a promotion waits for the next event).
* ``tiresias.resetOnEviction`` (default false): a job that lost all its tasks starts again at
  service 0 — what it has attained is lost when it restarts without a checkpoint.
* ``tiresias.preemptorLevels`` (default 1: only level 0; at most levels - 1): only a job in one
  of the lowest that many levels preempts (or is admitted into a full queue, below), so jobs
  that already ran for a while do not spend the victims' eviction budget.
* ``tiresias.lostWorkRatio`` (default 100; 0: off): a victim's current run (lost when it
  restarts without a checkpoint) may be at most this many times as long as the preemptor has
  waited (since its eviction, else since its creation), so a burst of short jobs does not throw
  away days of work to avoid minutes of waiting. The defaults were chosen on two contended
  Philly windows (docs/sim.md#quality).
* JobEnqueueable (with preemption on): a Pending gang whose minResources of the resource fit
  in what jobs of a higher level hold in its queue is permitted (the tier's Permit decides, so
  proportion's "queue resource quota insufficient" does not keep it out of a full queue: without
  admission it could never preempt); admissions this session use that room up.
* ``tiresias.resource`` (default ``nvidia.com/gpu``): the resource service is counted in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from batch.api.resources import GPU
from batch.model.info import JobInfo, TaskInfo
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError, check_arguments
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import ABSTAIN, PERMIT
from batch.scheduler.pluginlib.durations import parse_duration

_KEY = "tiresias"
#: forget a job not seen for this long (it finished and was deleted)
FORGET_AFTER_S = 3600.0


@dataclass(slots=True)
class Service:
    """Attained service per job id, and when it was last brought up to date."""

    last: float | None = None
    units: dict[str, float] = field(default_factory=dict)  # job id -> resource-units x seconds
    seen: dict[str, float] = field(default_factory=dict)  # job id -> last session it was in
    holding: set[str] = field(default_factory=set)  # jobs that held the resource last session
    evicted: dict[str, int] = field(default_factory=dict)  # job id -> times it lost everything
    ran: dict[str, float] = field(default_factory=dict)  # job id -> seconds of its latest run
    stopped: dict[str, float] = field(default_factory=dict)  # job id -> when that run ended

    def advance(
        self, jobs: dict[str, JobInfo], dim: int | None, now: float, reset: bool = False
    ) -> None:
        """Bring service up to ``now``; ``reset``: an evicted job's service starts again at 0."""
        dt = 0.0 if self.last is None else max(now - self.last, 0.0)
        self.last = now
        for uid, job in jobs.items():
            self.seen[uid] = now
            if dim is None or dt == 0.0 or dim >= len(job.allocated):
                continue
            held = int(job.allocated[dim])
            if held:
                self.units[uid] = self.units.get(uid, 0.0) + held / 1000 * dt
                if uid not in self.holding:  # a new run starts
                    self.holding.add(uid)
                    self.ran[uid] = 0.0
                    self.stopped.pop(uid, None)
                self.ran[uid] += dt
            elif uid in self.holding:  # still there, holding nothing: evicted (or restarted)
                self.holding.discard(uid)
                self.evicted[uid] = self.evicted.get(uid, 0) + 1
                self.stopped[uid] = now
                if reset:
                    self.units[uid] = 0.0
        if len(self.seen) > len(jobs):
            self._forget(now)

    def _forget(self, now: float) -> None:
        for uid in [u for u, t in self.seen.items() if now - t > FORGET_AFTER_S]:
            del self.seen[uid]
            for kept in (self.units, self.evicted, self.ran, self.stopped):
                kept.pop(uid, None)
            self.holding.discard(uid)

    def promote_starving(self, limit: float, now: float) -> list[str]:
        """Jobs that have waited longer than ``limit`` x their latest run get service 0 again
        (the highest level, as Tiresias's STARVE_LIMIT); returns their ids."""
        out = [
            uid
            for uid, since in self.stopped.items()
            if now - since > limit * self.ran.get(uid, 0.0)
        ]
        for uid in out:
            self.units[uid] = 0.0
            del self.stopped[uid]
        return out


def _ratio(arguments: Arguments, key: str, default: float) -> float:
    value = arguments.get_float(key, default)
    if not 0 <= value < math.inf:  # also refuses nan
        raise ConfigError(f"plugin tiresias: {key} must be a finite number >= 0, got {value:g}")
    return value


class TiresiasPlugin(Plugin):
    name = "tiresias"
    ARGUMENTS = (
        Arg("tiresias.quantum", "duration", "1h", "attained service of the first level (> 0)"),
        Arg(
            "tiresias.factor",
            "float",
            10.0,
            "each level's threshold is this times the previous",
            min=1,
            min_open=True,
        ),
        Arg("tiresias.levels", "int", 3, "number of priority levels", min=1),
        Arg("tiresias.preempt", "bool", True, "higher levels preempt lower ones"),
        Arg(
            "tiresias.preemptorLevels",
            "int",
            1,
            "the levels that may preempt (at most `tiresias.levels` - 1)",
            min=1,
        ),
        Arg("tiresias.maxEvictions", "int", 2, "a job is evicted at most this often", min=0),
        Arg(
            "tiresias.starveLimit",
            "float",
            0.0,
            "a job waiting this times its last run goes back to the top level (0: never)",
            min=0,
        ),
        Arg("tiresias.resetOnEviction", "bool", False, "an evicted job's service restarts at 0"),
        Arg(
            "tiresias.lostWorkRatio",
            "float",
            100.0,
            "a victim's run may be at most this times the preemptor's wait",
            min=0,
        ),
        Arg("tiresias.resource", "str", GPU, "the resource whose use is attained service"),
    )
    time_dependent = True  # levels rise while jobs run

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        check_arguments("plugin tiresias", self.ARGUMENTS, arguments.raw)
        try:
            quantum = parse_duration(arguments.raw.get("tiresias.quantum", "1h"))
        except ValueError as exc:
            raise ConfigError(f"plugin tiresias: argument 'tiresias.quantum': {exc}") from None
        factor = arguments.get_float("tiresias.factor", 10.0)
        levels = arguments.get_int("tiresias.levels", 3)
        if quantum <= 0 or factor <= 1 or levels < 1:
            raise ConfigError(
                "plugin tiresias: needs tiresias.quantum > 0, tiresias.factor > 1 and "
                f"tiresias.levels >= 1 (got {quantum:g}s, {factor:g}, {levels})"
            )
        self.thresholds = [quantum * factor**k for k in range(levels - 1)]
        self.preempt = arguments.get_bool("tiresias.preempt", True)
        self.preemptor_levels = arguments.get_int("tiresias.preemptorLevels", 1)
        if not 1 <= self.preemptor_levels <= max(levels - 1, 1):
            raise ConfigError(
                "plugin tiresias: tiresias.preemptorLevels must be between 1 and "
                f"tiresias.levels - 1, got {self.preemptor_levels}"
            )
        self.max_evictions = arguments.get_int("tiresias.maxEvictions", 2)
        self.starve_limit = _ratio(arguments, "tiresias.starveLimit", 0.0)
        if self.max_evictions < 0:
            raise ConfigError(
                f"plugin tiresias: tiresias.maxEvictions must be >= 0, got {self.max_evictions}"
            )
        self.reset_on_eviction = arguments.get_bool("tiresias.resetOnEviction", False)
        self.lost_work_ratio = _ratio(arguments, "tiresias.lostWorkRatio", 100.0)
        self.resource = arguments.get_str("tiresias.resource", GPU)

    def level(self, service: float) -> int:
        return sum(1 for t in self.thresholds if service >= t)

    def on_session_open(self, ssn: Session) -> None:
        kept = ssn.cache.derived.get(_KEY)
        if not isinstance(kept, Service):
            kept = ssn.cache.derived[_KEY] = Service()
        kept.advance(ssn.jobs, ssn.resources.get(self.resource), ssn.now, self.reset_on_eviction)
        if self.starve_limit > 0:
            kept.promote_starving(self.starve_limit, ssn.now)
        units, evicted = kept.units, kept.evicted
        levels: dict[str, int] = {}

        def level_of(job: JobInfo) -> int:
            got = levels.get(job.uid)
            if got is None:
                got = levels[job.uid] = self.level(units.get(job.uid, 0.0))
            return got

        ssn.hooks.add_job_order_key(level_of)
        if not self.preempt:
            return

        def preemptable(
            preemptor: TaskInfo, candidates: list[TaskInfo]
        ) -> tuple[list[TaskInfo], int]:
            pjob = ssn.jobs.get(preemptor.job_id or "")
            if pjob is None:
                return [], PERMIT
            mine = level_of(pjob)
            if mine >= self.preemptor_levels:
                return [], PERMIT
            most = self._most_lost(kept, pjob, ssn.now)
            victims = []
            for t in candidates:
                vjob = ssn.jobs.get(t.job_id or "")
                if vjob is None or vjob.uid == pjob.uid or level_of(vjob) <= mine:
                    continue
                if kept.ran.get(vjob.uid, 0.0) > most:
                    continue
                if self.max_evictions <= 0 or evicted.get(vjob.uid, 0) < self.max_evictions:
                    victims.append(t)
            return victims, PERMIT

        ssn.hooks.add_preemptable_fn(preemptable)
        self._admission(ssn, level_of)

    def _most_lost(self, kept: Service, job: JobInfo, now: float) -> float:
        """The longest current run a victim of ``job`` may have: lostWorkRatio x how long
        ``job`` has waited (since it was evicted, else since it was created)."""
        if self.lost_work_ratio <= 0:
            return math.inf
        since = kept.stopped.get(job.uid, job.creation)
        return self.lost_work_ratio * max(now - since, 0.0)

    def _admission(self, ssn: Session, level_of: Callable[[JobInfo], int]) -> None:
        dim = ssn.resources.get(self.resource)
        if dim is None:
            return
        held: dict[tuple[str, int], int] = {}  # (queue, level) -> held by that level's jobs
        for job in ssn.jobs.values():
            if dim < len(job.allocated) and job.allocated[dim]:
                key = (job.queue, level_of(job))
                held[key] = held.get(key, 0) + int(job.allocated[dim])
        if not held:
            return
        room: dict[tuple[str, int], int] = {}

        def enqueueable(job: JobInfo) -> int:
            mr = job.min_resources
            if mr is None or dim >= len(mr) or not mr[dim]:
                return ABSTAIN
            key = (job.queue, level_of(job))
            if key[1] >= self.preemptor_levels:
                return ABSTAIN
            left = room.get(key)
            if left is None:
                mine = key[1]
                left = sum(v for (q, lv), v in held.items() if q == job.queue and lv > mine)
            if int(mr[dim]) > left:
                room[key] = left
                return ABSTAIN
            room[key] = left - int(mr[dim])
            return PERMIT

        ssn.hooks.add_job_enqueueable_fn(enqueueable)
