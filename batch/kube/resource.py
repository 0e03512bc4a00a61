"""Where API resources live (`Resource`, `RESOURCES`) and the API server's refusals (`ApiError`).

Why this is apart from `batch.kube.client`: the CLI's synchronous client (`batch.kube.rest`)
shares these without importing aiohttp, which costs a command more than its whole work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = ["RESOURCES", "ApiError", "Resource"]


@dataclass(frozen=True)
class Resource:
    """One API resource: where it lives and whether it is namespaced."""

    api_version: str
    plural: str
    kind: str
    namespaced: bool = True

    def path(
        self, *, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        base = (
            f"/api/{self.api_version}"
            if "/" not in self.api_version
            else (f"/apis/{self.api_version}")
        )
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if sub:
            parts.append(sub)
        return "/".join(parts)


RESOURCES: dict[str, Resource] = {
    "Node": Resource("v1", "nodes", "Node", namespaced=False),
    "Pod": Resource("v1", "pods", "Pod"),
    "Namespace": Resource("v1", "namespaces", "Namespace", namespaced=False),
    "Event": Resource("v1", "events", "Event"),
    "PriorityClass": Resource(
        "scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", namespaced=False
    ),
    "Lease": Resource("coordination.k8s.io/v1", "leases", "Lease"),
    "PodGroup": Resource("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
    "Queue": Resource("scheduling.volcano.sh/v1beta1", "queues", "Queue", namespaced=False),
    "HyperNode": Resource(
        "topology.volcano.sh/v1alpha1", "hypernodes", "HyperNode", namespaced=False
    ),
}


class ApiError(Exception):
    """A non-success answer of the API server, with its Status body."""

    def __init__(self, status: int, body: Mapping[str, Any] | None, what: str) -> None:
        self.status = status
        self.body = dict(body or {})
        self.reason = str(self.body.get("reason", ""))
        message = self.body.get("message") or ""
        super().__init__(f"{what}: HTTP {status} {self.reason} {message}".strip())
