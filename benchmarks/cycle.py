"""Benchmark one scheduling cycle over a synthetic GPU cluster (not a timed test).

Grid: nodes x pending pods x gang size. Each node has 8 GPUs, 96 cpu, 1 TiB; the cluster starts
about 50% busy (running 1-GPU pods of another scheduler's jobs and of ours), pending pods ask
for 1 GPU + 8 cpu + 64 GiB in gangs of the given size, spread over 4 weighted queues. For each
cell the benchmark reports the cache build time (not part of the cycle), the cycle split into
open / actions / close, pods placed and pods placed per second, the p50/p99 over repeated cycles
(a session leaves the cache unchanged, so every repeat schedules the same input), a no-change
cycle through ``Scheduler.run_once`` (memo) and a steady-state full recompute after the binds
were applied (everything left pending no longer fits), and peak RSS.

    .venv/bin/python benchmarks/cycle.py                     # full grid (slow: ~minutes)
    .venv/bin/python benchmarks/cycle.py --nodes 10000 --pods 100000 --gang 8 --repeat 5
    .venv/bin/python benchmarks/cycle.py --nodes 1000 --pods 10000 --gang 1 --gang 64
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time
from typing import Any

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import (
    BUILTIN_DEFAULT_CONFIG,
    HELM_DEFAULT_CONFIG,
    TEPHRA_DEFAULT_CONFIG,
    Scheduler,
    apply_decisions,
    load_config,
    run_session,
)

QUEUES = (("research", 4), ("prod", 3), ("dev", 2), ("batch", 1))


def build(nodes: int, pods: int, gang: int, *, busy: float, seed: int) -> ClusterCache:
    rng = random.Random(seed)
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("default"))
    for q, w in QUEUES:
        c.apply("Queue", "ADDED", f.queue(q, weight=w))
    for i in range(nodes):
        zone = f"zone-{i % 8}"
        c.apply(
            "Node",
            "ADDED",
            f.node(
                f"node-{i:05d}",
                cpu="96",
                memory="1Ti",
                gpu=8,
                pods=110,
                labels={"kubernetes.io/hostname": f"node-{i:05d}", "zone": zone},
            ),
        )
    # running load: `busy` of the GPUs, in 8-pod running jobs of ours and bare pods of others
    running = int(nodes * 8 * busy)
    per_job = 8
    k = 0
    job = 0
    while k < running:
        name = f"run-{job}"
        q = QUEUES[job % len(QUEUES)][0]
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(name, namespace="bench", min_member=per_job, queue=q, phase="Running"),
        )
        for t in range(per_job):
            if k >= running:
                break
            node = f"node-{(k // 4) % nodes:05d}" if busy <= 0.5 else f"node-{k % nodes:05d}"
            c.apply(
                "Pod",
                "ADDED",
                f.pod(
                    f"{name}-{t}",
                    namespace="bench",
                    group=name,
                    gpu=1,
                    cpu="8",
                    memory="64Gi",
                    node_name=node,
                    phase="Running",
                ),
            )
            k += 1
        job += 1
    jobs = pods // gang
    for j in range(jobs):
        name = f"pend-{j}"
        q = QUEUES[rng.randrange(len(QUEUES))][0]
        created = f"2026-01-01T{(j // 3600) % 24:02d}:{(j // 60) % 60:02d}:{j % 60:02d}Z"
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(
                name, namespace="bench", min_member=gang, queue=q, phase="Inqueue", created=created
            ),
        )
        for t in range(gang):
            c.apply(
                "Pod",
                "ADDED",
                f.pod(
                    f"{name}-{t}",
                    namespace="bench",
                    group=name,
                    gpu=1,
                    cpu="8",
                    memory="64Gi",
                    created=created,
                ),
            )
    return c


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def bench(
    nodes: int, pods: int, gang: int, *, repeat: int, busy: float, seed: int, conf_text: str
) -> dict[str, Any]:
    t0 = time.perf_counter()
    cache = build(nodes, pods, gang, busy=busy, seed=seed)
    build_s = time.perf_counter() - t0
    cfg = load_config(conf_text)
    totals: list[float] = []
    cpus: list[float] = []
    last = None
    for r in range(repeat):
        gc.collect()
        t = time.perf_counter()
        c0 = time.process_time()
        d = run_session(cache, cfg, now=1.8e9 + r)
        totals.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c0)
        last = d
        print(
            f"    cycle {r + 1}/{repeat}: {totals[-1]:.3f}s ({len(d.binds)} binds)",
            file=sys.stderr,
            flush=True,
        )
    assert last is not None
    tm = last.timings
    actions = sum(v for k, v in tm.items() if k not in ("open", "close"))
    t = time.perf_counter()
    gc.collect()  # the full collection a host process pays after a big cycle (unless frozen)
    gc_s = time.perf_counter() - t
    sched = Scheduler(cache, cfg)
    sched.run_once(1.8e9)
    gc.collect()
    t = time.perf_counter()
    sched.run_once(1.8e9 + 1)
    # a configuration whose decisions change with time alone while pods wait (a lost-work
    # bound) recomputes: no memo figure then
    memo_s = time.perf_counter() - t if sched.memo_hits == 1 else float("nan")
    apply_decisions(cache, last)
    gc.collect()
    t = time.perf_counter()
    c0 = time.process_time()
    steady = run_session(cache, cfg, now=1.8e9 + 10)
    steady_s = time.perf_counter() - t
    steady_cpu = time.process_time() - c0
    p50 = statistics.median(totals)
    return {
        "nodes": nodes,
        "pods": pods,
        "gang": gang,
        "jobs": pods // gang,
        "build_s": build_s,
        "open_s": tm["open"],
        "actions_s": actions,
        "close_s": tm["close"],
        "p50_s": p50,
        "p99_s": pct(totals, 0.99),
        "cpu_p50_s": statistics.median(cpus),
        "steady_cpu_s": steady_cpu,
        "placed": len(last.binds),
        "pods_per_s": len(last.binds) / p50 if p50 else 0.0,
        "pods_per_cpu_s": len(last.binds) / statistics.median(cpus) if cpus else 0.0,
        "memo_s": memo_s,
        "steady_s": steady_s,
        "gc_s": gc_s,
        "steady_binds": len(steady.binds),
        "rss_mib": rss_mib(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, action="append", help="node counts (default 1k,5k,10k)")
    ap.add_argument("--pods", type=int, action="append", help="pending pods (default 10k,50k,100k)")
    ap.add_argument("--gang", type=int, action="append", help="gang sizes (default 1,8,64)")
    ap.add_argument("--repeat", type=int, default=3, help="cycles per cell (p50/p99 over them)")
    ap.add_argument("--busy", type=float, default=0.5, help="fraction of GPUs already running")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--preset",
        choices=("helm", "builtin", "tephra"),
        default="helm",
        help="built-in configuration: helm (enqueue, allocate, backfill; default), builtin "
        "(Volcano's compiled-in default), tephra (adds preempt, reclaim and gangreclaim)",
    )
    ap.add_argument("--config", help="scheduler conf file (overrides --preset)")
    args = ap.parse_args(argv)
    conf = {
        "helm": HELM_DEFAULT_CONFIG,
        "builtin": BUILTIN_DEFAULT_CONFIG,
        "tephra": TEPHRA_DEFAULT_CONFIG,
    }[args.preset]
    if args.config:
        with open(args.config, encoding="utf-8") as fh:
            conf = fh.read()
    grid = [
        (n, p, g)
        for n in (args.nodes or [1000, 5000, 10000])
        for p in (args.pods or [10000, 50000, 100000])
        for g in (args.gang or [1, 8, 64])
    ]
    cols = (
        "nodes",
        "pods",
        "gang",
        "jobs",
        "build_s",
        "open_s",
        "actions_s",
        "close_s",
        "p50_s",
        "p99_s",
        "cpu_p50_s",
        "placed",
        "pods_per_s",
        "pods_per_cpu_s",
        "memo_s",
        "steady_s",
        "steady_cpu_s",
        "gc_s",
        "rss_mib",
    )
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for i, (n, p, g) in enumerate(grid, 1):
        print(f"[{i}/{len(grid)}] nodes={n} pods={p} gang={g}", file=sys.stderr, flush=True)
        row = bench(n, p, g, repeat=args.repeat, busy=args.busy, seed=args.seed, conf_text=conf)
        cells = [f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c]) for c in cols]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
