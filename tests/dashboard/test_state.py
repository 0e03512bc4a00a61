"""The dashboard's watch-fed state: what a node's pods hold follows their events."""

from __future__ import annotations

from typing import Any

from batch.dashboard.state import LiveState
from batch.dashboard.views import job_detail, overview
from batch.sandbox.nodes import make_nodes


def _pod(name: str, node: str, phase: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": phase},
    }


def test_node_use_follows_pod_events() -> None:
    state = LiveState()
    for node in make_nodes(count=2, gpus=8):
        state.sink("Node", "ADDED", node)
    state.sink("Pod", "ADDED", _pod("a", "node-0", "Pending", 3))
    state.sink("Pod", "ADDED", _pod("b", "node-0", "Running", 2))
    state.sink("Pod", "ADDED", _pod("c", "", "Pending", 4))  # not bound: holds nothing
    assert state.used["node-0"]["nvidia.com/gpu"] == 5000
    state.sink("Pod", "MODIFIED", _pod("a", "node-0", "Succeeded", 3))
    assert state.used["node-0"]["nvidia.com/gpu"] == 2000
    state.sink("Pod", "DELETED", {"metadata": {"name": "b", "namespace": "default", "uid": "b"}})
    assert state.used["node-0"]["nvidia.com/gpu"] == 0
    state.sink("Pod", "MODIFIED", _pod("c", "node-1", "Running", 4))
    model = overview(state)
    assert model["gpus"] == {"total": 16, "allocated": 4, "idle": 12, "fragmented": 4}
    assert model["capacity"]["nvidia.com/gpu"]["text"] == "16"


def test_the_job_page_finds_an_operators_gang_by_the_workloads_name() -> None:
    """Issue 34.5: the dashboard knew only VCJobs; a PyTorchJob's page explains its PodGroup."""
    state = LiveState()
    for node in make_nodes(count=2, gpus=8):
        state.sink("Node", "ADDED", node)
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt-big", "uid": "p"}
    pg = {
        "metadata": {
            "name": "pt-big-pg",
            "namespace": "kf",
            "uid": "pg",
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {"minMember": 4, "queue": "default", "minResources": {"nvidia.com/gpu": "32"}},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "message": "4/4 tasks in gang unschedulable: can never fit: the gang asks "
                    "for 32 nvidia.com/gpu, the cluster has 16",
                }
            ],
        },
    }
    state.sink("PodGroup", "ADDED", pg)
    state.sink("Queue", "ADDED", {"metadata": {"name": "default", "uid": "q"}, "spec": {}})
    model = job_detail(state, "kf", "pt-big")
    assert model is not None and model["kind"] == "PyTorchJob"
    assert model["why"][0] == (
        "PyTorchJob kf/pt-big can never run on this cluster as it stands: the gang asks for 32 "
        "nvidia.com/gpu, the cluster has 16."
    )
    assert job_detail(state, "kf", "pt-big-pg") is None  # by the workload's name, not the group's


def test_a_kind_the_api_does_not_serve_does_not_hold_the_pages_back() -> None:
    """A cluster without the HyperNode CRD: that reflector counts as synced, with no objects."""
    import asyncio

    from batch.dashboard.state import reflectors
    from batch.kube.resource import ApiError

    class Client:
        async def list(self, resource: Any, **_params: str) -> dict[str, Any]:
            if resource.kind == "HyperNode":
                raise ApiError(404, {"reason": "NotFound"}, "list hypernodes")
            return {"items": [], "metadata": {"resourceVersion": "1"}}

        async def watch(self, resource: Any, **_params: Any) -> Any:
            await asyncio.sleep(3600)
            yield  # pragma: no cover

    async def run() -> bool:
        found = reflectors(Client(), LiveState())  # type: ignore[arg-type]
        found.start()
        try:
            return await found.wait_synced(timeout=30)
        finally:
            await found.stop()

    assert asyncio.run(run()) is True
