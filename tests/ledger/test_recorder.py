"""Recorder: idempotent under replay, order-insensitive, buffered and spilled across outages."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from batch.ledger import events as ev, migrate
from batch.ledger.db import make_engine
from batch.ledger.models import TABLES
from batch.ledger.recorder import Recorder
from batch.ledger.sampler import UsageSampler, slot_time

from .helpers import count, rows, snapshot, t

CLOSED_PORT_URL = "postgresql+psycopg://postgres@127.0.0.1:1/tephra_nowhere"


def job_stream(n_jobs: int = 5) -> list[ev.LedgerEvent]:
    """A plausible history: submit, phases, pods bound/started/finished, a reclaim, queues."""
    out: list[ev.LedgerEvent] = [
        ev.QueueConfigChanged(queue="q1", at=t(1), weight=1, deserved={"nvidia.com/gpu": 4000}),
        ev.QueueConfigChanged(queue="q1", at=t(2), weight=3, deserved={"nvidia.com/gpu": 4000}),
        ev.QueueConfigChanged(queue="q1", at=t(3), weight=3, deserved={"nvidia.com/gpu": 4000}),
    ]
    for i in range(n_jobs):
        uid, name, start = f"job-{i}", f"train-{i}", t(10) + dt.timedelta(hours=i)
        base = {"job_uid": uid, "namespace": "ml", "name": name}
        out.append(
            ev.JobObserved(
                uid=uid,
                namespace="ml",
                name=name,
                queue="q1",
                submitter="alice",
                requested_gpu_milli=2000,
                replicas={"worker": 2},
                min_available=2,
                submitted_at=start,
                phase="Pending",
                phase_at=start,
            )
        )
        out.append(ev.JobPhaseChanged(**base, to_phase="Pending", at=start))
        out.append(
            ev.JobPhaseChanged(
                **base, from_phase="Pending", to_phase="Running", at=start + dt.timedelta(minutes=5)
            )
        )
        for k in range(2):
            pod = {"pod_uid": f"{uid}-pod-{k}", "namespace": "ml", "name": f"{name}-worker-{k}"}
            out.append(ev.PodAttempt(**pod, job_uid=uid, gpu_milli=1000, created_at=start))
            out.append(ev.PodAttempt(**pod, node=f"n{k}", bound_at=start + dt.timedelta(minutes=4)))
            out.append(ev.PodAttempt(**pod, started_at=start + dt.timedelta(minutes=5)))
            out.append(
                ev.PodAttempt(
                    **pod,
                    finished_at=start + dt.timedelta(hours=1),
                    exit_code=0,
                    outcome="Succeeded",
                )
            )
        out.append(
            ev.JobPhaseChanged(**base, to_phase="Completing", at=start + dt.timedelta(hours=1))
        )
        out.append(
            ev.JobPhaseChanged(**base, to_phase="Completed", at=start + dt.timedelta(hours=1))
        )
        out.append(
            ev.QueueUsageSample(
                queue="q1", at=start, allocated={"nvidia.com/gpu": 2000}, pending={"cpu": 0}
            )
        )
    out.append(
        ev.SchedulingEvent(
            action="reclaim",
            at=t(10, 1),
            victim_pod_uid="job-0-pod-0",
            victim_namespace="ml",
            victim_pod="train-0-worker-0",
            victim_job_uid="job-0",
            victim_queue="q1",
            beneficiary_queue="q2",
            gpu_milli=1000,
        )
    )
    return out


def _record_all(url: str, events: list[ev.LedgerEvent], tmp_path: Path, **kw: object) -> None:
    with Recorder(url, spill_path=tmp_path / "spill.jsonl", **kw) as rec:  # type: ignore[arg-type]
        rec.record(events)
        assert rec.flush(timeout=30)


def test_replayed_events_never_duplicate(ledger_url: str, engine: Engine, tmp_path: Path) -> None:
    stream = job_stream()
    _record_all(ledger_url, stream, tmp_path)
    once = snapshot(engine)
    assert len(once["jobs"]) == 5
    assert len(once["job_transitions"]) == 5 * 4
    assert len(once["pod_attempts"]) == 10
    assert len(once["scheduling_events"]) == 1
    # every observed configuration is a row (the third repeats the second: see next test)
    assert len(once["queue_configs"]) == 3
    # A restarted controller replays everything, twice, in a new recorder.
    _record_all(ledger_url, stream + stream, tmp_path, batch_size=7)
    assert snapshot(engine) == once


def test_order_of_events_does_not_matter(ledger_url: str, engine: Engine, tmp_path: Path) -> None:
    stream = job_stream(3)
    shuffled = list(stream)
    random.Random(8).shuffle(shuffled)
    _record_all(ledger_url, shuffled, tmp_path, batch_size=5)
    shuffled_result = snapshot(engine)
    _record_all(ledger_url, list(reversed(stream)), tmp_path, batch_size=3)
    assert snapshot(engine) == shuffled_result
    job0 = next(r for r in rows(engine, "jobs") if r["uid"] == "job-0")
    assert job0["phase"] == "Completed" and job0["final_phase"] == "Completed"
    assert job0["submitted_at"] == t(10, 0) and job0["first_started_at"] == t(10, 0, 5)
    assert job0["finished_at"] == t(10, 1)
    assert job0["replicas"] == {"worker": 2} and job0["submitter"] == "alice"
    pod = next(r for r in rows(engine, "pod_attempts") if r["pod_uid"] == "job-0-pod-0")
    assert pod["eviction_cause"] == "reclaim" and pod["node"] == "n0" and pod["exit_code"] == 0
    assert pod["started_at"] == t(10, 0, 5) and pod["outcome"] == "Succeeded"


def test_queue_configuration_in_force_does_not_depend_on_arrival_order(
    ledger_url: str, engine: Engine
) -> None:
    """Weight 1 on day 1, 4 on day 2, back to 1 on day 3 — in every order of arrival (a
    recorder replaying a spill file after an outage delivers older events after newer ones)."""
    import itertools

    from sqlalchemy import text

    from batch.ledger.writer import Writer

    changes = [
        ev.QueueConfigChanged(queue="q", at=t(1), weight=1),
        ev.QueueConfigChanged(queue="q", at=t(2), weight=4),
        ev.QueueConfigChanged(queue="q", at=t(3), weight=1),
    ]
    in_force = text(
        "SELECT weight FROM queue_configs WHERE queue = 'q' AND valid_from <= :at "
        "ORDER BY valid_from DESC LIMIT 1"
    )
    for order in itertools.permutations(changes):
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM queue_configs"))
        for change in order:  # one batch each, as separate flushes would write them
            with engine.begin() as conn:
                Writer().write(conn, [change])
        with engine.connect() as conn:
            weights = [conn.execute(in_force, {"at": t(d, 12)}).scalar() for d in (1, 2, 3, 4)]
        assert weights == [1, 4, 1, 1], [c.at for c in order]


def test_batches_are_written_in_the_background(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    samples = [
        ev.QueueUsageSample(
            queue=f"q{i % 7}", at=t(5) + dt.timedelta(minutes=i), allocated={"cpu": i}
        )
        for i in range(2500)
    ]
    with Recorder(ledger_url, spill_path=tmp_path / "s.jsonl", batch_size=400) as rec:
        for sample in samples:
            rec.record_one(sample)
        assert rec.flush(timeout=60)
        assert rec.pending == 0
        assert rec.stats.written == 2500
    assert count(engine, "queue_usage_samples") == 2500


def test_closed_port_then_database_catches_up_from_spill(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    spill = tmp_path / "spill.jsonl"
    stream = job_stream()
    down = Recorder(
        CLOSED_PORT_URL, spill_path=spill, retry_interval=0.05, max_buffer=20, batch_size=10
    )
    down.record(stream)
    assert not down.flush(timeout=10)
    assert not down.stats.available and down.stats.failures >= 1
    down.close()
    # Nothing lost: everything is on disk (the spill file, plus the part a failed replay
    # attempt had already set aside as ``.replaying``).
    files = [spill, spill.with_name(spill.name + ".replaying")]
    lines = [line for f in files if f.exists() for line in f.read_text().splitlines()]
    assert len(lines) == len(stream)
    assert {json.loads(line)["type"] for line in lines} >= {"JobObserved", "PodAttempt"}
    # The same spill path, now pointed at the database: catches up on its own.
    with Recorder(ledger_url, spill_path=spill, retry_interval=0.05) as up:
        deadline = time.monotonic() + 30
        while up.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert up.flush(timeout=30)
        assert up.stats.replayed == len(stream)
    assert not any(f.exists() for f in files)
    caught_up = snapshot(engine)
    assert len(caught_up["pod_attempts"]) == 10
    # A replay of the originals after catching up adds nothing.
    _record_all(ledger_url, stream, tmp_path)
    assert snapshot(engine) == caught_up


def test_schema_outage_is_buffered_and_resumes_automatically(
    empty_url: str, tmp_path: Path
) -> None:
    stream = job_stream(2)
    rec = Recorder(
        empty_url, spill_path=tmp_path / "spill.jsonl", retry_interval=0.05, max_retry_interval=0.2
    )
    try:
        rec.record(stream)
        assert not rec.flush(timeout=10)  # tables do not exist yet
        assert not rec.stats.available
        migrate.upgrade(empty_url)
        assert rec.flush(timeout=30)
        assert rec.stats.available
    finally:
        rec.close()
    eng = make_engine(empty_url)
    try:
        assert count(eng, "jobs") == 2
        assert count(eng, "pod_attempts") == 4
    finally:
        eng.dispose()


class _Proxy:
    """A TCP forwarder to PostgreSQL that can be cut and restored on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            with contextlib.suppress(OSError):  # shutdown wakes the blocked accept() on Linux
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy() -> Iterator[_Proxy]:
    p = _Proxy(("127.0.0.1", 5432))
    p.start()
    yield p
    p.stop()


@pytest.mark.postgres
def test_network_outage_buffers_spills_and_catches_up(
    proxy: _Proxy, pg_session_url: str, tmp_path: Path
) -> None:
    from sqlalchemy.engine import make_url

    from .conftest import _truncate

    _truncate(pg_session_url)
    via_proxy = make_url(pg_session_url).set(port=proxy.port).render_as_string(False)
    spill = tmp_path / "spill.jsonl"
    rec = Recorder(
        via_proxy,
        spill_path=spill,
        batch_size=20,
        max_buffer=40,
        retry_interval=0.05,
        max_retry_interval=0.2,
    )
    try:
        first = [
            ev.QueueUsageSample(queue="q", at=t(1) + dt.timedelta(seconds=i), allocated={"cpu": i})
            for i in range(100)
        ]
        rec.record(first)
        assert rec.flush(timeout=30)
        proxy.stop()
        second = [
            ev.QueueUsageSample(queue="q", at=t(2) + dt.timedelta(seconds=i), allocated={"cpu": i})
            for i in range(300)
        ]
        for chunk in range(0, 300, 30):
            rec.record(second[chunk : chunk + 30])
            time.sleep(0.02)
        assert not rec.flush(timeout=5)
        assert rec.stats.spilled > 0  # the bounded buffer overflowed to disk
        assert len(rec._buffer) <= rec.max_buffer
        proxy.start()
        deadline = time.monotonic() + 30
        while rec.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rec.flush(timeout=30)
        assert rec.stats.available
    finally:
        rec.close()
    eng = make_engine(pg_session_url)
    try:
        assert count(eng, "queue_usage_samples") == 400
    finally:
        eng.dispose()
    assert not spill.exists()


def test_invalid_events_are_set_aside_not_lost(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    bad = ev.PodAttempt(pod_uid="p-bad", namespace=None, name="x")  # type: ignore[arg-type]
    good = ev.PodAttempt(pod_uid="p-good", namespace="ns", name="y")
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record([good, bad])
        assert rec.flush()
        assert rec.stats.rejected == 1
    rejected = (tmp_path / "spill.rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 1 and json.loads(rejected[0])["event"]["pod_uid"] == "p-bad"
    pods = snapshot(engine)["pod_attempts"]
    assert [p[0] for p in pods] == ["p-good"]


def test_events_round_trip_through_json() -> None:
    for event in job_stream(1):
        assert ev.event_from_json(json.loads(json.dumps(ev.event_to_json(event)))) == event
    with pytest.raises(ValueError, match="unknown ledger event type"):
        ev.event_from_json({"type": "Nope"})


def test_usage_sampler_records_one_row_per_slot(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    calls: list[dt.datetime] = []

    def source(at: dt.datetime) -> list[ev.LedgerEvent]:
        calls.append(at)
        return [ev.QueueUsageSample(queue="q1", at=at, allocated={"nvidia.com/gpu": 1000})]

    with Recorder(ledger_url, spill_path=tmp_path / "s.jsonl", flush_interval=0.05) as rec:
        sampler = UsageSampler(rec, source, interval_seconds=60)
        now = dt.datetime(2026, 11, 5, 10, 0, 30, tzinfo=dt.UTC)
        sampler.sample_now(now)
        sampler.sample_now(now + dt.timedelta(seconds=20))  # same 60 s slot
        sampler.sample_now(now + dt.timedelta(seconds=40))  # next slot
        assert rec.flush()
        assert calls[0] == slot_time(now, 60) == dt.datetime(2026, 11, 5, 10, 0, tzinfo=dt.UTC)
        live = rec.start_usage_sampler(source, interval_seconds=0.2)
        deadline = time.monotonic() + 10
        while len(calls) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        live.shutdown()
        assert len(calls) >= 5
        assert rec.flush()
    rows = snapshot(engine)["queue_usage_samples"]
    assert len(rows) >= 3  # two fixed slots + at least one live second
    assert len({r[0] for r in rows}) == len(rows)


def test_bulk_path_matches_row_path(ledger_url: str, engine: Engine) -> None:
    """On PostgreSQL large batches go through COPY + INSERT ... SELECT; same rows either way."""
    from batch.ledger.writer import Writer

    stream = job_stream(40)
    results = []
    for threshold in (10**9, 1):
        with engine.begin() as conn:
            for table in reversed(TABLES):
                conn.execute(table.delete())
        writer = Writer(copy_threshold=threshold)
        for part in (stream[::2], stream[1::2], stream):  # split, then replayed whole
            with engine.begin() as conn:
                writer.write(conn, part)
        results.append(snapshot(engine))
    assert results[0] == results[1]
    assert len(results[0]["jobs"]) == 40 and len(results[0]["pod_attempts"]) == 80


def test_recorders_sharing_a_spill_path_never_share_a_file(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    base = tmp_path / "spill.jsonl"
    holder = Recorder(ledger_url, spill_path=base)
    try:
        assert holder.spill_path == base
        downs = [Recorder(CLOSED_PORT_URL, spill_path=base, background=False) for _ in range(2)]
        assert [d.spill_path.name for d in downs] == ["spill.1.jsonl", "spill.2.jsonl"]
        for i, down in enumerate(downs):
            down.record(
                [
                    ev.QueueUsageSample(
                        queue=f"down{i}", at=t(3) + dt.timedelta(seconds=k), allocated={"cpu": k}
                    )
                    for k in range(5)
                ]
            )
            assert not down.flush()
        for down in downs:
            down.close()  # both spilled; their claims are released
        # A new recorder claims spill.1 (its own) and adopts spill.2 (an orphan).
        with Recorder(ledger_url, spill_path=base) as late:
            assert late.spill_path.name == "spill.1.jsonl"
            deadline = time.monotonic() + 30
            while count(engine, "queue_usage_samples") < 10 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert late.flush()
        assert count(engine, "queue_usage_samples") == 10
        assert not (tmp_path / "spill.1.jsonl").exists()
        assert not (tmp_path / "spill.2.jsonl").exists()
    finally:
        holder.close()


def test_a_rolled_back_bulk_batch_does_not_break_the_next(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """On PostgreSQL a bulk batch stages rows in a temporary table; when its transaction is
    rolled back (here: one row breaks a NOT NULL rule) the next bulk batch on the same pooled
    connection must still be written, not taken for an outage."""
    pooled = make_engine(ledger_url, pool_size=1, max_overflow=0)
    try:
        with Recorder(pooled, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
            bad: list[ev.LedgerEvent] = [
                ev.JobObserved(uid=f"a{i}", namespace="ns", name=f"a{i}") for i in range(1, 100)
            ]
            bad.append(ev.PodAttempt(pod_uid="p-bad", namespace=None, name="x"))  # type: ignore[arg-type]
            rec.record(bad)
            assert rec.flush()
            assert rec.stats.rejected == 1
            rec.record(
                ev.JobObserved(uid=f"b{i}", namespace="ns", name=f"b{i}") for i in range(100)
            )
            assert rec.flush(), rec.stats
            assert rec.stats.available and rec.stats.failures == 0
    finally:
        pooled.dispose()
    assert count(engine, "jobs") == 199 and count(engine, "pod_attempts") == 0


def test_close_spills_the_batch_a_stuck_writer_holds(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A database so slow that close() stops waiting for the writer thread: the batch the thread
    is writing must reach the spill file (with the rest), or it dies with the process."""
    spill = tmp_path / "spill.jsonl"
    rec = Recorder(ledger_url, spill_path=spill, batch_size=10, flush_interval=0.01)
    entered, release = threading.Event(), threading.Event()
    write = rec._write

    def stuck(batch: list[ev.LedgerEvent]) -> None:
        entered.set()
        release.wait(10)
        write(batch)

    rec._write = stuck  # type: ignore[method-assign]
    rec.record(ev.JobObserved(uid=f"j{i}", namespace="ns", name=f"j{i}") for i in range(15))
    assert entered.wait(5)
    rec.close(timeout=0.2)
    release.set()
    spilled = [json.loads(line)["uid"] for line in spill.read_text().splitlines()]
    assert sorted(spilled) == sorted(f"j{i}" for i in range(15))
    # the next recorder with the same spill path writes all of them, once
    with Recorder(ledger_url, spill_path=spill, background=False) as again:
        assert again.flush()
    assert count(engine, "jobs") == 15


def test_an_event_the_database_cannot_hold_is_rejected_and_recording_continues(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Issue 20.2: `memory: 16Ei` reached the SQLite recorder, which retried the event for ever
    (`OverflowError: Python int too large to convert to SQLite INTEGER`) and replayed it from the
    spill file after every restart, so nothing more was recorded."""
    huge = ev.JobObserved(uid="j-huge", namespace="ns", name="huge", requested_memory_bytes=2**64)
    after = ev.JobObserved(uid="j-after", namespace="ns", name="after", requested_memory_bytes=1)
    spill = tmp_path / "spill.jsonl"
    with Recorder(ledger_url, spill_path=spill, background=False) as rec:
        rec.record([huge, after])
        assert rec.flush(timeout=10)
        assert rec.stats.rejected == 1
    spill.write_text(json.dumps(ev.event_to_json(huge)) + "\n")  # as left by an earlier run
    with Recorder(ledger_url, spill_path=spill, background=False) as rec:
        rec.record_one(ev.JobObserved(uid="j-later", namespace="ns", name="later"))
        assert rec.flush(timeout=10)
        assert rec.stats.rejected == 1
    rejected = (tmp_path / "spill.rejected.jsonl").read_text().splitlines()
    assert [json.loads(r)["event"]["uid"] for r in rejected] == ["j-huge", "j-huge"]
    assert sorted(j[0] for j in snapshot(engine)["jobs"]) == ["j-after", "j-later"]


def test_lock_files_do_not_pile_up(ledger_url: str, tmp_path: Path) -> None:
    """Issue 19.7: one `.lock` per database URL ever used stayed in the state directory (725
    after a day). A recorder that leaves nothing to replay removes its lock; the next one sweeps
    locks nobody holds and whose spill files are empty."""
    from batch.ledger.recorder import sweep_stale_locks

    spill = tmp_path / "ledger-spill-aaaa.jsonl"
    with Recorder(ledger_url, spill_path=spill, background=False) as rec:
        rec.record_one(ev.JobObserved(uid="j", namespace="ns", name="j"))
        assert rec.flush()
        assert (tmp_path / "ledger-spill-aaaa.jsonl.lock").exists()
    assert _spill_files(tmp_path) == []
    for name in ("ledger-spill-dead1.jsonl", "ledger-spill-dead2.1.jsonl"):
        (tmp_path / f"{name}.lock").write_text("")
    (tmp_path / "ledger-spill-data.jsonl").write_text('{"type": "x"}\n')
    (tmp_path / "ledger-spill-data.jsonl.lock").write_text("")
    held = Recorder(ledger_url, spill_path=tmp_path / "ledger-spill-held.jsonl", background=False)
    try:
        assert sweep_stale_locks(tmp_path) == 2
        assert _spill_files(tmp_path) == [
            "ledger-spill-data.jsonl",
            "ledger-spill-data.jsonl.lock",  # a dead recorder's events: kept for adoption
            "ledger-spill-held.jsonl.lock",  # a live recorder's
        ]
    finally:
        held.close()


def _spill_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("ledger-spill"))
