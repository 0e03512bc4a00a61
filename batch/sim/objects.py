"""The simulator's objects and clock constants, shared by the engine and the lifecycles (one
home, so the lifecycles need not import the engine that runs them)."""

from __future__ import annotations

import time
from typing import Any

__all__ = [
    "EPOCH",
    "GROUP_ANNOTATION",
    "KIND_COMPLETE",
    "KIND_WAKE",
    "NAMESPACE",
    "pod_requests",
    "running_status",
    "succeeded_status",
    "timestamp",
]

NAMESPACE = "sim"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
EPOCH = 1_577_836_800.0  # 2020-01-01T00:00:00Z: virtual time 0, for creationTimestamps
KIND_COMPLETE = 0  # heap event: the job's run time has elapsed
KIND_WAKE = 1  # heap event: the lifecycle asked to look at the job again (policy timeouts)


def timestamp(t: float) -> str:
    """RFC 3339 creationTimestamp for virtual time `t`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH + t))


def quantity(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def pod_requests(cpu_milli: int, memory_bytes: int, gpu_milli: int) -> dict[str, str]:
    requests = {"cpu": f"{cpu_milli}m"}
    if memory_bytes:
        requests["memory"] = str(memory_bytes)
    if gpu_milli:
        requests["nvidia.com/gpu"] = quantity(gpu_milli)
    return requests


def running_status(now: float) -> dict[str, Any]:
    return {
        "phase": "Running",
        "startTime": timestamp(now),
        "containerStatuses": [
            {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
        ],
    }


def succeeded_status(now: float) -> dict[str, Any]:
    return {
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "finishedAt": timestamp(now)}},
            }
        ],
    }
