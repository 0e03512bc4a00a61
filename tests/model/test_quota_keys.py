"""PodGroup minResources written by the job controller carry quota keys; only plain names count."""

from __future__ import annotations

from batch.model.parse import scheduling_resources


def test_quota_keys_are_not_scheduling_dimensions() -> None:
    # The keys Volcano's e2e expects the job controller to write
    # (volcano-semantics.md#job-podgroup-and-pods).
    pg = {
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {
            "minMember": 2,
            "minResources": {
                "count/pods": "2",
                "pods": "2",
                "cpu": "2",
                "requests.cpu": "2",
                "limits.cpu": "2",
                "memory": "2000Mi",
                "requests.memory": "2000Mi",
                "limits.memory": "2000Mi",
                "nvidia.com/gpu": "2",
                "requests.nvidia.com/gpu": "2",
            },
        },
    }
    assert scheduling_resources(pg["spec"]["minResources"]) == {
        "pods": 2,
        "cpu": 2000,
        "memory": 2000 * 2**20,
        "nvidia.com/gpu": 2000,
    }
