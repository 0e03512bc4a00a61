"""The job rollups: waits (``wait_days``) and outcomes (``outcome_days``) per day and queue.

Why these exist: ``report wait-times`` and ``report outcomes`` over a month of a million jobs
read, sorted and aggregated every job of the window (1.3-2 s). The rollups hold the same counts
and sums per (UTC day, queue, namespace), so a report reads a few thousand rows for the window's
whole days plus the raw rows of its partial first and last day (``batch.ledger.reports``).

Percentiles stay exact: ``wait_days`` also splits each day's started jobs into buckets of their
wait (``bucket``: whole seconds below 8 s, then 8 per doubling), so a report finds the bucket
that holds each percentile's rank and reads the exact waits of only that bucket from the jobs.
Jobs still waiting are never in the rollup (their wait grows with the report's "now"); reports
read them raw through a partial index.

How they stay right: a job's contribution is a function of its rows in the views
``report_wait_times`` and ``report_outcomes``; the writer reads those rows for every job it
writes before and after its writes (in the same transaction) and adds the difference
(``JobDelta``), as the usage rollup does (``batch.ledger.rollups``). Replays change no row, so
they add nothing; amounts are integers (counts, microseconds), so the order of events does not
change the sums. Pruning subtracts what it deletes (``forget``); ``backfill`` rebuilds both from
the views (migration 0011, the benchmark after its bulk load).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    delete,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from batch.ledger.buckets import ENDED, bucket_bounds, bucket_of, seconds_to_us
from batch.ledger.columns import NONE, OUTCOMES_VIEW, WAITS_VIEW
from batch.ledger.models import OutcomeDay, WaitDay

__all__ = [
    "ENDED",
    "JobDelta",
    "backfill",
    "bucket_bounds",
    "bucket_of",
    "forget",
    "seconds_to_us",
]

_IN_CHUNK = 500

OUTCOME_COLUMNS = ("completed", "failed", "aborted", "terminated", "deleted")
_PHASES = {name.capitalize(): i for i, name in enumerate(OUTCOME_COLUMNS)}


WaitKey = tuple[dt.date, str, str, int]
OutcomeKey = tuple[dt.date, str, str]
Amounts = list[int]


def _day(stamp: dt.datetime) -> dt.date:
    return stamp.astimezone(dt.UTC).date()


# ------------------------------------------------------------------------------ contributions

_WAIT_COLS = (
    WAITS_VIEW.c.job_uid,
    WAITS_VIEW.c.queue,
    WAITS_VIEW.c.namespace,
    WAITS_VIEW.c.submitted_at,
    WAITS_VIEW.c.wait_seconds,
    WAITS_VIEW.c.still_waiting,
)
_OUTCOME_COLS = (
    OUTCOMES_VIEW.c.job_uid,
    OUTCOMES_VIEW.c.queue,
    OUTCOMES_VIEW.c.namespace,
    OUTCOMES_VIEW.c.outcome,
    OUTCOMES_VIEW.c.retries,
    OUTCOMES_VIEW.c.finished_at,
    OUTCOMES_VIEW.c.run_seconds,
)


def _add_wait(into: dict[WaitKey, Amounts], row: Sequence[Any], sign: int) -> None:
    _, queue, namespace, submitted_at, wait, still_waiting = row
    if still_waiting or submitted_at is None:
        return
    bucket = ENDED if wait is None else bucket_of(float(wait))
    acc = into[(_day(submitted_at), queue or NONE, namespace, bucket)]
    acc[0] += sign
    acc[1] += sign * (0 if wait is None else seconds_to_us(float(wait)))


def _add_outcome(into: dict[OutcomeKey, Amounts], row: Sequence[Any], sign: int) -> None:
    _, queue, namespace, outcome, retries, finished_at, run = row
    if finished_at is None:
        return  # no day: reports without a window read these raw
    acc = into[(_day(finished_at), queue or NONE, namespace)]
    acc[0] += sign
    phase = _PHASES.get(outcome)
    if phase is not None:
        acc[1 + phase] += sign
    acc[6] += sign * int(retries or 0)
    if run is not None:
        acc[7] += sign
        acc[8] += sign * seconds_to_us(float(run))


def _waits() -> defaultdict[WaitKey, Amounts]:
    return defaultdict(lambda: [0, 0])


def _outcomes() -> defaultdict[OutcomeKey, Amounts]:
    return defaultdict(lambda: [0] * 9)


def _chunked(values: Iterable[str]) -> Iterator[list[str]]:
    items = sorted(values)
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def _read(conn: Connection, cols: Sequence[Any], uids: Iterable[str]) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for chunk in _chunked(uids):
        for row in conn.execute(select(*cols).where(cols[0].in_(chunk))):
            out[row[0]] = tuple(row)
    return out


def _diff(
    into: Any,
    adder: Callable[[Any, Sequence[Any], int], None],
    before: Mapping[str, tuple[Any, ...]],
    after: Mapping[str, tuple[Any, ...]],
) -> None:
    """Add what changed: a job's row after, minus its row before (a job can also leave a view:
    a later phase that is not terminal takes it out of ``report_outcomes``)."""
    for uid in before.keys() | after.keys():
        old, new = before.get(uid), after.get(uid)
        if old == new:
            continue
        if old is not None:
            adder(into, old, -1)
        if new is not None:
            adder(into, new, +1)


class JobDelta:
    """What one write changes in the job rollups: the jobs' view rows before, then after."""

    def __init__(self, conn: Connection, job_uids: Iterable[str]) -> None:
        self.uids = set(job_uids)
        self.waits_before = _read(conn, _WAIT_COLS, self.uids)
        self.outcomes_before = _read(conn, _OUTCOME_COLS, self.uids)

    def apply(self, conn: Connection) -> None:
        """Read the rows after the writes (jobs and transitions) and add the difference."""
        if not self.uids:
            return
        waits, outcomes = _waits(), _outcomes()
        _diff(waits, _add_wait, self.waits_before, _read(conn, _WAIT_COLS, self.uids))
        _diff(outcomes, _add_outcome, self.outcomes_before, _read(conn, _OUTCOME_COLS, self.uids))
        add(conn, waits, outcomes)


# ------------------------------------------------------------------------------------ storing

_WAIT_KEYS = ("day", "queue", "namespace", "bucket")
_WAIT_AMOUNTS = ("jobs", "wait_us")
_OUTCOME_KEYS = ("day", "queue", "namespace")
_OUTCOME_AMOUNTS = ("finished", *OUTCOME_COLUMNS, "retries", "runs", "run_us")


def add(
    conn: Connection,
    waits: Mapping[WaitKey, Amounts],
    outcomes: Mapping[OutcomeKey, Amounts],
) -> None:
    """Add the deltas to the rollups; rows whose count falls to zero are deleted."""
    _upsert_add(conn, WaitDay.__table__, _WAIT_KEYS, _WAIT_AMOUNTS, waits)
    _upsert_add(conn, OutcomeDay.__table__, _OUTCOME_KEYS, _OUTCOME_AMOUNTS, outcomes)


def _upsert_add(
    conn: Connection,
    target: Any,
    keys: Sequence[str],
    amounts: Sequence[str],
    delta: Mapping[tuple[Any, ...], Amounts],
) -> None:
    rows: list[dict[str, Any]] = [
        {**dict(zip(keys, k, strict=True)), **dict(zip(amounts, a, strict=True))}
        for k, a in sorted(delta.items())
        if any(a)
    ]
    if not rows:
        return
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(target)
    stmt = stmt.on_conflict_do_update(
        index_elements=[target.c[k] for k in keys],
        set_={c: target.c[c] + stmt.excluded[c] for c in amounts},
    )
    for i in range(0, len(rows), _IN_CHUNK):
        conn.execute(stmt, rows[i : i + _IN_CHUNK])
    count = amounts[0]
    emptied = [r for r in rows if r[count] < 0]
    if emptied:
        match = and_(*(target.c[k] == bindparam(f"k_{k}") for k in keys))
        params = [{f"k_{k}": r[k] for k in keys} for r in emptied]
        conn.execute(delete(target).where(match, target.c[count] <= 0), params)


# ------------------------------------------------------------------------- rebuild and prune


def _stream(
    conn: Connection,
    cols: Sequence[Any],
    where: ColumnElement[bool] | None,
    adder: Callable[[Any, Sequence[Any], int], None],
    into: Any,
    sign: int,
    progress: Callable[[int], None] | None,
) -> None:
    stmt = select(*cols)
    if where is not None:
        stmt = stmt.where(where)
    options = {"stream_results": True, "yield_per": 20_000}
    seen = 0
    for row in conn.execute(stmt, execution_options=options):
        adder(into, row, sign)
        seen += 1
        if progress is not None and seen % 100_000 == 0:
            progress(seen)
    if progress is not None and seen % 100_000:
        progress(seen)


def backfill(conn: Connection, *, progress: Callable[[str, int], None] | None = None) -> int:
    """Rebuild both rollups from the views (deleting what they held); returns their rows."""
    conn.execute(delete(WaitDay))
    conn.execute(delete(OutcomeDay))
    waits, outcomes = _waits(), _outcomes()
    tell_w = (lambda n: progress("waits", n)) if progress is not None else None
    tell_o = (lambda n: progress("outcomes", n)) if progress is not None else None
    _stream(conn, _WAIT_COLS, None, _add_wait, waits, +1, tell_w)
    _stream(conn, _OUTCOME_COLS, None, _add_outcome, outcomes, +1, tell_o)
    add(conn, waits, outcomes)
    return sum(1 for a in waits.values() if any(a)) + sum(1 for a in outcomes.values() if any(a))


def forget(conn: Connection, jobs: Any) -> None:
    """Subtract the jobs whose uid is in ``jobs`` (a subquery), before they are deleted (and
    before their transitions are: a Failed job's outcome looks for its deletion there)."""
    waits, outcomes = _waits(), _outcomes()
    _stream(conn, _WAIT_COLS, WAITS_VIEW.c.job_uid.in_(jobs), _add_wait, waits, -1, None)
    _stream(
        conn, _OUTCOME_COLS, OUTCOMES_VIEW.c.job_uid.in_(jobs), _add_outcome, outcomes, -1, None
    )
    add(conn, waits, outcomes)
