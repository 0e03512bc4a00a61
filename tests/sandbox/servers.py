"""The real kube-apiserver as a server of the contract suite (differential testing: it is the
oracle the sandbox is checked against).

The real tier's one control plane serves the whole session, so a module's run must leave it as
it found it: `swept` deletes what the module created (objects of the kinds the suite writes,
namespaces, Nodes, CRDs); `start_like_sandbox` gives it the objects the sandbox starts with.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from batch.api.topology import RACK_LABEL

from .helpers import Server, http

MERGE = "application/merge-patch+json"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
SANDBOX_NODES: dict[str, Any] = {"count": 3, "gpus": 8, "cpu": "16", "memory": "64Gi", "racks": 2}

# (API prefix, plural, namespaced): what the contract suite creates, namespaced kinds first.
SWEPT: tuple[tuple[str, str, bool], ...] = (
    ("/api/v1", "pods", True),
    ("/api/v1", "configmaps", True),
    ("/api/v1", "secrets", True),
    ("/api/v1", "services", True),
    ("/api/v1", "replicationcontrollers", True),
    ("/apis/apps/v1", "deployments", True),
    ("/apis/apps/v1", "replicasets", True),
    ("/apis/apps/v1", "statefulsets", True),
    ("/apis/batch/v1", "jobs", True),
    ("/apis/policy/v1", "poddisruptionbudgets", True),
    ("/apis/coordination.k8s.io/v1", "leases", True),
    ("/apis/batch.volcano.sh/v1alpha1", "jobs", True),
    ("/apis/scheduling.volcano.sh/v1beta1", "podgroups", True),
    ("/apis/bus.volcano.sh/v1alpha1", "commands", True),
    ("/apis/scheduling.volcano.sh/v1beta1", "queues", False),
    ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("/api/v1", "nodes", False),
    ("/api/v1", "namespaces", False),
    ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
)


def _item_path(prefix: str, plural: str, item: dict[str, Any]) -> str:
    meta = item["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{prefix}{ns}/{plural}/{meta['name']}"


def _paths(server: Server) -> set[str]:
    found: set[str] = set()
    for prefix, plural, _namespaced in SWEPT:
        code, body = http(server, "GET", f"{prefix}/{plural}")
        if code == 200:
            found |= {_item_path(prefix, plural, item) for item in body["items"]}
    return found


def _delete(server: Server, path: str) -> None:
    code, body = http(server, "DELETE", path + "?gracePeriodSeconds=0")
    if code == 200 and isinstance(body, dict) and body.get("metadata", {}).get("finalizers"):
        patch = {"metadata": {"finalizers": None}}
        http(server, "PATCH", path, patch, ctype="application/merge-patch+json")


@contextmanager
def swept(server: Server) -> Iterator[Server]:
    """Yield `server`; afterwards delete the objects of SWEPT kinds that were not there before."""
    before = _paths(server)
    try:
        yield server
    finally:
        after = _paths(server)
        order = {prefix + "/" + plural: i for i, (prefix, plural, _) in enumerate(SWEPT)}
        for path in sorted(after - before, key=lambda p: order.get(_kind_of(p), 0)):
            _delete(server, path)


def _kind_of(path: str) -> str:
    """`/api/v1/namespaces/ns/pods/x` -> `/api/v1/pods` (SWEPT's key of the item's kind)."""
    head, _, _name = path.rpartition("/")
    prefix, _, plural = head.rpartition("/")
    if "/namespaces/" in prefix:
        prefix = prefix.split("/namespaces/")[0]
    return f"{prefix}/{plural}"


def start_like_sandbox(server: Server, nodes: list[str]) -> None:
    """Give the real tier's emulated Nodes the rack labels `make_nodes(racks=2)` gives, and
    create the queues the sandbox starts with (on a cluster Tephra's controller does)."""
    for i, name in enumerate(sorted(nodes)):
        labels = {RACK_LABEL: f"rack-{i % SANDBOX_NODES['racks']}"}
        patch = {"metadata": {"labels": labels}}
        code, body = http(server, "PATCH", f"/api/v1/nodes/{name}", patch, ctype=MERGE)
        assert code == 200, body
    for name, spec in (("root", {"reclaimable": False}), ("default", {"parent": "root"})):
        queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
        queue.update(metadata={"name": name}, spec={"weight": 1, "reclaimable": True, **spec})
        code, body = http(server, "POST", QUEUES, queue)
        assert code in (201, 409), body
        status = {"status": {"state": "Open"}}
        http(server, "PATCH", f"{QUEUES}/{name}/status", status, ctype=MERGE)
