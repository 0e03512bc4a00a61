"""Reader for Microsoft ITP traces released with ElasticFlow (`shared/traces/msft-itp-elasticflow`).

Each `clusterNN.csv` becomes one queue. The release has no cluster sizes, so each file gets
enough 8-GPU nodes for its offered load (GPU-seconds / span) to be `TARGET_LOAD` of its
capacity, and at least enough for its largest job; the queue weight is that node count. The
chosen sizes are reported in the workload notes. Jobs larger than 8 GPUs are gangs of 8-GPU
pods, as for Philly.
"""

from __future__ import annotations

import math
from pathlib import Path

from batch.sim.cluster import ClusterSpec, NodeGroup, QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.traces.common import bad_row, read_rows
from batch.sim.traces.philly import GPUS_PER_NODE, NODE_CPU_MILLI, NODE_MEMORY, split_gpus
from batch.sim.workload import SimJob, TaskShape, Workload, sort_jobs

__all__ = ["TARGET_LOAD", "read_elasticflow"]

TARGET_LOAD = 0.8


def read_elasticflow(path: Path) -> Workload:
    """`path` is the folder of `cluster*.csv` files or one of them."""
    files = sorted(path.glob("cluster*.csv")) if path.is_dir() else [path]
    if not files:
        raise SimInputError(f"{path}: no cluster*.csv files")
    rows: list[tuple[float, float, int, str, str]] = []
    sizes: dict[str, int] = {}
    for f in files:
        queue = f.stem
        gpu_seconds = 0.0
        lo, hi, biggest = math.inf, -math.inf, 0
        for line, row in read_rows(f, ("job_id", "submission_time", "duration", "num_gpu")):
            try:
                submit = float(row["submission_time"])
                duration = float(row["duration"])
                gpus = int(row["num_gpu"])
            except ValueError:
                raise bad_row(
                    f, line, "submission_time/duration/num_gpu", str(row), "not a number"
                ) from None
            rows.append((submit, duration, gpus, queue, row["job_id"]))
            gpu_seconds += duration * gpus
            lo, hi, biggest = min(lo, submit), max(hi, submit), max(biggest, gpus)
        span = max(hi - lo, 1.0)
        need = math.ceil(gpu_seconds / span / TARGET_LOAD / GPUS_PER_NODE)
        sizes[queue] = max(need, math.ceil(biggest / GPUS_PER_NODE), 1)
    rows.sort(key=lambda r: r[0])
    origin = rows[0][0] if rows else 0.0
    shapes: dict[int, tuple[TaskShape, ...]] = {}
    jobs: list[SimJob] = []
    for i, (submit, duration, gpus, queue, _jid) in enumerate(rows):
        tasks = shapes.get(gpus)
        if tasks is None:
            tasks = shapes[gpus] = split_gpus(gpus)
        jobs.append(
            SimJob(
                name=f"itp-{i:05d}",
                queue=queue,
                submit=submit - origin,
                run_time=duration,
                tasks=tasks,
                min_available=sum(t.replicas for t in tasks),
            )
        )
    nodes = sum(sizes.values())
    cluster = ClusterSpec(
        node_groups=(NodeGroup("itp", nodes, NODE_CPU_MILLI, NODE_MEMORY, GPUS_PER_NODE * 1000),),
        queues=tuple(QueueSpec(name=q, weight=n) for q, n in sorted(sizes.items())),
    )
    notes = (
        f"elasticflow: {len(jobs)} jobs from {len(files)} file(s); cluster sizes not published, "
        f"chosen for {TARGET_LOAD:.0%} offered load: "
        + ", ".join(f"{q}={n} nodes" for q, n in sorted(sizes.items())),
    )
    return Workload(name="elasticflow", jobs=sort_jobs(jobs), cluster=cluster, notes=notes)
