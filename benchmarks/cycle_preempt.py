"""Benchmark: one preempt + reclaim cycle at 1,000 nodes, 10,000 running pods, 100 starving gangs.

Target (issue 5): the cycle in at most 1 s (KAI Scheduler's reclaim takes about 9 s at 500 nodes
in its own micro-benchmark). The cluster: 1,000 nodes of 32 cpu / 128 Gi; ten queues; 500
running low-priority elastic jobs (20 pods of 3.1 cpu, minAvailable 10) in queues q0..q7, so every
node is nearly full; 100 starving high-priority gangs of 8 pods x 4 cpu: 50 in q0..q3 (they
preempt inside their queue) and 50 in q8/q9, which hold nothing (they reclaim from q4..q7, which
sit above their deserved share). Tephra's default configuration (``TEPHRA_DEFAULT_CONFIG``);
``--budget-off`` removes the per-action time budgets.

    .venv/bin/python benchmarks/cycle_preempt.py [--nodes 1000] [--repeat 3] [--budget-off]
"""

from __future__ import annotations

import argparse
import statistics
import time

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import TEPHRA_DEFAULT_CONFIG, load_config, run_session

NOW = 1_800_000_000.0


def build(nodes: int, running_jobs: int, gangs: int) -> ClusterCache:
    c = ClusterCache()
    c.apply("PriorityClass", "ADDED", f.priority_class("low", 10))
    c.apply("PriorityClass", "ADDED", f.priority_class("high", 1000))
    for q in range(10):
        # q0..q3 and q8/q9 weigh 3: under their deserved share; q4..q7 weigh 1: above it
        c.apply("Queue", "ADDED", f.queue(f"q{q}", weight=1 if 4 <= q < 8 else 3))
    for i in range(nodes):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="32", memory="128Gi"))
    slot = 0
    per_job = 20
    for j in range(running_jobs):
        q = f"q{j % 8}"
        name = f"run{j}"
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(name, queue=q, min_member=10, phase="Running", priority_class="low"),
        )
        for k in range(per_job):
            p = f.pod(
                f"{name}-{k}",
                group=name,
                cpu="3100m",
                memory="8Gi",
                node_name=f"n{slot % nodes}",
                phase="Running",
                priority=10,
                priority_class="low",
            )
            p["status"]["startTime"] = "2026-01-01T00:00:00Z"
            c.apply("Pod", "ADDED", p)
            slot += 1
    for g in range(gangs):
        q = f"q{g % 4}" if g < gangs // 2 else f"q{8 + g % 2}"
        name = f"gang{g}"
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(name, queue=q, min_member=8, phase="Inqueue", priority_class="high"),
        )
        for k in range(8):
            c.apply(
                "Pod",
                "ADDED",
                f.pod(
                    f"{name}-{k}",
                    group=name,
                    cpu="4",
                    memory="8Gi",
                    priority=1000,
                    priority_class="high",
                ),
            )
    return c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--running-jobs", type=int, default=500)
    ap.add_argument("--gangs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget-off", action="store_true", help="no time budget per action")
    args = ap.parse_args()
    t0 = time.perf_counter()
    c = build(args.nodes, args.running_jobs, args.gangs)
    print(
        f"cluster: {args.nodes} nodes, {args.running_jobs * 20} running pods, "
        f"{args.gangs} starving gangs (built in {time.perf_counter() - t0:.1f} s)"
    )
    text = TEPHRA_DEFAULT_CONFIG
    if args.budget_off:
        text = text.replace("timeBudgetSeconds: 0.4", "timeBudgetSeconds: 0")
    cfg = load_config(text)
    totals: list[float] = []
    cpus: list[float] = []
    for r in range(args.repeat):
        t = time.perf_counter()
        cpu0 = time.process_time()
        d = run_session(c, cfg, now=NOW + r)
        total = time.perf_counter() - t
        cpus.append(time.process_time() - cpu0)
        totals.append(total)
        reasons: dict[str, int] = {}
        for e in d.evictions:
            reasons[e.reason] = reasons.get(e.reason, 0) + 1
        jobs = {p.job_id for p in d.pipelines}
        print(
            f"run {r}: cycle {total:.3f} s wall, {cpus[-1]:.3f} s cpu "
            f"(preempt {d.timings.get('preempt', 0):.3f} s, "
            f"reclaim {d.timings.get('reclaim', 0):.3f} s, allocate "
            f"{d.timings.get('allocate', 0):.3f} s, open {d.timings.get('open', 0):.3f} s); "
            f"evictions {reasons}, gangs pipelined {len(jobs)}"
        )
    print(
        f"median cycle: {statistics.median(totals):.3f} s wall, "
        f"{statistics.median(cpus):.3f} s cpu (the wall figure includes waiting for a shared CPU)"
    )


if __name__ == "__main__":
    main()
