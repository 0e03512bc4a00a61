"""The scheduler's writes per single pod are bounded: one bind, one PodGroup status, the pod's
`Scheduled` event and its PodGroup's "pod group is ready" event.

Issue 33, item 4: on a real API server Tephra bound single pods at 0.6x kube-scheduler's rate.
Every single-pod PodGroup was written twice (Inqueue at allocation, Running once bound) while
its bind was still on the wire, and the API server spent on those writes what the binds
needed. This counts requests, not seconds: a regression shows up as more writes per pod
whatever the machine's speed. The emulated kubelets are off, so no pod ever runs and the
PodGroups' `running` counts never change after they are bound: every write counted is one
the scheduler chose to make.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from batch.kube.client import KubeClient
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.protobuf import decode_protobuf
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.kube.test_service import GROUP, pod, podgroup
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("kube-requests")

PODS = 40


@pytest.fixture
def requests_by_server(monkeypatch: pytest.MonkeyPatch) -> dict[str, Counter[str]]:
    """Every KubeClient's requests other than reads, by API server (host:port) and "VERB what".
    Keyed by server: a previous test's components still stopping in this worker process make
    requests too, to their own sandbox."""
    by_server: defaultdict[str, Counter[str]] = defaultdict(Counter)
    request = KubeClient.request

    async def counted(self: KubeClient, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method not in ("GET", "LIST", "WATCH"):
            by_server[urlsplit(self.access.server).netloc][f"{method} {_what(path)}"] += 1
        return await request(self, method, path, **kw)

    monkeypatch.setattr(KubeClient, "request", counted)
    return by_server


def _what(path: str) -> str:
    parts = path.split("?", maxsplit=1)[0].strip("/").split("/")
    if parts[-1] in ("binding", "status"):
        return f"{parts[-3]}/{parts[-1]}"
    plurals = [p for p in parts if p in ("pods", "podgroups", "queues", "events")]
    return plurals[-1] if plurals else path


@pytest.fixture
def sandbox(requests_by_server: dict[str, Counter[str]]) -> Iterator[SandboxHandle]:
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.1))
    nodes = make_nodes(count=2, gpus=0, cpu="64", memory="256Gi")
    for node in nodes:  # Ready for good: no emulated kubelet renews them
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    with run_sandbox(
        nodes=nodes,
        components=[scheduler],
        options=SandboxOptions(emulator=False),
    ) as sb:
        yield sb


def _settled(sb: SandboxHandle) -> bool:
    """Every pod bound, every PodGroup Running and both events of every pod posted."""
    api = sb.api_client()
    pods = client.CoreV1Api(api).list_namespaced_pod("default").items
    if len(pods) < PODS or not all(p.spec.node_name for p in pods):
        return False
    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups"
    )["items"]
    if not all((g.get("status") or {}).get("phase") == "Running" for g in groups):
        return False
    events = client.CoreV1Api(api).list_namespaced_event("default").items
    reasons = Counter((e.involved_object.kind, e.reason) for e in events)
    return reasons[("Pod", "Scheduled")] >= PODS and reasons[("PodGroup", "Scheduled")] >= PODS


def _state(sb: SandboxHandle, writes: Counter[str]) -> dict[str, Any]:
    api = sb.api_client()
    pods = client.CoreV1Api(api).list_namespaced_pod("default").items
    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups"
    )["items"]
    events = client.CoreV1Api(api).list_namespaced_event("default").items
    return {
        "bound": sum(1 for p in pods if p.spec.node_name),
        "phases": Counter((g.get("status") or {}).get("phase") for g in groups),
        "events": Counter((e.involved_object.kind, e.reason) for e in events),
        "writes": dict(writes),
    }


def test_a_single_pod_costs_one_bind_one_podgroup_write_and_two_events(
    sandbox: SandboxHandle, requests_by_server: dict[str, Counter[str]]
) -> None:
    writes = requests_by_server[urlsplit(sandbox.url).netloc]
    # The pods first, seen by the scheduler: a session that saw a PodGroup before its pod would
    # rightly call it unschedulable (one more status, one more event), not what is counted here.
    api = sandbox.api_client()
    for i in range(PODS):
        client.CoreV1Api(api).create_namespaced_pod(
            "default", pod(f"single-{i:03d}", f"single-{i:03d}", 0)
        )
    scheduler = sandbox.components[0]
    assert isinstance(scheduler, SchedulerComponent) and scheduler.service is not None
    cache = scheduler.service.cache
    wait_for(lambda: len(cache.tasks) >= PODS, what="the scheduler's cache to hold every pod")
    for i in range(PODS):
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, "v1beta1", "default", "podgroups", podgroup(f"single-{i:03d}", 1)
        )
    wait_for(
        lambda: _settled(sandbox),
        what="every pod bound and reported",
        timeout=60,
        explain=lambda: _state(sandbox, writes),
    )
    assert writes["POST pods/binding"] == PODS, writes
    # One status per PodGroup: Running, with the Scheduled condition. Not Inqueue first while
    # its bind was on the wire (that was one more write per pod).
    assert writes["PATCH podgroups"] + writes["PATCH podgroups/status"] <= PODS, writes
    assert writes["POST events"] == 2 * PODS, writes  # Scheduled (pod), pod group is ready
    per_pod = sum(n for what, n in writes.items() if "queues" not in what) / PODS
    assert per_pod <= 4, writes


BIND_WORKERS = 2


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scheduler's binds and pods' Scheduled events, in the order their answers came."""
    done: list[str] = []
    request = KubeClient.request

    async def logged(self: KubeClient, method: str, path: str, **kw: Any) -> dict[str, Any]:
        answer = await request(self, method, path, **kw)
        body = kw.get("body") or {}
        if isinstance(body, bytes):  # a protobuf Binding or Event (the scheduler's default)
            body = decode_protobuf(body)
        if path.endswith("/binding"):
            done.append("bind")
        elif _what(path) == "events" and (body.get("involvedObject") or {}).get("kind") == "Pod":
            done.append(str(body.get("reason")))
        return answer

    monkeypatch.setattr(KubeClient, "request", logged)
    return done


def test_scheduled_events_keep_pace_with_the_binds(answers: list[str]) -> None:
    """Issue 33: with thousands of binds queued, pods' Scheduled events trailed them by minutes
    (45 s after the last of 20,000 binds, 0.05 a pod had been posted). A bind's worker posts
    its pod's event once the bind is answered, so at any moment the binds answered are ahead of
    the events by at most one a worker. Counts only."""
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.1))
    scheduler.options.bind_concurrency = BIND_WORKERS
    nodes = make_nodes(count=2, gpus=0, cpu="64", memory="256Gi")
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    with run_sandbox(
        nodes=nodes, components=[scheduler], options=SandboxOptions(emulator=False)
    ) as sb:
        api = sb.api_client()
        for i in range(PODS):
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                GROUP, "v1beta1", "default", "podgroups", podgroup(f"single-{i:03d}", 1)
            )
            client.CoreV1Api(api).create_namespaced_pod(
                "default", pod(f"single-{i:03d}", f"single-{i:03d}", 0)
            )
        wait_for(
            lambda: answers.count("Scheduled") >= PODS,
            what="every pod's Scheduled event",
            timeout=60,
            explain=lambda: Counter(answers),
        )
    assert answers.count("bind") == PODS, Counter(answers)
    ahead = [
        answers[: i + 1].count("bind") - answers[: i + 1].count("Scheduled")
        for i in range(len(answers))
    ]
    assert max(ahead) <= BIND_WORKERS, ahead
