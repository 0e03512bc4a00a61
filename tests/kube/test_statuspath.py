"""Status writes on kinds with and without a status subresource (issue 34, item 1).

A PATCH of `NAME/status` answers 404 both when the object is gone and when its kind has no
status subresource (Volcano's PodGroup CRD). The writer must tell the two apart: the first is
no write and no failure, the second is written through the object, and neither is silent.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest

from batch.api.mergepatch import apply_merge_patch
from batch.controllers.effects import ObjectRef, PatchStatus
from batch.controllers.shell import apply_actions
from batch.kube.client import RESOURCES, ApiError, Resource
from batch.kube.status import StatusWriter
from batch.kube.statuspath import StatusPaths, reads_back

PG = RESOURCES["PodGroup"]


class Apiserver:
    """Objects of one namespaced kind (PodGroups), served as a real API server would with or
    without the status subresource on its CRD; `discovery=False` makes discovery fail."""

    def __init__(self, *, subresource: bool, discovery: bool = True) -> None:
        self.subresource = subresource
        self.discovery = discovery
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def add(self, name: str, status: dict[str, Any] | None = None) -> None:
        self.objects[name] = {"metadata": {"name": name}, "spec": {}, "status": status or {}}

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append(f"{method} {path}")
        await asyncio.sleep(0)  # an answer takes a while: other writes run meanwhile
        if not self.discovery:
            raise ApiError(403, {"reason": "Forbidden"}, f"{method} {path}")
        resources = [{"name": PG.plural}]
        if self.subresource:
            resources.append({"name": f"{PG.plural}/status"})
        return {"kind": "APIResourceList", "resources": resources}

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(f"GET {name}")
        if name not in self.objects:
            raise ApiError(404, {"reason": "NotFound"}, "GET")
        return copy.deepcopy(self.objects[name])

    async def patch(
        self, res: Resource, name: str, body: dict[str, Any], *, sub: str | None = None, **_: Any
    ) -> dict[str, Any]:
        self.calls.append(f"PATCH {name}" + (f"/{sub}" if sub else ""))
        if name not in self.objects or (sub == "status" and not self.subresource):
            # the same answer for both: the reason a writer cannot tell them apart from it
            raise ApiError(404, {"reason": "NotFound"}, "PATCH")
        obj = self.objects[name]
        if sub == "status":
            obj["status"] = apply_merge_patch(obj["status"], body["status"])
        else:
            kept = {k: v for k, v in body.items() if k != "status" or not self.subresource}
            self.objects[name] = obj = apply_merge_patch(obj, kept)
        return copy.deepcopy(obj)


def _patch(paths: StatusPaths, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
    return asyncio.run(paths.patch(PG, name, status, namespace="ns"))


def test_a_kind_with_the_subresource_is_written_through_it() -> None:
    server = Apiserver(subresource=True)
    server.add("pg")
    written = _patch(StatusPaths(server), "pg", {"phase": "Inqueue"})  # type: ignore[arg-type]
    assert written is not None and server.objects["pg"]["status"] == {"phase": "Inqueue"}
    assert server.calls == ["GET /apis/scheduling.volcano.sh/v1beta1", "PATCH pg/status"]


def test_discovery_sends_a_kind_without_it_through_the_object() -> None:
    server = Apiserver(subresource=False)
    server.add("pg")
    paths = StatusPaths(server)  # type: ignore[arg-type]
    assert _patch(paths, "pg", {"phase": "Inqueue"}) is not None
    assert _patch(paths, "pg", {"phase": "Running"}) is not None
    assert server.objects["pg"]["status"] == {"phase": "Running"}
    # discovery once, and no 404 on the way
    assert server.calls == ["GET /apis/scheduling.volcano.sh/v1beta1", "PATCH pg", "PATCH pg"]


def test_concurrent_first_writes_ask_discovery_once() -> None:
    """The scheduler writes a round of statuses at once: one discovery, not one per write."""
    server = Apiserver(subresource=False)
    names = [f"pg-{i}" for i in range(8)]
    for name in names:
        server.add(name)
    paths = StatusPaths(server)  # type: ignore[arg-type]

    async def round_() -> list[Any]:
        writes = (paths.patch(PG, n, {"phase": "Inqueue"}, namespace="ns") for n in names)
        return list(await asyncio.gather(*writes))

    assert None not in asyncio.run(round_())
    assert sum(1 for call in server.calls if call.startswith("GET /apis")) == 1


@pytest.mark.parametrize("subresource", [True, False])
def test_an_object_gone_is_no_write_whatever_the_kind(subresource: bool) -> None:
    server = Apiserver(subresource=subresource, discovery=False)
    paths = StatusPaths(server)  # type: ignore[arg-type]
    assert _patch(paths, "gone", {"phase": "Inqueue"}) is None
    # a gone object says nothing of the kind: it is still written through /status
    server.add("pg")
    assert _patch(paths, "pg", {"phase": "Inqueue"}) is not None
    assert server.objects["pg"]["status"] == {"phase": "Inqueue"}


def test_a_404_of_status_while_the_object_exists_means_no_subresource(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Discovery unavailable (or the CRD replaced after it): the 404 and a GET tell."""
    server = Apiserver(subresource=False, discovery=False)
    server.add("a")
    server.add("b")
    paths = StatusPaths(server)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="batch.kube.statuspath"):
        assert _patch(paths, "a", {"phase": "Inqueue"}) is not None
        assert _patch(paths, "b", {"phase": "Inqueue"}) is not None
    assert server.objects["a"]["status"] == server.objects["b"]["status"] == {"phase": "Inqueue"}
    assert server.calls[1:] == ["PATCH a/status", "GET a", "PATCH a", "PATCH b"]
    [record] = caplog.records  # said once, not once per write
    assert "PodGroup status is written through the object itself" in record.getMessage()
    assert "podgroups.scheduling.volcano.sh" in record.getMessage()


def test_a_kind_that_gains_the_subresource_is_written_through_it_again() -> None:
    """A write through the object that the server took but did not keep is not done."""
    server = Apiserver(subresource=False)
    server.add("pg", {"phase": "Pending"})
    paths = StatusPaths(server)  # type: ignore[arg-type]
    assert _patch(paths, "pg", {"phase": "Inqueue"}) is not None
    server.subresource = True  # Tephra's older CRD applied over Volcano's
    written = _patch(paths, "pg", {"phase": "Running"})
    assert written is not None and written["status"] == {"phase": "Running"}
    assert server.objects["pg"]["status"] == {"phase": "Running"}
    assert server.calls[-3:] == [
        "PATCH pg",
        "GET /apis/scheduling.volcano.sh/v1beta1",
        "PATCH pg/status",
    ]
    assert _patch(paths, "pg", {"phase": "Completed"}) is not None
    assert server.calls[-1] == "PATCH pg/status"


def test_reads_back_compares_every_field_sent() -> None:
    assert reads_back({"phase": "Running", "running": 2}, {"phase": "Running"})
    assert reads_back({"allocated": {"cpu": "1"}}, {"allocated": {"gpu": None}})
    assert not reads_back({"phase": "Running"}, {"phase": "Running", "running": 2})
    assert not reads_back(None, {"phase": "Running"})


class _Failing(Apiserver):
    async def patch(
        self, res: Resource, name: str, body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        raise ApiError(500, {"message": "injected"}, "PATCH")


def test_the_scheduler_writes_through_the_object_and_counts_failures() -> None:
    server = Apiserver(subresource=False)
    server.add("pg")
    failed: list[str] = []
    writer = StatusWriter(server, on_failed=failed.append)  # type: ignore[arg-type]
    writer.observe("PodGroup", "ADDED", {"metadata": {"namespace": "ns", "name": "pg"}})
    writer.observe("PodGroup", "ADDED", {"metadata": {"namespace": "ns", "name": "gone"}})
    desired = {("ns", "pg"): {"phase": "Inqueue"}, ("ns", "gone"): {"phase": "Inqueue"}}
    assert asyncio.run(writer.write_podgroups(desired)) == 1
    assert server.objects["pg"]["status"] == {"phase": "Inqueue"}
    assert writer.failed_writes == 0 and failed == []  # the gone one is no failure
    broken = _Failing(subresource=False)
    writer = StatusWriter(broken, on_failed=failed.append)  # type: ignore[arg-type]
    writer.observe("PodGroup", "ADDED", {"metadata": {"namespace": "ns", "name": "pg"}})
    assert asyncio.run(writer.write_podgroups({("ns", "pg"): {"phase": "Inqueue"}})) == 0
    assert writer.failed_writes == 1 and failed == ["PodGroup"]


def test_the_controllers_write_through_the_object() -> None:
    server = Apiserver(subresource=False, discovery=False)
    server.add("pg")
    ref = ObjectRef(PG.api_version, "PodGroup", "ns", "pg", "uid-1")
    gone = ObjectRef(PG.api_version, "PodGroup", "ns", "gone", "uid-2")
    actions = [PatchStatus(ref, {"phase": "Completed"}), PatchStatus(gone, {"phase": "Completed"})]
    writes = asyncio.run(apply_actions(server, actions, component="test"))  # type: ignore[arg-type]
    assert writes == 1
    assert server.objects["pg"]["status"] == {"phase": "Completed"}
