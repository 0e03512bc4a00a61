"""Ledger benchmark: recorder throughput into PostgreSQL, and report latency at scale.

1. Recorder: a realistic mix of events (job observed, phase changes, pod attempts bound/started/
   finished, scheduling events, usage samples) through ``Recorder.record`` until ``flush``
   returns — events/s end to end, idempotent upserts included. Target: >= 5,000 events/s.
2. Reports: a synthetic ledger (default 1,000,000 jobs, 10 transitions each = 10,000,000
   transitions, one pod attempt per job, preemptions, 5-minute usage samples for 20 queues) is
   bulk-loaded with COPY, then every report is timed over a 1-day, a 7-day and the full 30-day
   window. Target: <= 1 s per report.

Usage (quick run first):
    .venv/bin/python benchmarks/ledger.py --jobs 20000 --events 20000
    .venv/bin/python benchmarks/ledger.py            # full size
It creates a fresh database ``tephra_bench_<pid>`` on ``--pg-url`` and drops it unless --keep.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from batch.ledger import events as ev, jobrollups, migrate
from batch.ledger.db import make_engine
from batch.ledger.recorder import Recorder
from batch.ledger.reports import (
    Filters,
    fairness,
    outcomes,
    outcomes_raw,
    preemptions,
    usage,
    wait_times,
    wait_times_raw,
)
from batch.ledger.rollups import backfill

DAYS = 30
# The synthetic month ends now, as on a live cluster: jobs still running are recent ones.
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
START = NOW - dt.timedelta(days=DAYS)
NULL = "\\N"
QUEUES = [f"q{i:02d}" for i in range(20)]
PHASES = [
    ("job", "Pending"),
    ("podgroup", "Pending"),
    ("podgroup", "Inqueue"),
    ("podgroup", "Running"),
    ("job", "Running"),
    ("job", "Restarting"),
    ("job", "Pending"),
    ("job", "Running"),
    ("job", "Completing"),
    ("job", "Completed"),
]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- recorder


def event_mix(n_events: int) -> list[ev.LedgerEvent]:
    out: list[ev.LedgerEvent] = []
    i = 0
    while len(out) < n_events:
        uid, at = f"bench-job-{i}", START + dt.timedelta(seconds=i)
        base = {"job_uid": uid, "namespace": f"ns{i % 50}", "name": f"job-{i}"}
        pod = {"pod_uid": f"{uid}-p0", "namespace": base["namespace"], "name": f"job-{i}-w-0"}
        out += [
            ev.JobObserved(
                uid=uid,
                namespace=base["namespace"],
                name=base["name"],
                queue=QUEUES[i % 20],
                submitter=f"user{i % 500}",
                requested_gpu_milli=1000 * (i % 8),
                replicas={"worker": 1},
                min_available=1,
                submitted_at=at,
            ),
            ev.JobPhaseChanged(**base, to_phase="Pending", at=at),
            ev.PodAttempt(**pod, job_uid=uid, node=f"n{i % 100}", bound_at=at, gpu_milli=1000),
            ev.JobPhaseChanged(**base, to_phase="Running", at=at + dt.timedelta(seconds=30)),
            ev.PodAttempt(**pod, started_at=at + dt.timedelta(seconds=30)),
            ev.PodAttempt(**pod, finished_at=at + dt.timedelta(hours=1), exit_code=0),
            ev.JobPhaseChanged(**base, to_phase="Completed", at=at + dt.timedelta(hours=1)),
        ]
        if i % 10 == 0:
            out.append(
                ev.QueueUsageSample(
                    queue=QUEUES[i % 20], at=at, allocated={"nvidia.com/gpu": 1000, "cpu": 500}
                )
            )
        i += 1
    return out[:n_events]


def bench_recorder(url: str, n_events: int, batch_size: int) -> float:
    events = event_mix(n_events)
    progress(f"recorder: {len(events):,} events, batch size {batch_size}")
    spill = Path(tempfile.mkdtemp(prefix="tephra-bench-")) / "spill.jsonl"
    with Recorder(url, batch_size=batch_size, spill_path=spill) as rec:
        t0 = time.perf_counter()
        chunk = 1000
        for start in range(0, len(events), chunk):
            rec.record(events[start : start + chunk])
        if not rec.flush(timeout=600):
            raise SystemExit("recorder did not flush")
        elapsed = time.perf_counter() - t0
    shutil.rmtree(spill.parent, ignore_errors=True)
    rate = len(events) / elapsed
    print(f"recorder throughput: {len(events):,} events in {elapsed:.2f} s = {rate:,.0f} events/s")
    return rate


# ---------------------------------------------------------------------------- bulk loading


def _ts(epoch: np.ndarray) -> np.ndarray:
    return np.datetime_as_string(epoch.astype("datetime64[s]"), unit="s")


def _copy(conn: psycopg.Connection[Any], table: str, columns: str, lines: Iterator[str]) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        buf = io.StringIO()
        size = 0
        for line in lines:
            buf.write(line)
            size += 1
            if size >= 50_000:
                copy.write(buf.getvalue())
                buf = io.StringIO()
                size = 0
        if size:
            copy.write(buf.getvalue())


def load_synthetic(pg_url: str, n_jobs: int, per_job: int) -> None:
    rng = np.random.default_rng(8)
    t0 = int(START.timestamp())
    span = DAYS * 86400
    submitted = t0 + np.sort(rng.integers(0, span, n_jobs))
    wait = rng.exponential(300, n_jobs).astype(np.int64) + 1
    run = (rng.lognormal(7.5, 1.0, n_jobs)).astype(np.int64) + 60
    started = submitted + wait
    finished = started + run
    outcome_idx = rng.choice(5, n_jobs, p=[0.80, 0.12, 0.03, 0.02, 0.03])
    outcomes_ = np.array(["Completed", "Failed", "Aborted", "Terminated", "Deleted"])
    now = int(NOW.timestamp())
    unfinished = finished > now
    never_started = started > now
    gpus = rng.choice([0, 1, 2, 4, 8], n_jobs, p=[0.2, 0.4, 0.2, 0.15, 0.05]) * 1000
    # Teams: a namespace belongs to one queue (mostly) and has its own ten submitters.
    ns = rng.integers(0, 50, n_jobs)
    queue = np.where(rng.random(n_jobs) < 0.9, ns % len(QUEUES), rng.integers(0, 20, n_jobs))
    user = ns * 10 + rng.integers(0, 10, n_jobs)
    s_sub, s_start, s_fin = _ts(submitted), _ts(started), _ts(finished)

    raw = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(raw, autocommit=True) as conn:
        # Standard bulk-load practice: drop secondary indexes, COPY, rebuild them.
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname='public' "
            "AND tablename IN ('jobs','job_transitions','pod_attempts') AND indexname LIKE 'ix_%'"
        ).fetchall()
        uniques = conn.execute(
            "SELECT conname, conrelid::regclass::text, pg_get_constraintdef(oid) "
            "FROM pg_constraint "
            "WHERE contype='u' AND conrelid::regclass::text = 'job_transitions'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        for name, table, _ in uniques:
            conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')

        tick = time.perf_counter()
        progress(f"COPY jobs: {n_jobs:,} rows")

        def job_lines() -> Iterator[str]:
            for i in range(n_jobs):
                done = not unfinished[i]
                started_s = NULL if never_started[i] else f"{s_start[i]}+00"
                phase = outcomes_[outcome_idx[i]] if done else "Running"
                phase = "Pending" if never_started[i] else phase
                fin = f"{s_fin[i]}+00" if done else NULL
                final = phase if done else NULL
                yield (
                    f"j{i}\tns{ns[i]}\tjob-{i}\tVCJob\t{QUEUES[queue[i]]}\tuser{user[i]}\t"
                    f"{gpus[i]}\t{s_sub[i]}+00\t{started_s}\t{fin}\t{phase}\t{fin}\t{final}\t"
                    f"{int(outcome_idx[i] == 1)}\t{s_sub[i]}+00\n"
                )

        _copy(
            conn,
            "jobs",
            "uid, namespace, name, kind, queue, submitter, requested_gpu_milli, submitted_at, "
            "first_started_at, finished_at, phase, phase_at, final_phase, retries, updated_at",
            job_lines(),
        )
        progress(f"  {time.perf_counter() - tick:.1f} s")

        tick = time.perf_counter()
        n_tr = n_jobs * per_job
        progress(f"COPY job_transitions: {n_tr:,} rows")
        steps = min(per_job, len(PHASES))
        # Transition times: spread between submission and finish.
        frac = np.linspace(0.0, 1.0, steps)

        def transition_lines() -> Iterator[str]:
            chunk = 100_000
            for lo in range(0, n_jobs, chunk):
                hi = min(n_jobs, lo + chunk)
                progress(f"  {lo * steps:,} / {n_tr:,}")
                span_ = (finished[lo:hi] - submitted[lo:hi])[:, None]
                epochs = submitted[lo:hi, None] + (frac[None, :] * span_).astype(np.int64)
                stamps = _ts(epochs + np.arange(steps)[None, :])
                for i in range(hi - lo):
                    row = stamps[i]
                    for k in range(steps):
                        src, phase = PHASES[k]
                        yield f"j{lo + i}\t{src}\t{phase}\t{row[k]}+00\n"

        _copy(conn, "job_transitions", "job_uid, source, to_phase, at", transition_lines())
        progress(f"  {time.perf_counter() - tick:.1f} s")

        tick = time.perf_counter()
        progress(f"COPY pod_attempts: {n_jobs:,} rows")

        def pod_lines() -> Iterator[str]:
            for i in range(n_jobs):
                if never_started[i]:
                    continue
                done = not unfinished[i]
                fin = f"{s_fin[i]}+00" if done else NULL
                yield (
                    f"p{i}\tns{ns[i]}\tjob-{i}-w-0\tj{i}\tn{i % 1000}\t{gpus[i]}\t"
                    f"{1000 * (1 + i % 16)}\t"
                    f"{s_start[i]}+00\t{s_start[i]}+00\t{fin}\t{'0' if done else NULL}\n"
                )

        _copy(
            conn,
            "pod_attempts",
            "pod_uid, namespace, name, job_uid, node, gpu_milli, cpu_milli, bound_at, started_at, "
            "finished_at, exit_code",
            pod_lines(),
        )
        progress(f"  {time.perf_counter() - tick:.1f} s")

        n_ev = max(1, n_jobs // 50)
        progress(f"COPY scheduling_events: {n_ev:,} rows")
        victims = rng.integers(0, n_jobs, n_ev)
        winners = rng.integers(0, n_jobs, n_ev)

        def sched_lines() -> Iterator[str]:
            for k in range(n_ev):
                v, w = victims[k], winners[k]
                action = "reclaim" if queue[v] != queue[w] else "preempt"
                yield (
                    f"{s_start[v]}+00\t{action}\tp{v}-{k}\tns{ns[v]}\tjob-{v}-w-0\tj{v}\t"
                    f"{QUEUES[queue[v]]}\tj{w}\t{QUEUES[queue[w]]}\t{gpus[v]}\n"
                )

        _copy(
            conn,
            "scheduling_events",
            "at, action, victim_pod_uid, victim_namespace, victim_pod, victim_job_uid, "
            "victim_queue, beneficiary_job_uid, beneficiary_queue, gpu_milli",
            sched_lines(),
        )
        slots = np.arange(t0, t0 + span, 300)
        progress(f"COPY queue_usage_samples: {len(slots) * len(QUEUES) * 2:,} rows")
        s_slots = _ts(slots)

        def sample_lines() -> Iterator[str]:
            for j, stamp in enumerate(s_slots):
                for qi, q in enumerate(QUEUES):
                    alloc = int(rng.integers(0, 16)) * 1000
                    yield f"{stamp}+00\t{q}\tnvidia.com/gpu\t{alloc}\t8000\t{(j + qi) % 3 * 1000}\n"
                    yield f"{stamp}+00\t{q}\tcpu\t{alloc * 8}\t64000\t0\n"

        _copy(
            conn,
            "queue_usage_samples",
            "at, queue, resource, allocated, deserved, pending",
            sample_lines(),
        )
        for qi, q in enumerate(QUEUES):
            conn.execute(
                "INSERT INTO queue_configs (queue, valid_from, config_hash, weight) "
                "VALUES (%s, %s, %s, %s)",
                (q, START - dt.timedelta(days=1), f"h{qi}", 1 + qi % 4),
            )

        tick = time.perf_counter()
        progress("rebuilding indexes and constraints")
        for name, table, definition in uniques:
            conn.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        for _, indexdef in indexes:
            conn.execute(indexdef)
        progress(f"  {time.perf_counter() - tick:.1f} s; VACUUM ANALYZE")
        conn.execute("VACUUM ANALYZE")


def build_rollups(url: str) -> None:
    """COPY bypassed the writer: rebuild the rollups as migrations 0010 and 0011 do."""
    tick = time.perf_counter()
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            rows = backfill(conn, progress=lambda n: progress(f"  rollup: {n:,} pods"))
        progress(f"usage rollup: {rows:,} rows in {time.perf_counter() - tick:.1f} s")
        tick = time.perf_counter()
        with engine.begin() as conn:
            rows = jobrollups.backfill(
                conn, progress=lambda what, n: progress(f"  {what} rollup: {n:,} jobs")
            )
        progress(f"wait and outcome rollups: {rows:,} rows in {time.perf_counter() - tick:.1f} s")
    finally:
        engine.dispose()


# -------------------------------------------------------------------------------- reports


def bench_reports(
    url: str, repeats: int, *, raw: bool = False
) -> list[tuple[str, str, float, float, int]]:
    engine = make_engine(url)
    end = START + dt.timedelta(days=DAYS)
    windows = {
        "1d": Filters(since=end - dt.timedelta(days=1), until=end),
        "7d": Filters(since=end - dt.timedelta(days=7), until=end),
        "30d": Filters(since=START, until=end),
    }
    reports: dict[str, Callable[..., Any]] = {
        "wait-times": wait_times,
        "usage": usage,
        "preemptions": preemptions,
        "outcomes": outcomes,
        "fairness": fairness,
    }
    if raw:  # the reports from before the wait and outcome rollups, on the same database
        reports = {"wait-times": wait_times, "wait-raw": wait_times_raw}
        reports |= {"outcomes": outcomes, "outcomes-raw": outcomes_raw}
    results = []
    try:
        with engine.connect() as conn:
            for wname, filters in windows.items():
                for rname, fn in reports.items():
                    times = []
                    n_rows = 0
                    for _ in range(repeats):
                        tick = time.perf_counter()
                        n_rows = len(fn(conn, filters).rows)
                        times.append(time.perf_counter() - tick)
                    results.append((rname, wname, times[0], min(times), n_rows))
                    progress(
                        f"  {rname:<12} {wname:>4}: first {times[0]:.3f} s, "
                        f"best {min(times):.3f} s, median {statistics.median(times):.3f} s, "
                        f"{n_rows} rows"
                    )
    finally:
        engine.dispose()
    return results


def print_results(results: list[tuple[str, str, float, float, int]], args: Any) -> None:
    n_tr = args.jobs * args.transitions_per_job
    load = os.getloadavg()
    print(f"reports over {args.jobs:,} jobs, {n_tr:,} transitions (load avg {load[0]:.1f}):")
    print(f"{'report':<12} {'window':>6} {'first_s':>8} {'best_s':>8} {'rows':>6}")
    for rname, wname, first, best, n_rows in results:
        print(f"{rname:<12} {wname:>6} {first:8.3f} {best:8.3f} {n_rows:6d}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--transitions-per-job", type=int, default=10)
    ap.add_argument("--events", type=int, default=100_000, help="events for the recorder test")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-recorder", action="store_true")
    ap.add_argument("--skip-reports", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database")
    ap.add_argument(
        "--reuse", metavar="DB", help="time the reports on an already loaded database (from --keep)"
    )
    ap.add_argument(
        "--raw",
        action="store_true",
        help="time wait-times and outcomes from the rollups and from the raw views (no rollup)",
    )
    args = ap.parse_args()

    if args.reuse:
        url = make_url(args.pg_url).set(database=args.reuse).render_as_string(hide_password=False)
        migrate.upgrade(url)
        results = bench_reports(url, args.repeats, raw=args.raw)
        print_results(results, args)
        return

    name = f"tephra_bench_{os.getpid()}"
    admin = create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(args.pg_url).set(database=name).render_as_string(hide_password=False)
    progress(f"database {name}")
    try:
        migrate.upgrade(url)
        if not args.skip_recorder:
            bench_recorder(url, args.events, args.batch_size)
            with make_engine(url).begin() as conn:
                for table in (
                    "jobs",
                    "job_transitions",
                    "pod_attempts",
                    "queue_usage_samples",
                    "usage_days",
                    "wait_days",
                    "outcome_days",
                ):
                    conn.execute(text(f"TRUNCATE {table}"))
        if not args.skip_reports:
            tick = time.perf_counter()
            load_synthetic(url, args.jobs, args.transitions_per_job)
            progress(f"loaded in {time.perf_counter() - tick:.1f} s")
            build_rollups(url)
            results = bench_reports(url, args.repeats, raw=args.raw)
            print_results(results, args)
    finally:
        if not args.keep:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
