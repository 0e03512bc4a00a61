"""Reader for Alibaba's `openb` GPU trace (`shared/traces/alibaba-openb-2023/`, FGD, ATC'23).

Every pod is a one-pod job with its own cpu, memory and GPU request; a pod asking for one GPU
with `gpu_milli` < 1000 asks for that fraction (`nvidia.com/gpu: 460m` — Tephra accounts GPUs in
milli-units, so sharing is accounted per node, not per device). Arrival = `creation_time`; run
time = `deletion_time - scheduled_time` (or `- creation_time` for the pods that were never
scheduled). The QoS class is the queue (weight 1 each). The cluster is the node list
(`openb_node_list_all_node.csv` beside the pod file), grouped into node groups of identical
nodes labelled with their GPU model. The `multigpu50` variant has no times: every pod arrives
at 0 and runs `SNAPSHOT_RUN_TIME` seconds (a packing snapshot, not a replay).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from batch.sim.cluster import ClusterSpec, NodeGroup, QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.traces.common import MIB, bad_row, read_rows
from batch.sim.workload import SimJob, TaskShape, Workload, sort_jobs

__all__ = ["SNAPSHOT_RUN_TIME", "read_openb", "read_openb_nodes"]

SNAPSHOT_RUN_TIME = 3600.0
GPU_MODEL_LABEL = "tephra.io/gpu-model"


def read_openb_nodes(path: Path) -> ClusterSpec:
    counts: Counter[tuple[int, int, int, str]] = Counter()
    for line, row in read_rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        try:
            key = (int(row["cpu_milli"]), int(row["memory_mib"]), int(row["gpu"]), row["model"])
        except ValueError:
            raise bad_row(
                path, line, "cpu_milli/memory_mib/gpu", str(row), "not an integer"
            ) from None
        counts[key] += 1
    groups = []
    for (cpu, mem, gpu, model), n in sorted(counts.items(), key=lambda kv: (kv[0][3], kv[0][:3])):
        name = f"{(model or 'cpu').lower()}-{gpu}g-{cpu // 1000}c-{mem // 1024}gi"
        labels = {GPU_MODEL_LABEL: model} if model else {}
        groups.append(NodeGroup(name, n, cpu, mem * MIB, gpu * 1000, labels=labels))
    return ClusterSpec(node_groups=tuple(groups))


def read_openb(path: Path) -> Workload:
    """`path` is the openb folder (default pod list) or a pod-list CSV."""
    pod_path = path / "openb_pod_list_default.csv" if path.is_dir() else path
    node_path = pod_path.parent / "openb_node_list_all_node.csv"
    if not node_path.exists():
        raise SimInputError(f"{pod_path}: needs openb_node_list_all_node.csv beside it")
    cluster = read_openb_nodes(node_path)
    jobs: list[SimJob] = []
    queues: set[str] = set()
    timed = None
    shapes: dict[tuple[int, int, int], tuple[TaskShape, ...]] = {}
    for line, row in read_rows(
        pod_path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
    ):
        if timed is None:
            timed = "creation_time" in row
        try:
            cpu, mem = int(row["cpu_milli"]), int(row["memory_mib"])
            num_gpu, gpu_milli = int(row["num_gpu"]), int(row["gpu_milli"])
        except ValueError:
            raise bad_row(
                pod_path, line, "cpu_milli/memory_mib/num_gpu/gpu_milli", str(row), "not an integer"
            ) from None
        gpu = num_gpu * 1000 if num_gpu != 1 else min(gpu_milli, 1000) or 1000
        if timed:
            try:
                created = float(row["creation_time"])
                deleted = float(row["deletion_time"])
                start = float(row["scheduled_time"]) if row["scheduled_time"] else created
            except ValueError:
                raise bad_row(
                    pod_path, line, "creation/deletion/scheduled_time", str(row), "not a number"
                ) from None
            run_time = max(deleted - start, 0.0)
            queue = (row.get("qos") or "default").lower()
        else:
            created, run_time, queue = 0.0, SNAPSHOT_RUN_TIME, "default"
        key = (cpu, mem, gpu)
        tasks = shapes.get(key)
        if tasks is None:
            tasks = shapes[key] = (TaskShape("pod", 1, cpu, mem * MIB, gpu),)
        queues.add(queue)
        jobs.append(SimJob(row["name"], queue, created, run_time, tasks, 1))
    cluster = cluster.with_queues([QueueSpec(name=q) for q in sorted(queues)])
    notes = [
        f"openb: {len(jobs)} pods as 1-pod jobs on {cluster.node_count} nodes "
        f"({cluster.gpu_milli_total // 1000} GPUs); queue = QoS class",
    ]
    if not timed:
        notes.append(
            f"openb: no time columns; all pods arrive at 0 and run {SNAPSHOT_RUN_TIME:.0f} s"
        )
    return Workload(name="openb", jobs=sort_jobs(jobs), cluster=cluster, notes=tuple(notes))
