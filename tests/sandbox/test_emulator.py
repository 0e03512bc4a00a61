"""Contract: the node emulator runs bound pods like a kubelet (phases, exit codes, capacity).

Every test runs twice: with the sandbox's in-process emulator, and with the same kubelet logic
over HTTP (`batch.sandbox.emulator_http`, what runs against a real kube-apiserver) attached to a
sandbox started without its own emulator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client

from batch.kube.config import ClusterAccess
from batch.sandbox.emulator import Kubelets
from batch.sandbox.emulator_http import EmulatorThread, HttpTransport
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import FaultOptions, SandboxOptions
from batch.sandbox.store import Obj
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

from .helpers import bind, http, pod

RUN = "sandbox.tephra.io/run-seconds"
EXIT = "sandbox.tephra.io/exit-code"


@pytest.fixture(scope="module", params=["in-process", "http"])
def sb(request: pytest.FixtureRequest) -> Iterator[SandboxHandle]:
    nodes = make_nodes(count=3, gpus=8, cpu="16", memory="64Gi", racks=2)
    over_http = request.param == "http"
    opts = SandboxOptions(max_grace_seconds=0.5, emulator=not over_http)
    with run_sandbox(nodes=nodes, options=opts) as handle:
        if not over_http:
            yield handle
            return
        emulator = EmulatorThread(ClusterAccess(handle.url), max_grace_seconds=0.5).start()
        try:
            names = [n["metadata"]["name"] for n in nodes]
            emulator.wait_schedulable(names)
            yield handle
        finally:
            emulator.stop()


def _phase(v1: Any, name: str) -> str:
    return str(v1.read_namespaced_pod(name, "default").status.phase)


def test_nodes_ready_with_lease(api: Any) -> None:
    v1 = client.CoreV1Api(api)
    node = v1.read_node("node-0")
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert ready.status == "True"
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["topology.tephra.io/rack"] == "rack-0"
    assert node.status.node_info.kubelet_version
    lease = client.CoordinationV1Api(api).read_namespaced_lease("node-0", "kube-node-lease")
    assert lease.spec.renew_time is not None


def test_node_created_through_api_becomes_ready(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_node(
        {"metadata": {"name": "late"}, "status": {"capacity": {"cpu": "2", "memory": "1Gi"}}}
    )
    wait_for(
        lambda: any(
            c.type == "Ready" and c.status == "True"
            for c in (v1.read_node("late").status.conditions or [])
        )
    )
    v1.delete_node("late")


def test_running_pod_status(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod("default", pod("runner"))
    bind(sb.url, "default", "runner", "node-0")
    wait_for(lambda: _phase(v1, "runner") == "Running")
    p = v1.read_namespaced_pod("runner", "default")
    assert p.status.pod_ip and p.status.host_ip and p.status.start_time is not None
    cs = p.status.container_statuses[0]
    assert cs.ready and cs.state.running is not None and cs.restart_count == 0
    assert any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)
    time.sleep(0.3)
    assert _phase(v1, "runner") == "Running"  # no annotation: runs until deleted


def test_exit_codes_and_restart_policies(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    cases = {
        "ok-never": ({RUN: "0.1"}, "Never"),
        "fail-never": ({RUN: "0.1", EXIT: "3"}, "Never"),
        "fail-onfailure": ({RUN: "0.1", EXIT: "1"}, "OnFailure"),
        "ok-onfailure": ({RUN: "0.1"}, "OnFailure"),
        "ok-always": ({RUN: "0.1"}, "Always"),
    }
    for name, (ann, policy) in cases.items():
        v1.create_namespaced_pod("default", pod(name, annotations=ann, restart=policy))
        bind(sb.url, "default", name, "node-1")
    wait_for(lambda: _phase(v1, "ok-never") == "Succeeded")
    wait_for(lambda: _phase(v1, "fail-never") == "Failed")
    wait_for(lambda: _phase(v1, "ok-onfailure") == "Succeeded")
    term = v1.read_namespaced_pod("fail-never", "default").status.container_statuses[0]
    assert term.state.terminated.exit_code == 3 and term.state.terminated.reason == "Error"
    ok = v1.read_namespaced_pod("ok-never", "default").status.container_statuses[0]
    assert ok.state.terminated.exit_code == 0 and ok.state.terminated.reason == "Completed"

    def restarts(name: str) -> int:
        return int(
            v1.read_namespaced_pod(name, "default").status.container_statuses[0].restart_count
        )

    wait_for(lambda: restarts("fail-onfailure") >= 2)
    wait_for(lambda: restarts("ok-always") >= 2)
    p = v1.read_namespaced_pod("fail-onfailure", "default")
    assert p.status.phase == "Running"
    assert p.status.container_statuses[0].last_state.terminated.exit_code == 1
    for name in cases:
        v1.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_out_of_resource(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    big = pod("too-big", cpu="17")  # node has 16 cpu
    v1.create_namespaced_pod("default", big)
    bind(sb.url, "default", "too-big", "node-2")
    wait_for(lambda: _phase(v1, "too-big") == "Failed")
    p = v1.read_namespaced_pod("too-big", "default")
    assert p.status.reason == "OutOfcpu" and "cpu" in p.status.message
    events = v1.list_namespaced_event(
        "default", field_selector="involvedObject.name=too-big,reason=OutOfcpu"
    ).items
    assert len(events) == 1 and events[0].type == "Warning"
    assert events[0].source.component == "kubelet"
    # named as kubelet names it: `kubectl describe pod` selects events by uid too
    assert events[0].involved_object.uid == p.metadata.uid
    assert events[0].involved_object.resource_version
    gpu = pod("gpu-hog")
    gpu["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "9"}}
    v1.create_namespaced_pod("default", gpu)
    bind(sb.url, "default", "gpu-hog", "node-2")
    wait_for(lambda: _phase(v1, "gpu-hog") == "Failed")
    assert v1.read_namespaced_pod("gpu-hog", "default").status.reason == "OutOfnvidia.com/gpu"
    # two pods of 5 GPUs each on an 8-GPU node: the second is rejected
    for name in ("g5-a", "g5-b"):
        p5 = pod(name)
        p5["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "5"}}
        v1.create_namespaced_pod("default", p5)
        bind(sb.url, "default", name, "node-2")
    wait_for(lambda: _phase(v1, "g5-b") == "Failed")
    assert _phase(v1, "g5-a") == "Running"
    v1.delete_namespaced_pod("g5-a", "default", grace_period_seconds=0)


def test_graceful_deletion_capped(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    p = pod("graceful", extra={"terminationGracePeriodSeconds": 60})
    v1.create_namespaced_pod("default", p)
    bind(sb.url, "default", "graceful", "node-0")
    wait_for(lambda: _phase(v1, "graceful") == "Running")
    v1.delete_namespaced_pod("graceful", "default")
    terminating = v1.read_namespaced_pod("graceful", "default")
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 60
    path = "/api/v1/namespaces/default/pods/graceful"
    # liveness only (the 60 s asked would not do); the event below shows the grace applied
    wait_for(lambda: http(sb.url, "GET", path)[0] == 404, "the pod deleted", timeout=30)
    killing = "involvedObject.name=graceful,reason=Killing"
    events = wait_for(lambda: v1.list_namespaced_event("default", field_selector=killing).items)
    assert [e.message for e in events] == [
        "Stopping container main with a grace of 0.5 s (60 s asked, capped at 0.5 s)"
    ], events
    # an unbound pod is deleted at once
    v1.create_namespaced_pod("default", pod("unbound"))
    v1.delete_namespaced_pod("unbound", "default")
    assert http(sb.url, "GET", "/api/v1/namespaces/default/pods/unbound")[0] == 404


def test_pod_bound_before_its_node_runs_when_the_node_appears(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod("default", pod("early"))
    assert bind(sb.url, "default", "early", "not-yet")[0] == 201
    time.sleep(0.2)
    assert _phase(v1, "early") == "Pending"
    v1.create_node(
        {"metadata": {"name": "not-yet"}, "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}
    )
    wait_for(lambda: _phase(v1, "early") == "Running")
    v1.delete_namespaced_pod("early", "default", grace_period_seconds=0)
    v1.delete_node("not-yet")


def test_deleted_pod_with_finalizer_records_termination(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    p = pod("held", extra={"terminationGracePeriodSeconds": 1})
    p["metadata"]["finalizers"] = ["tests.tephra.io/hold"]
    v1.create_namespaced_pod("default", p)
    bind(sb.url, "default", "held", "node-1")
    wait_for(lambda: _phase(v1, "held") == "Running")
    v1.delete_namespaced_pod("held", "default")
    wait_for(lambda: _phase(v1, "held") == "Failed")
    held = v1.read_namespaced_pod("held", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.status.container_statuses[0].state.terminated.exit_code == 143
    v1.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    wait_for(lambda: http(sb.url, "GET", "/api/v1/namespaces/default/pods/held")[0] == 404)


def test_http_emulator_rides_out_failing_writes() -> None:
    """With a third of its writes answered 500 or 429 (and watches cut every second), the HTTP
    emulator still makes every Node Ready and runs every bound pod to Succeeded."""
    faults = FaultOptions(error_rate=0.25, throttle_rate=0.1, drop_watch_every=1.0, seed=7)
    opts = SandboxOptions(emulator=False, install_crds=False, faults=faults)
    with run_sandbox(options=opts) as handle:
        handle.apply(*make_nodes(count=3, cpu="8"))
        emulator = EmulatorThread(ClusterAccess(handle.url), heartbeat_seconds=0.5).start()
        try:
            emulator.wait_schedulable([f"node-{i}" for i in range(3)], timeout=30)
            names = [f"flaky-{i}" for i in range(12)]
            handle.apply(*(pod(n, annotations={RUN: "0.2"}) for n in names))
            for i, name in enumerate(names):
                target = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name},
                    "target": {"kind": "Node", "name": f"node-{i % 3}"},
                }
                handle.call(lambda n=name, t=target: handle.core.bind("default", n, t))

            def phases() -> list[str]:
                core = handle.core
                rt = core.rt("", "v1", "pods")
                return [
                    str((core.find(rt, "default", n) or {}).get("status", {}).get("phase"))
                    for n in names
                ]

            wait_for(
                lambda: all(p == "Succeeded" for p in handle.call(phases)),
                "all Succeeded",
                timeout=60,
                explain=lambda: handle.call(phases),
            )
        finally:
            emulator.stop()


def test_http_emulator_with_a_node_selector_leaves_other_nodes_alone() -> None:
    """Like kwok's node selection: one emulator is the kubelet of the labelled Nodes only; a
    pod bound elsewhere is neither run nor finally deleted by it."""
    opts = SandboxOptions(emulator=False, install_crds=False, max_grace_seconds=0.2)
    with run_sandbox(options=opts) as handle:
        ours = make_nodes(count=1, prefix="ours", labels={"kubelet": "emulated"})
        handle.apply(*ours, *make_nodes(count=1, prefix="theirs"))
        access = ClusterAccess(handle.url)
        emulator = EmulatorThread(access, max_grace_seconds=0.2, node_selector="kubelet=emulated")
        emulator.start()
        try:
            emulator.wait_schedulable(["ours-0"], timeout=30)
            handle.apply(pod("mine"), pod("other"))
            bind(handle.url, "default", "mine", "ours-0")
            bind(handle.url, "default", "other", "theirs-0")
            v1 = client.CoreV1Api(handle.api_client())
            wait_for(lambda: _phase(v1, "mine") == "Running")
            v1.delete_namespaced_pod("other", "default")
            time.sleep(0.6)
            assert _phase(v1, "other") == "Pending"  # not run, and still there: not ours
            theirs = v1.read_node("theirs-0")
            assert not theirs.status.conditions
        finally:
            emulator.stop()


class _Outage:
    """A kubelet transport whose API server is unreachable while `down` (writes raise, as
    `HttpTransport` does once its retries are spent)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.inner, name)

        async def wrapped(*args: Any) -> Any:
            if self.down:
                self.refused += 1
                raise ConnectionRefusedError("API server unreachable")
            return await call(*args)

        return wrapped


def test_completions_and_deletions_are_synced_after_an_outage() -> None:
    """Issue 30.9: a pod that finished (or was deleted) while the API server was unreachable
    longer than the write retries stayed Running for ever; the kubelet keeps what it has to
    say and writes it once the server answers again, as a kubelet's status manager does."""
    opts = SandboxOptions(max_grace_seconds=0.1)
    with run_sandbox(nodes=make_nodes(count=1, cpu="8"), options=opts) as handle:
        kubelets = handle.sandbox.emulator.kubelets
        outage = _Outage(kubelets.transport)
        kubelets.transport = outage
        v1 = client.CoreV1Api(handle.api_client())
        handle.apply(pod("finishes", annotations={RUN: "0.3"}), pod("deleted"))
        bind(handle.url, "default", "finishes", "node-0")
        bind(handle.url, "default", "deleted", "node-0")
        wait_for(lambda: {_phase(v1, "finishes"), _phase(v1, "deleted")} == {"Running"})
        outage.down = True
        v1.delete_namespaced_pod("deleted", "default")
        wait_for(lambda: outage.refused >= 2, "the completion and the deletion refused")
        assert _phase(v1, "finishes") == "Running"
        outage.down = False
        wait_for(lambda: _phase(v1, "finishes") == "Succeeded", "completion synced", timeout=30)
        wait_for(
            lambda: http(handle.url, "GET", "/api/v1/namespaces/default/pods/deleted")[0] == 404,
            "deletion synced",
            timeout=30,
        )


class _Pool:
    """A stand-in `KubeClient` that records its calls; `held` blocks them (a pool whose every
    connection is taken by writes the apiserver is slow to answer)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.held = asyncio.Event()
        self.held.set()

    async def _call(self, verb: str, res: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(f"{verb} {res.plural}{'/' + kwargs['sub'] if 'sub' in kwargs else ''}")
        await self.held.wait()
        return {}

    async def patch(self, res: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._call("PATCH", res, *args, **kwargs)

    async def create(self, res: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._call("POST", res, *args, **kwargs)

    async def delete(self, res: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._call("DELETE", res, *args, **kwargs)


def test_node_heartbeats_have_a_pool_of_their_own() -> None:
    """A flood of pod status writes holding every connection of the emulator's pool does not
    hold back its Lease renewals and Node statuses: those go over a pool of their own, as each
    real kubelet has its own connection (otherwise the Leases lapse under a bind flood and the
    node lifecycle controller marks the Nodes NotReady)."""
    pods, nodes = _Pool(), _Pool()
    transport = HttpTransport(cast(Any, pods), cast(Any, nodes))
    pods.held.clear()

    async def flood_then_heartbeat() -> None:
        flood = [
            asyncio.create_task(transport.pod_status("default", f"p{i}", "u", {})) for i in range(3)
        ]
        await asyncio.sleep(0)
        spec = {"holderIdentity": "node-0"}
        await asyncio.wait_for(transport.renew_lease("node-0", "n", spec), 5)  # created
        await asyncio.wait_for(transport.renew_lease("node-0", "n", spec), 5)  # renewed
        await asyncio.wait_for(transport.node_status("node-0", "n", {}), 5)
        await asyncio.wait_for(transport.delete_lease("node-0"), 5)
        assert not any(t.done() for t in flood)  # the pod writes are still held
        pods.held.set()
        await asyncio.gather(*flood)

    asyncio.run(flood_then_heartbeat())
    assert nodes.calls == [
        "POST leases",
        "PATCH leases",
        "PATCH nodes/status",
        "DELETE leases",
    ]
    assert pods.calls == ["PATCH pods/status"] * 3


def test_one_client_carries_everything_without_a_node_pool() -> None:
    pool = _Pool()
    transport = HttpTransport(cast(Any, pool))
    asyncio.run(transport.renew_lease("node-0", "n", {}))
    asyncio.run(transport.pod_status("default", "p", "u", {}))
    assert pool.calls == ["POST leases", "PATCH pods/status"]


class _Heartbeats:
    """A kubelet transport whose Lease renewals wait until `want` of them are in flight at once."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.in_flight = 0
        self.most = 0
        self.all_in = asyncio.Event()

    async def node_status(self, name: str, uid: str, patch: Obj) -> Obj:
        return {"metadata": {"name": name, "uid": uid}, "status": patch}

    async def renew_lease(self, name: str, node_uid: str, spec: Obj) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.want:
            self.all_in.set()
        await self.all_in.wait()
        self.in_flight -= 1


def test_every_nodes_heartbeat_goes_out_at_once() -> None:
    """The heartbeats of a round are not sent 64 at a time, each batch waiting for its slowest
    answer (1,000 Nodes' rounds took several times the period behind a loaded apiserver and
    Leases lapsed): all go out together and the transport's connection pool bounds them."""
    nodes = 200
    transport = _Heartbeats(want=nodes)
    kubelets = Kubelets(cast(Any, transport), heartbeat_seconds=0.01)

    async def beat() -> None:
        kubelets.start(asyncio.get_running_loop())
        for i in range(nodes):
            kubelets.on_node("ADDED", {"metadata": {"name": f"node-{i}", "uid": f"u{i}"}})
        await kubelets.idle()  # each Node posted and its Lease created: one at a time here
        transport.all_in.clear()
        transport.most = 0
        try:
            await asyncio.wait_for(transport.all_in.wait(), 30)
        finally:
            await kubelets.shutdown()

    asyncio.run(beat())
    assert transport.most == nodes
