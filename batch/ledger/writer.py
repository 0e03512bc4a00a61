"""Turn a batch of ledger events into idempotent upserts, in one transaction.

Idempotency is the contract: applying the same events twice, or in another order, leaves the
same rows. Each column has a merge rule used both in Python (to fold duplicates within a batch,
which PostgreSQL's ``ON CONFLICT DO UPDATE`` refuses to touch twice in one statement) and in SQL
(against the stored row):

* ``first``  — keep the stored value, fill it if unknown (set-once facts: node, start, exit code);
* ``latest`` — a known new value replaces the stored one (queue, requested resources);
* ``min``/``max`` — submission and first start times, retry counts;
* the job's phase is the one with the greatest (time, phase rank, name); ``final_phase`` and
  ``finished_at`` follow the winning phase.

Every observed queue configuration is kept as a row (the same queue and time twice adds
nothing): skipping one because it equals the configuration in force when it arrives would lose
it when an earlier, different change arrives after it (a recorder replaying a spill file
reorders events), and the configuration in force at any time must not depend on arrival order.
Consecutive repeats are harmless to every reader.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from psycopg.types.json import Json
from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Table,
    and_,
    case,
    column,
    func,
    or_,
    select,
    table as sa_table,
)
from sqlalchemy.dialects import postgresql, sqlite

from batch.ledger import events as ev
from batch.ledger.jobrollups import JobDelta
from batch.ledger.models import (
    TERMINAL_JOB_PHASES,
    Job,
    JobTransition,
    PodAttempt,
    QueueConfig,
    QueueUsageSample,
    SchedulingEvent,
)
from batch.ledger.rollups import UsageDelta

Policy = Literal["first", "latest", "min", "max", "phase", "derived", "now"]
Row = dict[str, Any]

PHASE_RANK: dict[str, int] = {
    "Pending": 0,
    "Inqueue": 1,
    "Restarting": 1,
    "Unknown": 1,
    "Running": 2,
    "Aborting": 3,
    "Completing": 3,
    "Terminating": 3,
    "Aborted": 4,
    "Completed": 4,
    "Failed": 4,
    "Terminated": 4,
    "Deleted": 4,
}
_DEFAULT_RANK = 1

JOB_POLICY: dict[str, Policy] = {
    "namespace": "first",
    "name": "first",
    "kind": "first",
    "queue": "latest",
    "submitter": "latest",
    "priority_class": "latest",
    "priority": "latest",
    "podgroup": "latest",
    "requested_cpu_milli": "latest",
    "requested_memory_bytes": "latest",
    "requested_gpu_milli": "latest",
    "replicas": "latest",
    "min_available": "latest",
    "running_estimate_s": "latest",
    "submitted_at": "min",
    "first_started_at": "min",
    "retries": "max",
    "phase": "phase",
    "phase_at": "phase",
    "final_phase": "derived",
    "finished_at": "derived",
    "updated_at": "now",
}

POD_POLICY: dict[str, Policy] = dict.fromkeys(
    (
        "namespace",
        "name",
        "job_uid",
        "podgroup",
        "role",
        "queue",
        "node",
        "cpu_milli",
        "memory_bytes",
        "gpu_milli",
        "created_at",
        "bound_at",
        "started_at",
        "finished_at",
        "exit_code",
        "outcome",
        "eviction_cause",
    ),
    "first",
)
POD_POLICY["restarts"] = "max"


class UnsupportedDatabase(RuntimeError):
    pass


# --------------------------------------------------------------------------- Python-side merging


def _phase_key(phase: str | None, at: dt.datetime | None) -> tuple[dt.datetime, int, str] | None:
    if phase is None or at is None:
        return None
    return (at, PHASE_RANK.get(phase, _DEFAULT_RANK), phase)


def _merge_rows(policy: Mapping[str, Policy], old: Row, new: Row) -> Row:
    out = dict(old)
    for col, rule in policy.items():
        a, b = old.get(col), new.get(col)
        if rule == "first":
            out[col] = a if a is not None else b
        elif rule == "latest":
            out[col] = b if b is not None else a
        elif rule in ("min", "max"):
            if a is None or b is None:
                out[col] = a if b is None else b
            else:
                out[col] = min(a, b) if rule == "min" else max(a, b)
        elif rule == "now":
            out[col] = b if b is not None else a
    if "phase" in policy:
        old_key = _phase_key(old.get("phase"), old.get("phase_at"))
        new_key = _phase_key(new.get("phase"), new.get("phase_at"))
        new_wins = new.get("phase") is not None and (
            old.get("phase") is None
            or (new_key is not None and (old_key is None or new_key >= old_key))
        )
        winner = new if new_wins else old
        for col in ("phase", "phase_at", "final_phase", "finished_at"):
            out[col] = winner.get(col)
    return out


# ------------------------------------------------------------------------------ SQL-side merging


def _rank_sql(col: ColumnElement[Any]) -> ColumnElement[int]:
    return case(PHASE_RANK, value=col, else_=_DEFAULT_RANK)


def _phase_wins_sql(table: Table, excluded: Any) -> ColumnElement[bool]:
    new_phase, new_at = excluded.phase, excluded.phase_at
    old_phase, old_at = table.c.phase, table.c.phase_at
    later = or_(
        old_at.is_(None),
        new_at > old_at,
        and_(
            new_at == old_at,
            or_(
                _rank_sql(new_phase) > _rank_sql(old_phase),
                and_(_rank_sql(new_phase) == _rank_sql(old_phase), new_phase >= old_phase),
            ),
        ),
    )
    return and_(
        new_phase.is_not(None),
        or_(old_phase.is_(None), and_(new_at.is_not(None), later)),
    )


def _set_clause(table: Table, excluded: Any, policy: Mapping[str, Policy]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    wins = _phase_wins_sql(table, excluded) if "phase" in policy else None
    for col, rule in policy.items():
        old, new = table.c[col], excluded[col]
        if rule == "first":
            out[col] = case((old.is_(None), new), else_=old)
        elif rule in ("latest", "now"):
            out[col] = case((new.is_(None), old), else_=new)
        elif rule in ("min", "max"):
            better = new < old if rule == "min" else new > old
            out[col] = case((old.is_(None), new), (new.is_(None), old), (better, new), else_=old)
        elif rule in ("phase", "derived"):
            assert wins is not None
            out[col] = case((wins, new), else_=old)
    return out


# --------------------------------------------------------------------------------- the writer


def _insert_fn(conn: Connection) -> Callable[[Table], Any]:
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert
    if name == "sqlite":
        return sqlite.insert
    raise UnsupportedDatabase(f"the ledger supports sqlite and postgresql, not {name}")


def _chunks(rows: Sequence[Row], size: int) -> Iterable[Sequence[Row]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


class _Batch:
    """Rows folded per table, keyed by natural key."""

    def __init__(self) -> None:
        self.jobs: dict[str, Row] = {}
        self.pods: dict[str, Row] = {}
        self.transitions: dict[tuple[Any, ...], Row] = {}
        self.scheduling: dict[tuple[Any, ...], Row] = {}
        self.samples: dict[tuple[Any, ...], Row] = {}
        self.queue_configs: list[ev.QueueConfigChanged] = []

    def add_job(self, row: Row) -> None:
        full = {col: row.get(col) for col in JOB_POLICY}
        full["uid"] = row["uid"]
        old = self.jobs.get(row["uid"])
        self.jobs[row["uid"]] = full if old is None else _merge_rows(JOB_POLICY, old, full)

    def add_pod(self, row: Row) -> None:
        full = {col: row.get(col) for col in POD_POLICY}
        full["pod_uid"] = row["pod_uid"]
        old = self.pods.get(row["pod_uid"])
        self.pods[row["pod_uid"]] = full if old is None else _merge_rows(POD_POLICY, old, full)

    def add(self, event: ev.LedgerEvent, now: dt.datetime) -> None:
        if isinstance(event, ev.JobObserved):
            self._job_observed(event, now)
        elif isinstance(event, ev.JobPhaseChanged):
            self._phase_changed(event, now)
        elif isinstance(event, ev.PodAttempt):
            self.add_pod({"pod_uid": event.pod_uid, **_fields(event, POD_POLICY)})
        elif isinstance(event, ev.SchedulingEvent):
            self._scheduling(event)
        elif isinstance(event, ev.QueueConfigChanged):
            self.queue_configs.append(event)
        elif isinstance(event, ev.QueueUsageSample):
            self._sample(event)
        else:  # pragma: no cover - typing guards this
            raise TypeError(f"not a ledger event: {event!r}")

    def _job_observed(self, e: ev.JobObserved, now: dt.datetime) -> None:
        row = _fields(e, JOB_POLICY)
        row["uid"] = e.uid
        row["replicas"] = dict(e.replicas) if e.replicas is not None else None
        row["submitted_at"] = _utc(e.submitted_at)
        row["phase_at"] = _utc(e.phase_at)
        if e.phase is not None and e.phase in TERMINAL_JOB_PHASES:
            row["final_phase"], row["finished_at"] = e.phase, row["phase_at"]
        if e.phase == "Running" and row["phase_at"] is not None:
            row["first_started_at"] = row["phase_at"]
        row["updated_at"] = now
        self.add_job(row)

    def _phase_changed(self, e: ev.JobPhaseChanged, now: dt.datetime) -> None:
        at = ev.utc(e.at)
        key = (e.job_uid, e.source, e.to_phase, at)
        self.transitions.setdefault(
            key,
            {
                "job_uid": e.job_uid,
                "source": e.source,
                "from_phase": e.from_phase,
                "to_phase": e.to_phase,
                "at": at,
                "reason": e.reason,
                "message": e.message,
            },
        )
        row: Row = {
            "uid": e.job_uid,
            "namespace": e.namespace,
            "name": e.name,
            "kind": e.kind,
            "updated_at": now,
        }
        if e.source == "job":
            row["phase"], row["phase_at"] = e.to_phase, at
            if e.to_phase in TERMINAL_JOB_PHASES:
                row["final_phase"], row["finished_at"] = e.to_phase, at
            if e.to_phase == "Running":
                row["first_started_at"] = at
        self.add_job(row)

    def _scheduling(self, e: ev.SchedulingEvent) -> None:
        key = (e.action, e.victim_pod_uid)
        row = {c: getattr(e, c) for c in _SCHED_COLUMNS}
        row["at"] = ev.utc(e.at)
        self.scheduling.setdefault(key, row)
        self.add_pod(
            {
                "pod_uid": e.victim_pod_uid,
                "namespace": e.victim_namespace,
                "name": e.victim_pod,
                "job_uid": e.victim_job_uid,
                "queue": e.victim_queue,
                "eviction_cause": e.action,
            }
        )

    def _sample(self, e: ev.QueueUsageSample) -> None:
        at = ev.utc(e.at)
        names = set(e.allocated)
        for extra in (e.deserved, e.capability, e.pending):
            if extra:
                names.update(extra)
        for resource in sorted(names):
            key = (e.queue, resource, at)
            self.samples.setdefault(
                key,
                {
                    "at": at,
                    "queue": e.queue,
                    "resource": resource,
                    "allocated": int(e.allocated.get(resource, 0)),
                    "deserved": _get(e.deserved, resource),
                    "capability": _get(e.capability, resource),
                    "pending": _get(e.pending, resource),
                },
            )


_SCHED_COLUMNS = (
    "action",
    "victim_pod_uid",
    "victim_namespace",
    "victim_pod",
    "victim_job_uid",
    "victim_queue",
    "beneficiary_job_uid",
    "beneficiary_queue",
    "reason",
    "session_id",
    "cpu_milli",
    "memory_bytes",
    "gpu_milli",
)


def _get(mapping: Mapping[str, int] | None, key: str) -> int | None:
    if mapping is None or key not in mapping:
        return None
    return int(mapping[key])


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else ev.utc(value)


_COLUMNS_OF: dict[tuple[type, int], tuple[str, ...]] = {}


def _fields(event: Any, policy: Mapping[str, Policy]) -> Row:
    """The event's attributes that are columns of the policy's table (datetimes in UTC)."""
    key = (type(event), id(policy))
    cols = _COLUMNS_OF.get(key)
    if cols is None:
        cols = _COLUMNS_OF[key] = tuple(c for c in policy if hasattr(event, c))
    out: Row = {}
    for col in cols:
        value = getattr(event, col)
        if value is not None and isinstance(value, dt.datetime):
            value = ev.utc(value)
        out[col] = value
    return out


class Writer:
    """Applies event batches to one database connection's transaction."""

    def __init__(self, *, chunk_size: int = 1000, copy_threshold: int = 64) -> None:
        self.chunk_size = chunk_size
        self.copy_threshold = copy_threshold

    def write(
        self, conn: Connection, events: Iterable[ev.LedgerEvent], *, now: dt.datetime | None = None
    ) -> int:
        """Write ``events`` using ``conn`` (the caller owns the transaction); returns the count."""
        stamp = ev.utc(now or dt.datetime.now(dt.UTC))
        batch = _Batch()
        count = 0
        for event in events:
            batch.add(event, stamp)
            count += 1
        insert = _insert_fn(conn)
        # The usage rollup follows the pod and job rows, in this transaction.
        # Only a job row that names a queue or submitter can move its pods to other keys.
        keyed = [u for u, r in batch.jobs.items() if r["queue"] is not None or r["submitter"]]
        usage = UsageDelta(conn, batch.pods, keyed)
        # The wait and outcome rollups follow the jobs' rows in the report views, which also
        # read the transitions (a Failed job deleted first is Deleted): after both are written.
        waits_and_outcomes = JobDelta(conn, batch.jobs)
        self._upsert(conn, insert, Job.__table__, "uid", JOB_POLICY, list(batch.jobs.values()))
        self._upsert(
            conn, insert, PodAttempt.__table__, "pod_uid", POD_POLICY, list(batch.pods.values())
        )
        usage.apply(conn)
        self._insert_new(conn, insert, JobTransition.__table__, list(batch.transitions.values()))
        self._collapse_repeats(conn, {row["job_uid"] for row in batch.transitions.values()})
        waits_and_outcomes.apply(conn)
        self._insert_new(conn, insert, SchedulingEvent.__table__, list(batch.scheduling.values()))
        self._insert_new(conn, insert, QueueUsageSample.__table__, list(batch.samples.values()))
        for change in sorted(batch.queue_configs, key=lambda c: ev.utc(c.at)):
            self._queue_config(conn, insert, change)
        return count

    def _upsert(
        self,
        conn: Connection,
        insert: Callable[[Table], Any],
        table: Any,
        key: str,
        policy: Mapping[str, Policy],
        rows: list[Row],
    ) -> None:
        if not rows:
            return
        if self._use_copy(conn, rows):
            stage, cols = self._stage(conn, table, rows)
            stmt = insert(table).from_select(cols, select(*stage.c))
            stmt = stmt.on_conflict_do_update(
                index_elements=[table.c[key]], set_=_set_clause(table, stmt.excluded, policy)
            )
            conn.execute(stmt)
            conn.execute(stage.delete())
            return
        stmt = insert(table)
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c[key]], set_=_set_clause(table, stmt.excluded, policy)
        )
        for chunk in _chunks(rows, self.chunk_size):
            conn.execute(stmt, list(chunk))

    def _insert_new(
        self, conn: Connection, insert: Callable[[Table], Any], table: Any, rows: list[Row]
    ) -> None:
        if not rows:
            return
        if self._use_copy(conn, rows):
            stage, cols = self._stage(conn, table, rows)
            conn.execute(insert(table).from_select(cols, select(*stage.c)).on_conflict_do_nothing())
            conn.execute(stage.delete())
            return
        stmt = insert(table).on_conflict_do_nothing()
        for chunk in _chunks(rows, self.chunk_size):
            conn.execute(stmt, list(chunk))

    def _collapse_repeats(self, conn: Connection, job_uids: set[str]) -> None:
        """Drop a transition into the phase its job (per source) was already in.

        A re-listed object reports its current phase with the time its object says; when that
        time moved while the phase did not (the gang condition of a waiting PodGroup is rewritten
        with each new reason), the re-list would otherwise add a second "-> Pending". Of two
        consecutive transitions into the same phase the earlier is kept, whatever the arrival
        order, so the result does not depend on it.
        """
        if not job_uids:
            return
        t: Any = JobTransition.__table__
        ordered = (
            select(
                t.c.id,
                t.c.to_phase,
                func.lag(t.c.to_phase)
                .over(partition_by=(t.c.job_uid, t.c.source), order_by=(t.c.at, t.c.id))
                .label("previous"),
            )
            .where(t.c.job_uid.in_(sorted(job_uids)))
            .subquery()
        )
        repeats = select(ordered.c.id).where(ordered.c.previous == ordered.c.to_phase)
        conn.execute(t.delete().where(t.c.id.in_(repeats)))

    def _use_copy(self, conn: Connection, rows: list[Row]) -> bool:
        return conn.dialect.name == "postgresql" and len(rows) >= self.copy_threshold

    def _stage(self, conn: Connection, table: Any, rows: list[Row]) -> tuple[Any, list[str]]:
        """COPY ``rows`` into a per-connection temporary table shaped like ``table``.

        PostgreSQL ingests COPY an order of magnitude faster than row-by-row statements; one
        ``INSERT ... SELECT ... ON CONFLICT`` then applies the same merge rules as the slow path.
        """
        cols = [c.name for c in table.c if c.name != "id"]
        json_cols = {c.name for c in table.c if isinstance(c.type, JSON)}
        name = f"tephra_stage_{table.name}"
        raw: Any = conn.connection.driver_connection
        col_list = ", ".join(cols)
        with raw.cursor() as cur:
            # Every time, inside this transaction: a table created by a transaction that was
            # rolled back is gone, and remembering it per connection once made every later bulk
            # write fail ("relation does not exist", taken for an outage) for good.
            cur.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {name} ON COMMIT DELETE ROWS AS "
                f"SELECT {col_list} FROM {table.name} WITH NO DATA"
            )
            with cur.copy(f"COPY {name} ({col_list}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(
                        [
                            Json(row.get(c))
                            if c in json_cols and row.get(c) is not None
                            else row.get(c)
                            for c in cols
                        ]
                    )
        return sa_table(name, *(column(c) for c in cols)), cols

    def _queue_config(
        self, conn: Connection, insert: Callable[[Table], Any], change: ev.QueueConfigChanged
    ) -> None:
        table: Any = QueueConfig.__table__
        at = ev.utc(change.at)
        row = {
            "queue": change.queue,
            "queue_uid": change.queue_uid,
            "valid_from": at,
            "config_hash": change.config_hash,
            "weight": change.weight,
            "capability": _plain(change.capability),
            "guarantee": _plain(change.guarantee),
            "deserved": _plain(change.deserved),
            "reclaimable": change.reclaimable,
            "priority": change.priority,
            "state": change.state,
            "parent": change.parent,
        }
        conn.execute(insert(table).on_conflict_do_nothing(), [row])


def _plain(mapping: Mapping[str, int] | None) -> dict[str, int] | None:
    return None if mapping is None else {k: int(v) for k, v in mapping.items()}


__all__ = ["PHASE_RANK", "UnsupportedDatabase", "Writer"]
