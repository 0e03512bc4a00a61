"""A reflector whose kind the API does not serve (a CRD not installed) counts as synced: the
scheduler's "all synced" barrier must not wait for it (Volcano v1.10's CRDs have no HyperNode)."""

from __future__ import annotations

import asyncio
from typing import Any

from batch.kube.client import ApiError, Resource
from batch.kube.informer import Reflector, ReflectorSet

HYPERNODES = Resource("topology.volcano.sh/v1alpha1", "hypernodes", "HyperNode", namespaced=False)


class NotServed:
    """A client whose every list answers 404, as kube-apiserver does for a CRD not installed."""

    def __init__(self) -> None:
        self.lists = 0

    async def list(self, resource: Resource, **params: Any) -> dict[str, Any]:
        self.lists += 1
        raise ApiError(404, {"reason": "NotFound"}, f"GET {resource.plural}")


def test_a_kind_not_served_is_synced_with_no_objects() -> None:
    client = NotServed()
    events: list[str] = []
    reflector = Reflector(
        client,  # type: ignore[arg-type]
        HYPERNODES,
        lambda kind, etype, obj: events.append(etype),
        absent_retry=1.0,
    )

    async def run() -> bool:
        reflectors = ReflectorSet([reflector])
        reflectors.start()
        try:
            return await reflectors.wait_synced(timeout=5.0)
        finally:
            await reflectors.stop()

    assert asyncio.run(run())
    assert client.lists == 1 and events == []
