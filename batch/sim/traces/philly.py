"""Reader for the Philly trace (`shared/traces/philly/`).

Mapping (perf-anchors §1.1, SOURCE.txt): the VC is the queue; `num_gpus` is split into pods of
8 GPUs (the remainder in one smaller pod), all of which form one gang; `duration` (the sum of
the job's attempt run times) is the run time. The cluster is `philly_vc.csv`'s 352 nodes of 8
GPUs; each listed VC's queue weight is its node count. The 4 VCs missing from that file (fewer
than 10 jobs each) keep their jobs in queues of weight 1. Timestamps are local time without a
zone and are read as UTC; rows are not sorted in the file and are sorted here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from batch.sim.cluster import ClusterSpec, NodeGroup, QueueSpec
from batch.sim.traces.common import GIB, bad_row, read_rows
from batch.sim.workload import SimJob, TaskShape, Workload, sort_jobs

__all__ = ["GPUS_PER_NODE", "read_philly", "split_gpus"]

GPUS_PER_NODE = 8
CPU_MILLI_PER_GPU = 4000
MEMORY_PER_GPU = 0  # the trace has no memory figures; pods request cpu and GPUs only
NODE_CPU_MILLI = 64_000
NODE_MEMORY = 512 * GIB


def split_gpus(num_gpus: int) -> tuple[TaskShape, ...]:
    """`num_gpus` as pods of at most 8 GPUs: full 8-GPU workers plus one remainder pod."""
    full, rest = divmod(num_gpus, GPUS_PER_NODE)
    shapes: list[TaskShape] = []
    if full:
        g = GPUS_PER_NODE
        shapes.append(
            TaskShape("worker", full, g * CPU_MILLI_PER_GPU, g * MEMORY_PER_GPU, g * 1000)
        )
    if rest or not shapes:
        g = max(rest, 0)
        cpu = max(g, 1) * CPU_MILLI_PER_GPU
        mem = 0
        shapes.append(TaskShape("worker" if not full else "rest", 1, cpu, mem, g * 1000))
    return tuple(shapes)


def read_vc_sizes(path: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for line, row in read_rows(path, ("vc", "node num")):
        try:
            sizes[row["vc"]] = int(row["node num"])
        except ValueError:
            raise bad_row(path, line, "node num", row["node num"], "must be an integer") from None
    return sizes


def read_philly(path: Path) -> Workload:
    """`path` is the `philly` folder or `philly.csv` (with `philly_vc.csv` beside it)."""
    csv_path = path / "philly.csv" if path.is_dir() else path
    vc_path = csv_path.parent / "philly_vc.csv"
    sizes = read_vc_sizes(vc_path) if vc_path.exists() else {}
    raw: list[tuple[float, float, int, str]] = []
    for line, row in read_rows(csv_path, ("timestamp", "duration", "num_gpus", "cluster")):
        try:
            ts = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise bad_row(csv_path, line, "timestamp", row["timestamp"], "not a date") from None
        try:
            duration = float(row["duration"])
        except ValueError:
            raise bad_row(csv_path, line, "duration", row["duration"], "not a number") from None
        try:
            gpus = int(row["num_gpus"])
        except ValueError:
            raise bad_row(csv_path, line, "num_gpus", row["num_gpus"], "not an integer") from None
        if duration < 0 or gpus < 0:
            raise bad_row(csv_path, line, "duration/num_gpus", row["duration"], "negative")
        raw.append((ts, duration, gpus, row["cluster"]))
    origin = min((r[0] for r in raw), default=0.0)
    shapes: dict[int, tuple[TaskShape, ...]] = {}
    jobs: list[SimJob] = []
    raw.sort(key=lambda r: r[0])
    for i, (ts, duration, gpus, vc) in enumerate(raw):
        tasks = shapes.get(gpus)
        if tasks is None:
            tasks = shapes[gpus] = split_gpus(gpus)
        jobs.append(
            SimJob(
                name=f"philly-{i:05d}",
                queue=f"vc-{vc}",
                submit=ts - origin,
                run_time=duration,
                tasks=tasks,
                min_available=sum(t.replicas for t in tasks),
            )
        )
    vcs = sorted({r[3] for r in raw} | set(sizes))
    queues = [QueueSpec(name=f"vc-{vc}", weight=sizes.get(vc, 1)) for vc in vcs]
    nodes = sum(sizes.values()) or 352
    cluster = ClusterSpec(
        node_groups=(
            NodeGroup(
                name="philly",
                count=nodes,
                cpu_milli=NODE_CPU_MILLI,
                memory_bytes=NODE_MEMORY,
                gpu_milli=GPUS_PER_NODE * 1000,
            ),
        ),
        queues=tuple(queues),
    )
    missing = [vc for vc in vcs if vc not in sizes]
    notes = [
        f"philly: {len(jobs)} jobs, {nodes} nodes x {GPUS_PER_NODE} GPUs, "
        f"{len(queues)} queues (VC = queue, weight = VC node count)",
    ]
    if missing:
        notes.append(
            f"philly: VCs without a size in philly_vc.csv get weight 1: {', '.join(missing)}"
        )
    return Workload(
        name="philly", jobs=sort_jobs(jobs), cluster=cluster, notes=tuple(notes), origin=origin
    )
