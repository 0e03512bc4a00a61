"""The usage rollup (``usage_days``): finished pods' use per day, kept exact by deltas.

Why this exists: the usage report over a month split every pod run into days and joined its job
on every call (seconds at a million jobs). The rollup holds the same figures per (UTC day,
queue, namespace, submitter) for pods that have finished, so a report reads a few thousand rows
plus the pods still running and the partial last day (``batch.ledger.reports.usage``).

How it stays right: a pod's contribution depends on its own row (start, finish, resources,
queue, namespace) and its job's queue and submitter. The writer reads that state for every pod
it touches, and for the finished pods of every job whose queue or submitter it changes, before
and after its upserts, and adds the difference (``UsageDelta``). Replaying events changes no row,
so it adds nothing; amounts are integers (milliseconds times milli-units), so the order of events
does not change the sums. Pruning subtracts what it deletes (``forget``). ``backfill`` builds the
rollup from the raw rows (migration 0010, and the benchmark after its bulk load).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from batch.ledger.columns import NONE
from batch.ledger.models import Job, PodAttempt, UsageDay

__all__ = ["UsageDelta", "backfill", "contributions", "forget"]

DAY = dt.timedelta(days=1)
_IN_CHUNK = 500

Key = tuple[dt.date, str, str, str]
#: per key: pod-days, pods started, GPU milli-ms, CPU milli-ms
Amounts = list[int]


@dataclass(frozen=True, slots=True)
class PodState:
    namespace: str
    queue: str | None
    job_uid: str | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    gpu_milli: int | None
    cpu_milli: int | None


JobKeys = tuple[str | None, str | None]  # the job's queue and submitter

_POD_COLS = (
    PodAttempt.pod_uid,
    PodAttempt.namespace,
    PodAttempt.queue,
    PodAttempt.job_uid,
    PodAttempt.started_at,
    PodAttempt.finished_at,
    PodAttempt.gpu_milli,
    PodAttempt.cpu_milli,
)


def _ms(delta: dt.timedelta) -> int:
    return (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds + 500) // (
        1000
    )


def contributions(pod: PodState, job: JobKeys | None) -> Iterator[tuple[Key, int, int, int, int]]:
    """A finished pod's rows of ``report_pod_usage``: per day with a positive run time, its key,
    1 pod-day, 1 if it is the pod's first day, and GPU and CPU milli-ms."""
    start, end = pod.started_at, pod.finished_at
    if start is None or end is None or end <= start:
        return
    queue = pod.queue if pod.queue is not None else (job[0] if job else None)
    submitter = job[1] if job else None
    keys = (queue or NONE, pod.namespace, submitter or NONE)
    gpu, cpu = pod.gpu_milli or 0, pod.cpu_milli or 0
    day = start.astimezone(dt.UTC).date()
    first = 1
    while True:
        day_start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
        if day_start >= end:
            return
        ms = _ms(min(end, day_start + DAY) - max(start, day_start))
        yield (day, *keys), 1, first, ms * gpu, ms * cpu
        first = 0
        day += DAY


def _add(into: dict[Key, Amounts], pod: PodState, job: JobKeys | None, sign: int) -> None:
    for key, *amounts in contributions(pod, job):
        acc = into[key]
        for i, amount in enumerate(amounts):
            acc[i] += sign * amount


def _chunked(values: Iterable[str]) -> Iterator[list[str]]:
    items = sorted(values)
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def _state(row: Any) -> PodState:
    return PodState(*row[1:])


def read_pods(
    conn: Connection, where: Callable[[list[str]], Any], uids: Iterable[str]
) -> dict[str, PodState]:
    out: dict[str, PodState] = {}
    for chunk in _chunked(uids):
        for row in conn.execute(select(*_POD_COLS).where(where(chunk))):
            out[row[0]] = _state(row)
    return out


def read_jobs(conn: Connection, uids: Iterable[str]) -> dict[str, JobKeys]:
    out: dict[str, JobKeys] = {}
    for chunk in _chunked(uids):
        stmt = select(Job.uid, Job.queue, Job.submitter).where(Job.uid.in_(chunk))
        out.update({uid: (queue, submitter) for uid, queue, submitter in conn.execute(stmt)})
    return out


def _by_uid(chunk: list[str]) -> ColumnElement[bool]:
    return PodAttempt.pod_uid.in_(chunk)


def _finished_of(chunk: list[str]) -> ColumnElement[bool]:
    return and_(
        PodAttempt.job_uid.in_(chunk),
        PodAttempt.started_at.is_not(None),
        PodAttempt.finished_at.is_not(None),
    )


class UsageDelta:
    """What one write changes in the rollup: the state before the upserts, then after."""

    def __init__(
        self, conn: Connection, pods: Mapping[str, Mapping[str, Any]], jobs: Iterable[str]
    ) -> None:
        self.pod_uids = set(pods)
        self.pods_before = read_pods(conn, _by_uid, self.pod_uids)
        job_uids = set(jobs)
        job_uids.update(p.job_uid for p in self.pods_before.values() if p.job_uid)
        job_uids.update(str(r["job_uid"]) for r in pods.values() if r.get("job_uid"))
        self.job_uids = job_uids
        self.jobs_before = read_jobs(conn, job_uids)

    def apply(self, conn: Connection) -> None:
        """Read the state after the upserts and add the difference to the rollup."""
        jobs_after = read_jobs(conn, self.job_uids)
        unknown = (None, None)  # a job not recorded yet gives its pods no queue or submitter
        changed = {
            u
            for u in self.job_uids
            if jobs_after.get(u, unknown) != self.jobs_before.get(u, unknown)
        }
        pods_after = read_pods(conn, _by_uid, self.pod_uids)
        others = read_pods(conn, _finished_of, changed)
        delta: dict[Key, Amounts] = defaultdict(lambda: [0, 0, 0, 0])
        for uid in self.pod_uids:
            before, after = self.pods_before.get(uid), pods_after.get(uid)
            if before is not None:
                _add(delta, before, self.jobs_before.get(before.job_uid or ""), -1)
            if after is not None:
                _add(delta, after, jobs_after.get(after.job_uid or ""), +1)
        for uid, pod in others.items():
            if uid not in self.pod_uids:
                _add(delta, pod, self.jobs_before.get(pod.job_uid or ""), -1)
                _add(delta, pod, jobs_after.get(pod.job_uid or ""), +1)
        add(conn, delta)


def add(conn: Connection, delta: Mapping[Key, Amounts]) -> None:
    """Add ``delta`` to the rollup; rows whose pod-days fall to zero are deleted."""
    rows: list[dict[str, Any]] = [
        {
            "day": k[0],
            "queue": k[1],
            "namespace": k[2],
            "submitter": k[3],
            "pod_days": a[0],
            "pods_started": a[1],
            "gpu_milli_ms": a[2],
            "cpu_milli_ms": a[3],
        }
        for k, a in sorted(delta.items())
        if any(a)
    ]
    if not rows:
        return
    table: Any = UsageDay.__table__
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(table)
    amounts = ("pod_days", "pods_started", "gpu_milli_ms", "cpu_milli_ms")
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c.day, table.c.queue, table.c.namespace, table.c.submitter],
        set_={c: table.c[c] + stmt.excluded[c] for c in amounts},
    )
    for i in range(0, len(rows), _IN_CHUNK):
        conn.execute(stmt, rows[i : i + _IN_CHUNK])
    emptied = [r for r in rows if r["pod_days"] < 0]
    if emptied:
        key = and_(
            table.c.day == _bind("day"),
            table.c.queue == _bind("queue"),
            table.c.namespace == _bind("namespace"),
            table.c.submitter == _bind("submitter"),
        )
        params = [
            {f"k_{c}": r[c] for c in ("day", "queue", "namespace", "submitter")} for r in emptied
        ]
        conn.execute(delete(table).where(key, table.c.pod_days <= 0), params)


def _bind(name: str) -> Any:
    return bindparam(f"k_{name}")


def _stream(
    conn: Connection, where: ColumnElement[bool], progress: Callable[[int], None] | None
) -> dict[Key, Amounts]:
    """The contributions of the finished pods matching ``where``, summed."""
    p, j = PodAttempt, Job
    stmt = (
        select(*_POD_COLS, j.queue, j.submitter)
        .outerjoin(j, j.uid == p.job_uid)
        .where(where, p.started_at.is_not(None), p.finished_at.is_not(None))
    )
    total: dict[Key, Amounts] = defaultdict(lambda: [0, 0, 0, 0])
    seen = 0
    # Options for this statement only: Connection.execution_options would change the connection.
    options = {"stream_results": True, "yield_per": 20_000}
    result = conn.execute(stmt, execution_options=options)
    for row in result:
        _add(total, _state(row[:8]), (row[8], row[9]), +1)
        seen += 1
        if progress is not None and seen % 100_000 == 0:
            progress(seen)
    if progress is not None and seen % 100_000:
        progress(seen)
    return total


def backfill(conn: Connection, *, progress: Callable[[int], None] | None = None) -> int:
    """Rebuild the rollup from the raw rows (deleting what it held); returns its row count."""
    conn.execute(delete(UsageDay))
    total = _stream(conn, and_(PodAttempt.pod_uid.is_not(None)), progress)
    add(conn, total)
    return len(total)


def forget(conn: Connection, pods: ColumnElement[bool]) -> None:
    """Subtract the finished pods matching ``pods`` (before they are deleted)."""
    total = _stream(conn, pods, None)
    add(conn, {k: [-x for x in a] for k, a in total.items()})
