"""Reader for Tephra's own ledger: recorded submissions as a workload.

Why this exists: the most relevant workload for a what-if is the one the cluster really ran.
Each ledger job submitted in the window becomes a SimJob: its queue, its gang shape (per role,
from the recorded pod attempts; else the job's replicas and total requests split evenly),
its gang size (`min_available`, else every pod) and its run time (`finished_at -
first_started_at`; a job still running counts until now).

A job still waiting (never started, not finished) is replayed too, or the queue it is stuck in
would look idle and a what-if would call it unchanged. Its run time is unknown, so the reader
assumes one: the job's own estimate (`running_estimate_s`, recorded from `spec.runningEstimate`
or the `tephra.io/running-estimate` annotation), else the median run time of the replayed jobs
of its queue that started, else of all of them. Jobs left out: those that ended without
starting (deleted while waiting: the cluster never ran them), those with neither pod attempts
nor replicas (no known gang shape), those submitted before the window, and jobs still waiting
when no job started at all. What was assumed and left out is `Workload.assumptions`, one line
per assumption or reason with its count, which every what-if surface prints with its answer.

The queue configuration in force now (latest `queue_configs` row per queue) gives the weights,
capabilities and guarantees. The cluster is not in the ledger: give it with `--cluster` (a
cluster spec or the Node manifests the cluster runs, e.g. the file given to `tephra sandbox up
--nodes`).
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from batch.api.durations import format_duration
from batch.api.resources import from_internal
from batch.ledger.db import make_engine
from batch.ledger.models import Job, PodAttempt, QueueConfig
from batch.sim.cluster import ClusterSpec, QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.workload import SimJob, TaskShape, Workload, sort_jobs

__all__ = ["assume_run_times", "load_ledger", "parse_since"]

_SINCE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_ENDED_UNSTARTED = "ended without starting (deleted while waiting)"
_NO_RUN_TIME = "never started (no job started: no run time to assume)"
_NO_SHAPE = "without pods or replicas (gang shape unknown)"


def parse_since(text: str) -> float:
    """`90m`, `12h`, `7d`, `2w` -> seconds."""
    m = _SINCE.match(text.strip())
    if not m:
        raise SimInputError(f"--since {text!r}: expected a number and one of s, m, h, d, w (7d)")
    return float(m.group(1)) * _UNIT[m.group(2)]


def _utc(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def _resource_list(internal: dict[str, Any] | None) -> dict[str, str] | None:
    if not internal:
        return None
    return {k: from_internal(k, int(v)) for k, v in internal.items()}


def load_ledger(
    url: str,
    *,
    since: str = "7d",
    cluster: ClusterSpec | None = None,
    now: dt.datetime | None = None,
) -> Workload:
    window = parse_since(since)
    now = _utc(now or dt.datetime.now(dt.UTC))
    cutoff = now - dt.timedelta(seconds=window)
    recorded = _read_ledger(url, cutoff, now)
    jobs: list[SimJob] = []
    waiting: list[tuple[SimJob, float | None]] = []
    left_out: Counter[str] = Counter()
    if recorded.older:
        left_out[f"submitted before the last {since}"] = recorded.older
    origin = min((_utc(r.submitted_at) for r in recorded.rows if r.submitted_at), default=cutoff)
    for r in recorded.rows:
        sim = _sim_job(r, recorded.pods.get(r.uid, []), origin=origin, now=now)
        if isinstance(sim, str):
            left_out[sim] += 1
        elif r.first_started_at is None:
            waiting.append((sim, r.running_estimate_s))
        else:
            jobs.append(sim)
    replayed, assumed = assume_run_times(waiting, jobs)
    left_out[_NO_RUN_TIME] += len(waiting) - len(replayed)
    jobs += replayed
    queues = _queue_specs(sorted({j.queue for j in jobs} | set(recorded.latest)), recorded.latest)
    if cluster is None:
        raise SimInputError(
            "--format ledger: the ledger does not record nodes; give the cluster with --cluster "
            "(a cluster spec or Node manifests)"
        )
    where = url.rsplit("@", maxsplit=1)[-1]
    total = len(jobs) + left_out.total()
    assumed += [f"left out {n} {why}" for why, n in sorted(left_out.items()) if n]
    return Workload(
        name="ledger",
        jobs=sort_jobs(jobs),
        cluster=cluster.with_queues(queues),
        notes=(f"ledger: replaying {len(jobs)} of {total} recorded jobs ({where})",),
        assumptions=tuple(assumed),
        origin=origin.timestamp(),
    )


def assume_run_times(
    waiting: Sequence[tuple[SimJob, float | None]], started: Sequence[SimJob]
) -> tuple[list[SimJob], list[str]]:
    """`waiting` (jobs that never started, each with its runningEstimate or None) with a run
    time each: its estimate, else the median run time of the `started` jobs of its queue, else
    of all `started` jobs; none when nothing tells. Also one line per assumption made, with its
    count (in the order first made)."""
    by_queue: dict[str, list[float]] = defaultdict(list)
    for j in started:
        by_queue[j.queue].append(j.run_time)
    overall = statistics.median(j.run_time for j in started) if started else None
    out: list[SimJob] = []
    how: Counter[str] = Counter()
    for j, estimate in waiting:
        if estimate is not None:
            run, basis = estimate, "own runningEstimate"
        elif by_queue.get(j.queue):
            run = statistics.median(by_queue[j.queue])
            basis = f"queue median ({format_duration(run)})"
        elif overall is not None:
            run = overall
            basis = f"overall median ({format_duration(run)}): its queue has no job that started"
        else:
            continue
        how[basis] += 1
        out.append(replace(j, run_time=run))
    lines = [
        f"{n} never-started job{'s' if n != 1 else ''} replayed with run time = {basis}"
        for basis, n in how.items()
    ]
    return out, lines


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What the ledger holds for a window: its jobs (by submission), their pod attempts, how
    many jobs were submitted before it, and each queue's configuration in force now."""

    rows: list[Job]
    pods: dict[str, list[PodAttempt]]
    older: int
    latest: dict[str, QueueConfig]


def _read_ledger(url: str, cutoff: dt.datetime, now: dt.datetime) -> _Recorded:
    """Read the window from `cutoff` (a database error is a SimInputError)."""
    try:
        engine = make_engine(url, create_dirs=False)
        with Session(engine) as s:
            rows = list(
                s.scalars(
                    select(Job)
                    .where(Job.submitted_at.is_not(None), Job.submitted_at >= cutoff)
                    .order_by(Job.submitted_at, Job.uid)
                )
            )
            pods = _pod_attempts(s, [r.uid for r in rows])
            older = s.scalar(select(func.count(Job.uid)).where(Job.submitted_at < cutoff)) or 0
            configs = list(
                s.scalars(
                    select(QueueConfig)
                    .where(QueueConfig.valid_from <= now)
                    .order_by(QueueConfig.queue, QueueConfig.valid_from)
                )
            )
        engine.dispose()
    except SQLAlchemyError as exc:
        raise SimInputError(
            f"--db {url}: cannot read the ledger: {exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0]}"
        ) from None
    latest = {cfg.queue: cfg for cfg in configs}  # ordered by valid_from: the last one wins
    return _Recorded(rows=rows, pods=pods, older=older, latest=latest)


def _pod_attempts(s: Session, uids: list[str]) -> dict[str, list[PodAttempt]]:
    """The pod attempts of the jobs `uids`, per job (queried 500 jobs at a time)."""
    pods: dict[str, list[PodAttempt]] = defaultdict(list)
    for i in range(0, len(uids), 500):
        chunk = uids[i : i + 500]
        for p in s.scalars(select(PodAttempt).where(PodAttempt.job_uid.in_(chunk))):
            if p.job_uid is not None:
                pods[p.job_uid].append(p)
    return pods


def _sim_job(
    r: Job, pods: list[PodAttempt], *, origin: dt.datetime, now: dt.datetime
) -> SimJob | str:
    """The job as the simulator replays it, or why it is left out. A job that never started
    gets run time 0 here: `assume_run_times` gives it one."""
    if r.submitted_at is None:  # pragma: no cover - the query asks for a submission time
        return _NO_SHAPE
    if r.first_started_at is None:
        if r.finished_at is not None or r.final_phase is not None:
            return _ENDED_UNSTARTED
        run_time = 0.0
    else:
        end = _utc(r.finished_at) if r.finished_at is not None else now
        run_time = max((end - _utc(r.first_started_at)).total_seconds(), 0.0)
    tasks = _shape(r, pods)
    if not tasks:
        return _NO_SHAPE
    total = sum(t.replicas for t in tasks)
    return SimJob(
        name=f"{r.namespace}-{r.name}"[:200],
        queue=r.queue or "default",
        submit=(_utc(r.submitted_at) - origin).total_seconds(),
        run_time=run_time,
        tasks=tasks,
        min_available=min(r.min_available or total, total),
        priority=r.priority or 0,
    )


def _queue_specs(names: list[str], latest: dict[str, QueueConfig]) -> list[QueueSpec]:
    """The queues as configured now (latest `queue_configs` row), Volcano's defaults else."""
    queues = []
    for q in names:
        c = latest.get(q)
        queues.append(
            QueueSpec(
                name=q,
                weight=(c.weight or 1) if c else 1,
                capability=_resource_list(c.capability) if c else None,
                guarantee=_resource_list(c.guarantee) if c else None,
                reclaimable=c.reclaimable if c and c.reclaimable is not None else True,
            )
        )
    return queues


def _shape(job: Job, attempts: list[PodAttempt]) -> tuple[TaskShape, ...]:
    """Per-role pods of the job's first attempt, else replicas with requests split evenly."""
    if attempts:
        by_role: dict[str, dict[str, PodAttempt]] = defaultdict(dict)
        for p in sorted(attempts, key=lambda a: (a.created_at is None, a.created_at, a.name)):
            by_role[p.role or "default"].setdefault(p.name, p)
        shapes = []
        for role, members in sorted(by_role.items()):
            first = next(iter(members.values()))
            shapes.append(
                TaskShape(
                    role,
                    len(members),
                    first.cpu_milli or 0,
                    first.memory_bytes or 0,
                    first.gpu_milli or 0,
                )
            )
        return tuple(shapes)
    replicas = {str(k): int(v) for k, v in (job.replicas or {}).items() if int(v) > 0}
    total = sum(replicas.values())
    if total == 0:
        return ()
    cpu = (job.requested_cpu_milli or 0) // total
    mem = (job.requested_memory_bytes or 0) // total
    gpu = (job.requested_gpu_milli or 0) // total
    return tuple(TaskShape(name, n, cpu, mem, gpu) for name, n in sorted(replicas.items()))
