"""The dashboard's watch-fed state: what a node's pods hold follows their events."""

from __future__ import annotations

from typing import Any

from batch.dashboard.state import LiveState
from batch.dashboard.views import overview
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
