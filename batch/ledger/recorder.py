"""The recorder: the one door through which controllers and the scheduler write history.

Callers hand over events (``record``/``record_one``) and return at once; a background thread
writes them in batches through ``batch.ledger.writer`` (idempotent upserts, one transaction per
batch). When a write finds the database unreachable, the events waiting in memory go to a local
spill file (JSON lines) at once, and so does every event recorded until it answers again:
written to the OS as it arrives, so a SIGKILL loses none of them, and fsynced at most every
``fsync_interval`` seconds, which bounds what a machine crash loses. When the database answers
again the spill file is replayed first, then the buffer — because writes are idempotent a
batch that was half-sent before an outage, or a spill file replayed twice after a crash, adds
nothing twice.
With ``migrate=True`` (the controllers, the scheduler) the writer thread brings the schema to
head before its first write, so a component starts while the database is unreachable or its
schema cannot be migrated: that is waited out like any outage (records spill, the check is
retried with backoff, one log line says why), and ``health()`` says so meanwhile.
``close`` flushes; if the database is still down (or so slow that the writer thread is still
busy when ``close`` gives up waiting) it spills the rest, the batch in flight included, and the
next recorder with the same spill path picks it up. Events the database rejects as invalid (not
an outage) are written to ``<spill>.rejected.jsonl`` and logged, so nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import itertools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psycopg
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from batch.ledger.db import display_url, make_engine, resolve_url, state_dir
from batch.ledger.events import LedgerEvent, event_from_json, event_to_json
from batch.ledger.health import LedgerHealth
from batch.ledger.writer import Writer

if TYPE_CHECKING:
    from batch.ledger.sampler import UsageSampler, UsageSource
    from batch.model.usage import QueueUsage

log = logging.getLogger(__name__)

_UNDEFINED_TABLE = "42P01"


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means "database unavailable" (retry later) rather than "bad data"."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    # The bulk path talks to psycopg directly (COPY), so its errors arrive unwrapped.
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return True
    if isinstance(exc, psycopg.Error) and getattr(exc, "sqlstate", None) == _UNDEFINED_TABLE:
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        if getattr(exc.orig, "sqlstate", None) == _UNDEFINED_TABLE:
            return True  # schema not migrated yet: wait for `tephra db upgrade`
    return False


DB_ERRORS = (SQLAlchemyError, psycopg.Error)
#: What a driver raises outside its DBAPI errors for a value it cannot hold (SQLite's sqlite3
#: binds integers as 64-bit: `Python int too large to convert to SQLite INTEGER`). Bad data, as
#: PostgreSQL's NumericValueOutOfRange is, never an outage.
VALUE_ERRORS = (OverflowError,)


def default_spill_path(url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return state_dir() / f"ledger-spill-{digest}.jsonl"


@dataclass(slots=True)
class RecorderStats:
    recorded: int = 0
    written: int = 0
    spilled: int = 0
    replayed: int = 0
    rejected: int = 0
    failures: int = 0
    available: bool = True


class Recorder:
    """Buffered, idempotent, outage-tolerant event writer.

    ``db`` is a URL (default: ``TEPHRA_DB_URL`` or the SQLite file) or an ``Engine``. With
    ``background=False`` nothing is written until ``flush()`` is called (useful in tests and
    one-shot tools). With ``migrate=True`` the schema is upgraded to head before the first
    write (retried, never raised: see the module's docstring).
    """

    def __init__(
        self,
        db: str | Engine | None = None,
        *,
        batch_size: int = 1000,
        flush_interval: float = 0.5,
        max_buffer: int = 50_000,
        spill_path: str | Path | None = None,
        retry_interval: float = 1.0,
        max_retry_interval: float = 30.0,
        background: bool = True,
        fsync_interval: float = 1.0,
        migrate: bool = False,
    ) -> None:
        if isinstance(db, Engine):
            self._engine, self._owns_engine = db, False
            url = db.url.render_as_string(hide_password=False)
        else:
            url = resolve_url(db)
            self._engine, self._owns_engine = make_engine(url), True
        self.url = url
        self.batch_size = max(1, batch_size)
        self.flush_interval = flush_interval
        self.max_buffer = max(self.batch_size, max_buffer)
        self.retry_interval = retry_interval
        self.max_retry_interval = max_retry_interval
        self.fsync_interval = max(0.0, fsync_interval)
        self._last_fsync = 0.0
        self._unsynced = False  # spill lines written since the last fsync
        self._spill_base = Path(spill_path) if spill_path else default_spill_path(url)
        self._spill_lock = _claim_spill(self._spill_base)
        if not spill_path:
            sweep_stale_locks(self._spill_base.parent)  # only in the shared state directory
        self.spill_path = Path(self._spill_lock.name.removesuffix(".lock"))
        self._replay_path = _replaying(self.spill_path)
        self._rejected_path = self.spill_path.with_name(self.spill_path.stem + ".rejected.jsonl")
        self._next_orphan_scan = 0.0
        self._writer = Writer()
        self._buffer: deque[LedgerEvent] = deque()
        self._cond = threading.Condition()
        self._inflight = 0
        self._inflight_batch: list[LedgerEvent] = []  # the batch the writer thread is writing
        self._closing = False
        self._closed = False
        self._flush_requests = 0
        self._last_failure = 0.0
        self._backoff = retry_interval
        self._next_attempt = 0.0
        self._first_buffered = 0.0
        self.stats = RecorderStats()
        self._migrated = not migrate  # the schema is at head (checked, or not ours to check)
        self._down_kind: str | None = None  # "outage" or "schema" while writes fail
        self._down_reason: str | None = None
        self._down_since: dt.datetime | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(
                target=self._run, name="tephra-ledger-recorder", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ public API

    def record(self, events: Iterable[LedgerEvent]) -> None:
        """Queue events for writing; never blocks on the database."""
        with self._cond:
            if self._closed:
                raise RuntimeError("recorder is closed")
            if not self.stats.available and not self._closing:
                # the database is known to be down: to disk now, so a SIGKILL loses nothing
                batch = list(events)
                self.stats.recorded += len(batch)
                self._append_spill(batch)
                return
            before = len(self._buffer)
            self._buffer.extend(events)
            if before == 0:
                self._first_buffered = time.monotonic()
            self.stats.recorded += len(self._buffer) - before
            if len(self._buffer) > self.max_buffer:
                self._spill_locked(len(self._buffer) - self.max_buffer // 2)
            if len(self._buffer) >= self.batch_size:
                self._cond.notify_all()

    def record_one(self, event: LedgerEvent) -> None:
        self.record((event,))

    @property
    def pending(self) -> int:
        """Events not yet written (in memory, in flight or in spill files)."""
        with self._cond:
            return len(self._buffer) + self._inflight + self._spilled_lines()

    def health(self) -> LedgerHealth:
        """Up (the schema is at head and the last write succeeded), or why not since when."""
        with self._cond:
            up = self._migrated and self.stats.available
            return LedgerHealth(
                up=up,
                url=display_url(self.url),
                spill_path=self.spill_path,
                reason=None if up else self._down_reason or "schema not checked yet",
                since=None if up else self._down_since,
            )

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Write everything buffered and spilled; True when done, False on outage or timeout."""
        if self._thread is None:
            return self._drain(final=False)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            started = time.monotonic()
            self._flush_requests += 1
            self._next_attempt = 0.0
            self._cond.notify_all()
            try:
                while True:
                    if not self._buffer and self._inflight == 0 and not self._has_spill():
                        return True
                    if self._last_failure > started:
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining if remaining is not None else 1.0)
            finally:
                self._flush_requests -= 1

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush, spill whatever could not be written, stop the thread, release the engine."""
        with self._cond:
            if self._closed:
                return
            self._closing = True
            self._next_attempt = 0.0
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        else:
            self._drain(final=True)
        with self._cond:
            if self._thread is not None and self._thread.is_alive() and self._inflight_batch:
                # The writer is stuck on a slow database: the batch it holds would die with the
                # process. Spill it too (ahead of newer events); writing it twice is harmless.
                self._buffer.extendleft(reversed(self._inflight_batch))
            if self._buffer:
                self._spill_locked(len(self._buffer))
            self._sync_spill_if_due(time.monotonic() + self.fsync_interval)
            self._closed = True
        _release(self._spill_lock)  # gives up the claim on the spill file
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ background loop

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:  # close() gave up waiting and spilled everything: hands off
                    return
                while not self._closing:
                    now = time.monotonic()
                    sync_at = self._sync_spill_if_due(now)
                    due = self._due(now)
                    if due is None:
                        self._cond.wait(min(self.flush_interval, sync_at - now))
                        continue
                    due = max(due, self._next_attempt)
                    if now >= due:
                        break
                    self._cond.wait(min(due, sync_at) - now)
                closing = self._closing
            try:
                self._drain(final=closing)
            except Exception:  # never let the writer thread die: keep the events, retry later
                log.exception("ledger recorder: unexpected error; retrying")
                self._on_outage(RuntimeError("unexpected error"), final=closing)
            if closing:
                return

    def _due(self, now: float) -> float | None:
        """When the next write should start (lock held); None when there is nothing to write."""
        if (
            self._flush_requests
            or not self._migrated
            or len(self._buffer) >= self.batch_size
            or self._has_spill()
            or self._next_orphan_scan == 0.0  # adopt spill files left by dead recorders
        ):
            return now
        if self._buffer:
            return self._first_buffered + self.flush_interval
        return None

    def _drain(self, *, final: bool) -> bool:
        """Write spill files then the buffer; on outage spill (when final) and back off."""
        if not self._migrated and not self._migrate(final=final):
            return False
        try:
            self._replay_spill()
            while True:
                with self._cond:
                    if not self._buffer or self._closed:
                        break
                    n = min(self.batch_size, len(self._buffer))
                    batch = [self._buffer.popleft() for _ in range(n)]
                    self._inflight = n
                    self._inflight_batch = batch
                    self._first_buffered = time.monotonic()
                try:
                    self._write(batch)
                except BaseException:
                    with self._cond:
                        if not self._closed:  # else close() has spilled it already
                            self._buffer.extendleft(reversed(batch))
                        self._inflight = 0
                        self._inflight_batch = []
                    raise
                with self._cond:
                    self._inflight = 0
                    self._inflight_batch = []
                    self.stats.written += n
                    self._cond.notify_all()
        except DB_ERRORS as exc:
            if not is_outage(exc):  # pragma: no cover - _write isolates bad events
                raise
            self._on_outage(exc, final=final)
            return False
        with self._cond:
            if not self.stats.available:
                log.info("ledger database %s is reachable again", display_url(self.url))
            self.stats.available = True
            self._down_kind = self._down_reason = self._down_since = None
            self._backoff = self.retry_interval
            self._cond.notify_all()
        return True

    def _migrate(self, *, final: bool) -> bool:
        """Bring the schema to head before the first write; False (events spill) until done."""
        from batch.ledger.migrate import upgrade

        try:
            upgrade(self._engine)
        except Exception as exc:  # unreachable, or a schema this role cannot migrate: wait
            self._on_outage(exc, final=final, schema=not is_outage(exc))
            return False
        with self._cond:
            self._migrated = True
        return True

    def _on_outage(self, exc: BaseException, *, final: bool, schema: bool = False) -> None:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        kind = "schema" if schema else "outage"
        with self._cond:
            self.stats.failures += 1
            if kind != self._down_kind:  # one line per kind of trouble, not one per retry
                self._log_down(kind, reason)
            self._down_kind, self._down_reason = kind, reason
            self._down_since = self._down_since or dt.datetime.now(dt.UTC)
            self.stats.available = False
            self._last_failure = time.monotonic()
            self._next_attempt = self._last_failure + self._backoff
            self._backoff = min(self._backoff * 2, self.max_retry_interval)
            if self._buffer:  # what waited in memory goes to disk at once (and what comes next)
                self._spill_locked(len(self._buffer))
            self._cond.notify_all()

    def _log_down(self, kind: str, reason: str) -> None:
        where = display_url(self.url)
        if kind == "schema":
            log.error(
                "ledger database %s: cannot bring its schema to head (%s); writing events to %s "
                "until `tephra db upgrade` has run there (retrying)",
                where,
                reason,
                self.spill_path,
            )
        else:
            log.warning(
                "ledger database %s unavailable (%s); writing events to %s (retrying)",
                where,
                reason,
                self.spill_path,
            )

    def _write(self, batch: list[LedgerEvent]) -> None:
        try:
            with self._engine.begin() as conn:
                self._writer.write(conn, batch)
        except (*DB_ERRORS, *VALUE_ERRORS) as exc:
            if is_outage(exc):
                raise
            self._write_isolating(batch)

    def _write_isolating(self, batch: list[LedgerEvent]) -> None:
        """A batch failed on data: write events one by one, set aside the bad ones."""
        for event in batch:
            try:
                with self._engine.begin() as conn:
                    self._writer.write(conn, [event])
            except (*DB_ERRORS, *VALUE_ERRORS) as exc:
                if is_outage(exc):
                    raise
                self._reject(event, exc)

    def _reject(self, event: LedgerEvent, exc: BaseException) -> None:
        log.error("ledger rejected %s %s: %s", event.TYPE, event.identity, exc)
        record = {"error": str(exc).splitlines()[0], "event": event_to_json(event)}
        self._rejected_path.parent.mkdir(parents=True, exist_ok=True)
        with self._rejected_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        with self._cond:
            self.stats.rejected += 1

    # ------------------------------------------------------------------ spill files

    def _spill_locked(self, count: int) -> None:
        """Move the ``count`` oldest buffered events to the spill file (lock held)."""
        if count <= 0:
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with self.spill_path.open("a", encoding="utf-8") as fh:
            for _ in range(min(count, len(self._buffer))):
                fh.write(json.dumps(event_to_json(self._buffer.popleft())) + "\n")
                self.stats.spilled += 1
            fh.flush()
            os.fsync(fh.fileno())
        log.info("ledger: spilled %d events to %s", count, self.spill_path)

    def _append_spill(self, events: list[LedgerEvent]) -> None:
        """Append events to the spill file now (lock held): written to the OS at once, so only
        a machine crash can lose them, and that only since the last fsync (every
        ``fsync_interval`` seconds at most; 0: every write)."""
        if not events:
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with self.spill_path.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(event_to_json(e)) + "\n" for e in events))
            fh.flush()
            now = time.monotonic()
            if now - self._last_fsync >= self.fsync_interval:
                os.fsync(fh.fileno())
                self._last_fsync, self._unsynced = now, False
            else:
                self._unsynced = True
        self.stats.spilled += len(events)

    def _sync_spill_if_due(self, now: float) -> float:
        """fsync spill lines written since the last fsync once the interval has passed (lock
        held); returns when to look again."""
        if not self._unsynced:
            return now + 3600.0
        due = self._last_fsync + self.fsync_interval
        if now < due:
            return due
        try:
            fd = os.open(self.spill_path, os.O_RDONLY)
        except FileNotFoundError:  # replayed meanwhile: nothing left to make durable
            self._unsynced = False
            return now + 3600.0
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._last_fsync, self._unsynced = now, False
        return now + 3600.0

    def _has_spill(self) -> bool:
        return _non_empty(self._replay_path) or _non_empty(self.spill_path)

    def _spilled_lines(self) -> int:
        total = 0
        for path in (self._replay_path, self.spill_path):
            if path.exists():
                with path.open("rb") as fh:
                    total += sum(1 for _ in fh)
        return total

    def _replay_spill(self) -> None:
        """Write our spill file(s), then any left by recorders that are gone."""
        if self._closed:  # the spill file now belongs to whichever recorder claims it next
            return
        self._replay_file(self.spill_path)
        now = time.monotonic()
        if now < self._next_orphan_scan:
            return
        self._next_orphan_scan = now + 60.0
        for orphan in _orphan_spills(self._spill_base, own=self.spill_path):
            lock = _try_lock(orphan)
            if lock is None:
                continue  # its recorder is alive and will replay it
            try:
                log.info("ledger: adopting spill file %s", orphan)
                self._replay_file(orphan)
            finally:
                lock.close()

    def _replay_file(self, spill: Path) -> None:
        """Replay one spill file; deleted only once fully written (replays are idempotent)."""
        replaying = _replaying(spill)
        while True:
            with self._cond:
                if not _non_empty(replaying):
                    if not _non_empty(spill):
                        return
                    os.replace(spill, replaying)
            replayed = 0
            with replaying.open("r", encoding="utf-8") as fh:
                for chunk in _read_chunks(fh, self.batch_size, self._reject_line):
                    self._write(chunk)
                    replayed += len(chunk)
            with self._cond:
                replaying.unlink()
                self.stats.replayed += replayed
                self.stats.written += replayed
            log.info("ledger: caught up %d spilled events from %s", replayed, spill)

    def _reject_line(self, line: str, exc: Exception) -> None:
        log.error("ledger: unreadable spill record skipped to rejected file: %s", exc)
        self._rejected_path.parent.mkdir(parents=True, exist_ok=True)
        with self._rejected_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"error": str(exc), "line": line}) + "\n")
        with self._cond:
            self.stats.rejected += 1

    # ------------------------------------------------------------------ reconciling

    def lost_candidates(
        self,
        *,
        live_jobs: Collection[str],
        live_pods: Collection[str],
        job_kinds: Collection[str] = ("VCJob",),
    ) -> list[LedgerEvent] | None:
        """Final events for what the ledger holds open but the API no longer listed
        (`batch.ledger.reconcile`); None when the ledger cannot be read now (down, or its
        schema not checked yet: `health()`). The caller checks each object is really gone,
        then records the events."""
        from batch.ledger.reconcile import lost_events

        if not self.health().up:
            return None
        now = dt.datetime.now(dt.UTC)
        try:
            with self._engine.connect() as conn:
                return lost_events(
                    conn, live_jobs=live_jobs, live_pods=live_pods, job_kinds=job_kinds, now=now
                )
        except DB_ERRORS as exc:
            log.warning("ledger: cannot reconcile with the API now: %s", str(exc).splitlines()[0])
            return None

    def decayed_usage(self, half_life: float) -> QueueUsage | None:
        """Every queue's decayed usage now (`batch.ledger.usage`); None when the ledger cannot
        be read now (down, or its schema not checked yet: `health()`)."""
        from batch.ledger.usage import decayed_usage

        if not self.health().up:
            return None
        try:
            with self._engine.connect() as conn:
                return decayed_usage(conn, half_life=half_life, now=dt.datetime.now(dt.UTC))
        except DB_ERRORS as exc:
            log.warning("ledger: cannot read queue usage now: %s", str(exc).splitlines()[0])
            return None

    # ------------------------------------------------------------------ sampling

    def start_usage_sampler(
        self, source: UsageSource, *, interval_seconds: float = 60.0
    ) -> UsageSampler:
        """Record ``source(now)`` every ``interval_seconds`` (apscheduler job); returns it.
        (Imported here: apscheduler costs 0.13 s, which the CLI's reports do not pay.)"""
        from batch.ledger.sampler import UsageSampler

        sampler = UsageSampler(self, source, interval_seconds=interval_seconds)
        sampler.start()
        return sampler


def _replaying(spill: Path) -> Path:
    return spill.with_name(spill.name + ".replaying")


def _try_lock(spill: Path) -> IO[str] | None:
    """An exclusive claim on ``spill`` (via ``<spill>.lock``), or None if someone holds it.

    A lock file is removed by the owner that leaves nothing to replay (`_release`), so after
    taking the lock we check that the file is still the one at that path; if it was removed
    meanwhile, the lock is on a dead file and we try again on the new one.
    """
    spill.parent.mkdir(parents=True, exist_ok=True)
    path = f"{spill}.lock"
    while True:
        handle = open(path, "a")  # noqa: SIM115 - held for the recorder's lifetime
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        try:
            current = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return handle
        handle.close()


def _release(handle: IO[str]) -> None:
    """Give up a spill claim; its lock file (and an empty spill file) go too when nothing is
    left to replay, so a state directory does not fill with `.lock` files (issue 19.7: 725 of
    them after a day of tests), one per database URL ever used."""
    spill = Path(handle.name.removesuffix(".lock"))
    if not (_non_empty(spill) or _non_empty(_replaying(spill))):
        for path in (spill, Path(handle.name)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # while still holding the lock: see _try_lock
    handle.close()


def sweep_stale_locks(directory: Path) -> int:
    """Remove lock files nobody holds whose spill files are empty (left by recorders killed
    before `_release`, or by older versions); returns how many went."""
    removed = 0
    if not directory.is_dir():
        return 0
    for lock in directory.glob("ledger-spill-*.lock"):
        spill = lock.with_name(lock.name.removesuffix(".lock"))
        if _non_empty(spill) or _non_empty(_replaying(spill)):
            continue  # a dead recorder's events: adopted by the next recorder of its database
        handle = _try_lock(spill)
        if handle is not None:
            _release(handle)
            removed += 1
    return removed


def _claim_spill(base: Path) -> IO[str]:
    """Claim ``base`` or, if a live recorder holds it, ``<stem>.1.jsonl``, ``<stem>.2...``.

    Two recorders for the same database in one machine (the controllers and the scheduler in
    the sandbox) must never append to or replay the same file.
    """
    for i in itertools.count():
        path = base if i == 0 else base.with_name(f"{base.stem}.{i}{base.suffix}")
        handle = _try_lock(path)
        if handle is not None:
            return handle
    raise AssertionError("unreachable")  # pragma: no cover


def _orphan_spills(base: Path, *, own: Path) -> list[Path]:
    """Spill files of the same base other than ours (``.replaying`` ones by their spill name)."""
    found: set[Path] = set()
    if not base.parent.is_dir():
        return []
    for path in base.parent.glob(f"{base.stem}*{base.suffix}*"):
        name = path.name
        if name.endswith(".lock") or ".rejected" in name:
            continue
        spill = path.with_name(name.removesuffix(".replaying"))
        if spill != own and spill.name.endswith(base.suffix):
            found.add(spill)
    return sorted(found)


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _read_chunks(fh: IO[str], size: int, on_bad: Any) -> Iterator[list[LedgerEvent]]:
    chunk: list[LedgerEvent] = []
    for line in fh:
        text = line.strip()
        if not text:
            continue
        try:
            chunk.append(event_from_json(json.loads(text)))
        except (ValueError, TypeError) as exc:
            on_bad(text, exc)
            continue
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
