"""Unit tests of batch.kube pieces that need no API server."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from batch.kube.client import RESOURCES
from batch.kube.config import KubeConfigError, load_access
from batch.kube.metrics import SchedulerMetrics
from batch.kube.status import status_patch


def test_status_patch_only_changed_fields() -> None:
    current = {"phase": "Inqueue", "running": 0, "conditions": []}
    assert status_patch(current, {"phase": "Inqueue", "running": 0}) == {}
    assert status_patch(current, {"phase": "Running", "running": 4}) == {
        "phase": "Running",
        "running": 4,
    }
    assert status_patch(None, {"phase": "Pending"}) == {"phase": "Pending"}


def test_status_patch_ignores_condition_timestamps() -> None:
    old = [
        {
            "type": "Unschedulable",
            "status": "True",
            "reason": "NotEnoughResources",
            "message": "3/4 tasks in gang unschedulable",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "transitionID": "a",
        }
    ]
    new = [{**old[0], "lastTransitionTime": "2026-01-01T00:00:05Z", "transitionID": "b"}]
    assert status_patch({"conditions": old}, {"conditions": new}) == {}
    changed = [{**new[0], "message": "2/4 tasks in gang unschedulable"}]
    assert status_patch({"conditions": old}, {"conditions": changed}) == {"conditions": changed}


def test_resource_paths() -> None:
    pod = RESOURCES["Pod"]
    assert (
        pod.path(namespace="ns", name="p", sub="binding") == "/api/v1/namespaces/ns/pods/p/binding"
    )
    assert pod.path() == "/api/v1/pods"
    queue = RESOURCES["Queue"]
    assert queue.path(name="q1", sub="status") == (
        "/apis/scheduling.volcano.sh/v1beta1/queues/q1/status"
    )
    pg = RESOURCES["PodGroup"]
    assert (
        pg.path(namespace="a b") == "/apis/scheduling.volcano.sh/v1beta1/namespaces/a%20b/podgroups"
    )


def _kubeconfig(tmp_path: Path, cluster: dict[str, object], user: dict[str, object]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "ns1"}}],
        "clusters": [{"name": "k", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_token_over_http(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, {"server": "http://127.0.0.1:1234/"}, {"token": "abc"})
    access = load_access(path)
    assert access.server == "http://127.0.0.1:1234"
    assert access.headers["Authorization"] == "Bearer abc"
    assert access.ssl_context is None
    assert access.namespace == "ns1"


def test_kubeconfig_basic_auth_and_insecure_https(tmp_path: Path) -> None:
    path = _kubeconfig(
        tmp_path,
        {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
        {"username": "admin", "password": "pw"},
    )
    access = load_access(path)
    assert access.ssl_context is not None
    expected = base64.b64encode(b"admin:pw").decode()
    assert access.headers["Authorization"] == f"Basic {expected}"


def test_kubeconfig_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="cannot read kubeconfig"):
        load_access(tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.write_text("{: not yaml")
    with pytest.raises(KubeConfigError, match="not valid YAML"):
        load_access(bad)
    path = _kubeconfig(tmp_path, {}, {})
    with pytest.raises(KubeConfigError, match="no server"):
        load_access(path)


def test_metrics_use_volcano_names() -> None:
    metrics = SchedulerMetrics()
    metrics.schedule_attempts.labels(result="scheduled").inc()
    metrics.set_queue_resources("allocated", "q1", {"cpu": 2000, "nvidia.com/gpu": 8000})
    text = metrics.render().decode()
    assert "volcano_schedule_attempts_total" in text
    assert 'volcano_queue_allocated_milli_cpu{queue_name="q1"} 2000.0' in text
    assert (
        'volcano_queue_allocated_scalar_resources{queue_name="q1",resource="nvidia.com/gpu"} 8000.0'
        in text
    )
    assert "volcano_e2e_scheduling_latency_milliseconds_bucket" in text


class _FlakyClient:
    """Answers status patches; the first `fail` of them fail with a 500."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.patches: list[tuple[str, dict[str, object]]] = []

    async def patch(self, res: object, name: str, body: dict[str, object], **_: object) -> dict:
        if self.fail:
            self.fail -= 1
            from batch.kube.client import ApiError

            raise ApiError(500, {"message": "injected"}, "PATCH")
        self.patches.append((name, body))
        return {}


def test_a_failed_status_write_is_retried_with_the_next_identical_decision() -> None:
    import asyncio

    from batch.kube.status import StatusWriter

    client = _FlakyClient(fail=1)
    writer = StatusWriter(client)  # type: ignore[arg-type]
    writer.observe("PodGroup", "ADDED", {"metadata": {"namespace": "ns", "name": "pg"}})
    desired = {("ns", "pg"): {"phase": "Inqueue"}}
    assert asyncio.run(writer.write_podgroups(desired)) == 0  # the write failed
    assert writer.failed_writes == 1
    assert asyncio.run(writer.write_podgroups(desired)) == 1  # ... so it is made again
    assert client.patches == [("pg", {"status": {"phase": "Inqueue"}})]
    assert asyncio.run(writer.write_podgroups(desired)) == 0  # and then not again


class _DownClient:
    """Every request fails, as during a network partition."""

    gets = 0

    async def get(self, *_: object, **__: object) -> dict:
        self.gets += 1
        raise OSError("connection refused")


def test_a_leader_that_cannot_renew_stops_before_its_lease_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On virtual time: the elector's clock moves only when it sleeps, so the moment it gives
    up is measured in the lease's seconds, whatever the machine's load."""
    import asyncio

    import batch.kube.leader as leader_module
    from batch.kube.leader import LeaderElector
    from tests.kube.test_leadership import _Clock

    clock, real_sleep, down = _Clock(), asyncio.sleep, _DownClient()

    async def virtual_sleep(seconds: float) -> None:
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr(leader_module.asyncio, "sleep", virtual_sleep)
    elector = LeaderElector(
        down,  # type: ignore[arg-type]
        name="l",
        namespace="ns",
        identity="me",
        lease_seconds=1,
        renew_seconds=0.1,
        clock=clock,
    )
    elector.is_leader = True
    elector._renewed_at = 0.0
    asyncio.run(asyncio.wait_for(elector.hold(), 5))
    assert elector.lost.is_set() and not elector.is_leader
    # a standby may take the Lease 1 s after the last renewal; the leader gave up before that,
    # by its renew deadline, after retrying the failed renewals until then
    assert clock.now <= elector.renew_deadline < elector.lease_seconds, clock.now
    assert down.gets >= 2, down.gets


def test_status_patch_removes_keys_that_left_a_map() -> None:
    """A resource whose allocation fell to zero leaves `allocated`: the merge patch must send
    null for it, or the server keeps the old figure (issue 15, item 1)."""
    current = {"allocated": {"cpu": "2", "memory": "0", "nvidia.com/gpu": "2"}, "running": 1}
    desired = {"allocated": {"cpu": "0", "memory": "0"}, "running": 0}
    assert status_patch(current, desired) == {
        "allocated": {"cpu": "0", "nvidia.com/gpu": None},
        "running": 0,
    }


def test_a_written_removal_is_not_written_again() -> None:
    import asyncio

    from batch.kube.status import StatusWriter

    client = _FlakyClient(fail=0)
    writer = StatusWriter(client)  # type: ignore[arg-type]
    status = {"allocated": {"cpu": "1", "nvidia.com/gpu": "2"}, "state": "Open"}
    writer.observe("Queue", "ADDED", {"metadata": {"name": "q"}, "status": status})
    desired = {"q": {"allocated": {"cpu": "0"}}}
    assert asyncio.run(writer.write_queues(desired)) == 1
    assert client.patches == [
        ("q", {"status": {"allocated": {"cpu": "0", "nvidia.com/gpu": None}}})
    ]
    assert writer.queues["q"] == {"allocated": {"cpu": "0"}, "state": "Open"}
    assert asyncio.run(writer.write_queues(desired)) == 0


def test_a_resource_that_left_a_queue_reads_zero_in_metrics() -> None:
    metrics = SchedulerMetrics()
    metrics.set_queue_resources("allocated", "q", {"cpu": 1000, "nvidia.com/gpu": 2000})
    metrics.set_queue_resources("allocated", "q", {"cpu": 0})
    text = metrics.render().decode()
    gpu = 'volcano_queue_allocated_scalar_resources{queue_name="q",resource="nvidia.com/gpu"}'
    assert f"{gpu} 0.0" in text, text
