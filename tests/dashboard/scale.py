"""The 5,000-node cluster of the dashboard's scale test and benchmark, installed in-process.

5,000 nodes of 16 GPUs and 64 cpu; 2,000 VCJobs of 25 pods bound round-robin to the nodes
(1 GPU and 1 cpu each: 10 per node, room left, as a scheduler would). Shared by
tests/dashboard/test_scale.py (the pages answer correctly) and benchmarks/dashboard_scale.py
(how fast they answer).
"""

from __future__ import annotations

from typing import Any

from batch.sandbox.nodes import make_nodes

NODES, JOBS, PODS_PER_JOB = 5_000, 2_000, 25
GPUS_PER_NODE = 16
PAGES = ("/", "/queues", "/jobs", "/nodes", "/jobs/default/job-7", "/api/overview")


def nodes(count: int = NODES) -> list[dict[str, Any]]:
    return make_nodes(count=count, gpus=GPUS_PER_NODE, cpu="64")


def job(i: int, pods_per_job: int = PODS_PER_JOB) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"job-{i}", "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": pods_per_job,
            "tasks": [{"name": "w", "replicas": pods_per_job, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}],
        },
    }  # fmt: skip


def pod(job: int, k: int, nodes: int = NODES, pods_per_job: int = PODS_PER_JOB) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{job}-w-{k}",
            "namespace": "default",
            "labels": {"volcano.sh/job-name": f"job-{job}"},
        },
        "spec": {
            "nodeName": f"node-{(job * pods_per_job + k) % nodes}",
            "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}],
        },
    }  # fmt: skip


def install(
    sb: Any, nodes: int = NODES, jobs: int = JOBS, pods_per_job: int = PODS_PER_JOB
) -> None:
    """The jobs, then their pods 100 jobs at a time, into the sandbox `sb` (already noded)."""
    sb.apply(*(job(i, pods_per_job) for i in range(jobs)))
    for j in range(0, jobs, 100):
        batch = range(j, min(j + 100, jobs))
        sb.apply(*(pod(i, k, nodes, pods_per_job) for i in batch for k in range(pods_per_job)))
