"""The KubeRay adapter's `observe` (the ledger's view of Ray workloads), issue 34.5: the
controller watches every kind the adapter lists, RayCluster included, so a RayCluster's own
observation must say when it ran (KubeRay's `status.state`), or the ledger never records its
start."""

from __future__ import annotations

import datetime as dt
from typing import Any

from integrations.ray import RayAdapter

UTC = dt.UTC


def cluster(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rc",
            "namespace": "ns",
            "labels": {"volcano.sh/queue-name": "ray-q"},
        },
        "spec": {
            "headGroupSpec": {
                "template": {
                    "spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}
                }
            },
            "workerGroupSpecs": [
                {
                    "groupName": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
        "status": status or {},
    }


def test_a_ready_raycluster_is_running_since_it_became_ready() -> None:
    seen = RayAdapter().observe(
        cluster({"state": "ready", "stateTransitionTimes": {"ready": "2026-01-01T00:00:05Z"}})
    )
    assert seen is not None
    assert seen.queue == "ray-q" and seen.replicas == {"headgroup": 1, "w": 2}
    assert list(seen.phases) == [("Running", dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC))]


def test_a_raycluster_not_yet_ready_is_observed_without_a_phase() -> None:
    seen = RayAdapter().observe(cluster())
    assert seen is not None and seen.queue == "ray-q" and not seen.phases


def test_a_failed_raycluster_failed() -> None:
    status = {"state": "failed", "stateTransitionTimes": {"failed": "2026-01-01T00:01:00Z"}}
    seen = RayAdapter().observe(cluster(status))
    assert seen is not None and [p for p, _ in seen.phases] == ["Failed"]
