"""Issue 19.5: PodGroups for bare pods were made at about 11 per second. Each pod cost the
controller about four reads (the pod twice, its PodGroup twice) besides the PodGroup create and
the pod patch, and the PodGroup reconcile listed the whole namespace's pods. The controller now
reads pods and its PodGroups from its watch-fed caches: two writes per pod, no reads."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox import http as sandbox_http
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

N = 60


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[tuple[str, str]]]:
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    handle = sandbox_http.HttpApi.handle

    async def counting(self: Any, request: Any) -> Any:
        parts = [p for p in request.path.split("?")[0].split("/") if p]
        for kind in ("pods", "podgroups"):
            if kind in parts:
                named = len(parts) > parts.index(kind) + 1  # one object, not a list
                calls[(request.method, kind + ("/name" if named else ""))] += 1
        return await handle(self, request)

    monkeypatch.setattr(sandbox_http.HttpApi, "handle", counting)
    yield calls


def _bare(i: int) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bare-{i}"},
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }


def test_bare_pods_cost_two_writes_and_no_reads(
    counted: collections.Counter[tuple[str, str]],
) -> None:
    with run_sandbox(
        nodes=make_nodes(count=1, cpu="64", memory="256Gi"),
        components=[ControllerComponent()],
        ready_timeout=120,
    ) as sb:
        api = sb.api_client()
        core: Any = client.CoreV1Api(api)
        co: Any = client.CustomObjectsApi(api)
        ctrl = sb.components[0]
        assert isinstance(ctrl, ControllerComponent)

        def listed() -> bool:  # until then a grouping reads the PodGroup (a load-bound race)
            return ctrl.manager is not None and ctrl.manager.watched.pg_cache_seeded

        wait_for(listed, timeout=60, what="the controller's PodGroup list at start")
        counted.clear()
        for i in range(N):
            core.create_namespaced_pod("default", _bare(i))

        def grouped() -> bool:
            pods = core.list_namespaced_pod("default").items
            return (
                sum(
                    1
                    for p in pods
                    if (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name")
                )
                >= N
            )

        wait_for(grouped, timeout=60, what="every bare pod grouped")
        groups = co.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
        )["items"]
        assert len(groups) == N
        calls = dict(counted)
    assert calls.get(("POST", "podgroups"), 0) == N, calls
    assert calls.get(("PATCH", "pods/name"), 0) == N, calls
    reads = calls.get(("GET", "pods/name"), 0) + calls.get(("GET", "podgroups/name"), 0)
    assert reads <= N // 10, calls  # about 4 per pod before
