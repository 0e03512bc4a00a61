"""Simulator speed: replay the Philly trace through the real scheduler session.

Target (issue 10): the whole trace (82,247 jobs, 352 nodes) in <= 60 s wall and <= 2 GiB RSS.
Prints jobs, simulated events, sessions, wall and CPU time, events/s, session share of the time,
peak RSS, the time per session in each stage (open with its plugins, each action, close) and,
with --profile, where the time goes (cProfile, grouped by area and top functions).

    .venv/bin/python benchmarks/sim.py                      # whole trace, tephra policy
    .venv/bin/python benchmarks/sim.py --limit 5000 --profile
    .venv/bin/python benchmarks/sim.py --policy kube-default --lifecycle volcano --limit 2000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import sys
import time
from collections import defaultdict
from dataclasses import replace

from batch.sim.backend import SchedulerBackend
from batch.sim.objects import EPOCH
from batch.sim.policies import policies_for
from batch.sim.real import RealScheduler
from batch.sim.runner import run_policy
from batch.sim.traces import load_trace

AREAS = [
    ("batch/scheduler/actions", "scheduler actions"),
    ("batch/scheduler/actionlib", "scheduler actions"),
    ("batch/scheduler/plugins", "scheduler plugins (open/close callbacks)"),
    ("batch/scheduler/pluginlib", "scheduler plugins (open/close callbacks)"),
    ("batch/scheduler/framework", "scheduler framework (session open/close)"),
    ("batch/model", "cluster cache (watch events)"),
    ("batch/api", "quantity parsing"),
    ("batch/controllers", "job reconciler"),
    ("batch/sim", "simulator engine and metrics"),
]


def _area_table(stats: pstats.Stats) -> str:
    """Self time per area (tottime summed by the file's package)."""
    by_area: dict[str, float] = defaultdict(float)
    total = 0.0
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, _line, _fn), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        total += tottime
        for prefix, label in AREAS:
            if prefix in filename:
                by_area[label] += tottime
                break
        else:
            by_area["numpy / stdlib / other"] += tottime
    lines = [f"{'area':45} {'self s':>8} {'share':>6}"]
    for label, t in sorted(by_area.items(), key=lambda kv: -kv[1]):
        lines.append(f"{label:45} {t:8.2f} {t / total * 100:5.1f}%")
    return "\n".join(lines)


def _stage_table(timings: dict[str, float], sessions: int) -> str:
    """Time per session in each stage (session open, every action, close)."""
    lines = [f"{'stage':12} {'total s':>8} {'us/session':>11}"]
    for name, t in sorted(timings.items(), key=lambda kv: -kv[1]):
        lines.append(f"{name:12} {t:8.2f} {t / max(sessions, 1) * 1e6:11.0f}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--policy", default="tephra", choices=["tephra", "kube-default", "fifo"])
    ap.add_argument("--lifecycle", default="fast", choices=["fast", "volcano"])
    ap.add_argument("--capacity-scale", type=float, default=1.0)
    ap.add_argument("--time-compress", type=float, default=1.0)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    workload = load_trace(args.trace, limit=args.limit).transformed(
        capacity_scale=args.capacity_scale, time_compress=args.time_compress
    )
    read_s = time.perf_counter() - t0
    compare = [] if args.policy == "tephra" else [args.policy]
    policy = {
        p.name: p
        for p in policies_for(
            conf=None, compare=compare, period=args.period, lifecycle=args.lifecycle
        )
    }[args.policy]
    done = [0]
    last = [time.perf_counter()]

    def progress(finished: int, total: int, now: float) -> None:
        done[0] = finished
        t = time.perf_counter()
        if t - last[0] >= 30:
            last[0] = t
            print(
                f"  ... {finished}/{total} jobs finished, virtual t={now / 86400:.1f} d, "
                f"{t - t0:.0f} s wall",
                file=sys.stderr,
                flush=True,
            )

    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    cpu0 = time.process_time()
    backends: list[RealScheduler] = []

    def backend(conf: str) -> SchedulerBackend:
        backends.append(RealScheduler(conf, epoch=EPOCH))
        return backends[-1]

    run = run_policy(workload, replace(policy), backend_factory=backend, progress=progress)
    cpu_s = time.process_time() - cpu0
    if profiler is not None:
        profiler.disable()
    s = run.summary
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
    print(f"trace {workload.name}: {len(workload.jobs)} jobs, {workload.cluster.node_count} nodes")
    print(
        f"policy {args.policy}, lifecycle {args.lifecycle}, period {args.period:g} s, "
        f"capacity scale {workload.capacity_scale:g}, time compression {workload.time_compress:g}"
    )
    print(f"trace read:          {read_s:8.2f} s")
    print(f"replay wall:         {s['wall_s']:8.2f} s   (target <= 60 s for the whole trace)")
    print(f"replay CPU:          {cpu_s:8.2f} s   (compare this on a loaded machine)")
    print(
        f"  in sessions:       {s['session_wall_s']:8.2f} s   ({s['sessions']} sessions, "
        f"{s['session_wall_s'] / max(s['sessions'], 1) * 1000:.2f} ms each)"
    )
    print(f"simulated events:    {s['events']:8d}     ({s['events_per_s']:.0f} events/s)")
    print(f"peak RSS:            {rss_gib:8.2f} GiB (target <= 2 GiB)")
    print(f"jobs completed:      {s['completed']:8d} / {s['jobs']}   unfinished {s['unfinished']}")
    print(
        f"JCT mean {s['jct_mean_s']}, wait mean {s['queue_delay_mean_s']}, "
        f"utilization {s['utilization']:.3f}"
    )
    print()
    print(_stage_table(backends[0].timings, s["sessions"]))
    if profiler is not None:
        stats = pstats.Stats(profiler)
        print()
        print(_area_table(stats))
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(15)
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
