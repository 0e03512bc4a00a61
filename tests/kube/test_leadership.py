"""A scheduler replica acts only while its leadership is current (issue 30, item 3).

A leader paused past its lease (SIGSTOP, a long GC, a starved VM) wakes up believing it still
leads: nothing told it otherwise, since no API call failed. Meanwhile a standby has taken the
Lease and used the room its binds were meant for. Like client-go's leader election, a replica
sends a bind, an eviction or a status write only while its last successful renewal is younger
than the lease duration on a monotonic clock, and drops decisions of a session made before its
leadership lapsed.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from kubernetes import client

from batch.kube.binder import Evictor, EvictRequest
from batch.kube.client import ApiError
from batch.kube.dispatch import Dropped, InFlight
from batch.kube.leader import LeaderElector
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from batch.scheduler.framework.decisions import Decisions
from tests.kube.test_service import GROUP, pod, podgroup
from tests.waiting import wait_for

LEASE = "tephra-scheduler"


class _Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Leases:
    """One Lease in memory, with the API server's optimistic concurrency."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    async def get(self, _res: object, name: str, namespace: str | None = None) -> dict[str, Any]:
        if self.lease is None:
            raise ApiError(404, {"reason": "NotFound"}, f"lease {namespace}/{name}")
        return copy.deepcopy(self.lease)

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(obj)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    async def create(self, _res: object, obj: dict[str, Any], _ns: str | None = None) -> Any:
        if self.lease is not None:
            raise ApiError(409, {"reason": "AlreadyExists"}, "create lease")
        return self._store(obj)

    async def replace(self, _res: object, obj: dict[str, Any]) -> dict[str, Any]:
        assert self.lease is not None
        if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict"}, "replace lease")
        return self._store(obj)

    def give_to(self, identity: str) -> None:
        """Another replica took the Lease and let it expire."""
        assert self.lease is not None
        self.lease["spec"]["holderIdentity"] = identity
        self.lease["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"
        self.lease["metadata"]["resourceVersion"] = str(self.version + 1)
        self.version += 1


def _elector(leases: _Leases, clock: _Clock, **timings: Any) -> LeaderElector:
    return LeaderElector(
        leases,  # type: ignore[arg-type]
        name=LEASE,
        namespace="default",
        identity="replica-a",
        clock=clock,
        **timings,
    )


class _Binds:
    """Binds that answer at once; records which were sent and which were dropped."""

    def __init__(self, flight: InFlight) -> None:
        self.flight = flight
        self.sent: list[str] = []
        self.dropped: list[str] = []

    def submit(self, pod: str, guard: Callable[[], bool]) -> None:
        async def send() -> None:
            self.sent.append(pod)

        self.flight.submit(send, lambda: self.dropped.append(pod), guard=guard, kind="bind")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_bind_after_the_lease_lapsed_is_dropped_until_a_renewal() -> None:
    async def main() -> None:
        clock, leases = _Clock(), _Leases()
        elector = _elector(leases, clock, lease_seconds=15)
        await elector.acquire()  # renewed at t=0
        reported: list[Mapping[str, int]] = []
        flight = InFlight(workers=1, limit=10, on_dropped=reported.append)
        binds = _Binds(flight)
        session = elector.fence()
        clock.now = 14.0
        binds.submit("in-time", session)
        await _settle()
        clock.now = 16.0  # no renewal since t=0: the lease may be another replica's by now
        assert not elector.current()
        binds.submit("late", session)
        await _settle()
        assert binds.sent == ["in-time"] and binds.dropped == ["late"]
        assert reported == [{"bind": 1}]
        assert await elector.try_acquire_or_renew(renew_only=True)  # renewed at t=16
        assert elector.current()
        assert not session(), "a session decided before the lapse must stay dropped"
        binds.submit("after-renewal", elector.fence())
        await _settle()
        assert binds.sent == ["in-time", "after-renewal"]
        await flight.close(0.0)

    asyncio.run(main())


def test_renewals_in_time_keep_one_term() -> None:
    async def main() -> None:
        clock, leases = _Clock(), _Leases()
        elector = _elector(leases, clock, lease_seconds=15)
        await elector.acquire()
        session = elector.fence()
        for t in (10.0, 20.0, 30.0):
            clock.now = t
            assert await elector.try_acquire_or_renew(renew_only=True)
        clock.now = 44.0
        assert session() and elector.current()

    asyncio.run(main())


def test_renewing_never_takes_a_lease_another_replica_held_meanwhile() -> None:
    """Even expired, a Lease someone else held since the last renewal means they may have
    bound meanwhile: leadership is lost, not re-acquired."""

    async def main() -> None:
        clock, leases = _Clock(), _Leases()
        elector = _elector(leases, clock, lease_seconds=15, renew_seconds=0.01)
        await elector.acquire()
        leases.give_to("replica-b")
        await asyncio.wait_for(elector.hold(), 5)
        assert elector.lost.is_set() and not elector.current()
        assert leases.lease is not None
        assert leases.lease["spec"]["holderIdentity"] == "replica-b"

    asyncio.run(main())


def _replica(identity: str) -> SchedulerComponent:
    return SchedulerComponent(
        SchedulerOptions(
            schedule_period=0.1,
            leader_elect=True,
            lease_namespace="default",
            identity=identity,
            lease_seconds=4,
            renew_seconds=0.5,
        )
    )


def _submit(sb: SandboxHandle, name: str, gpus: int, priority_class: str | None = None) -> None:
    group, member = podgroup(name, 1), pod(f"{name}-0", name, gpus)
    if priority_class:
        group["spec"]["priorityClassName"] = priority_class
        member["spec"]["priorityClassName"] = priority_class
    api = sb.api_client()
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups", group
    )
    client.CoreV1Api(api).create_namespaced_pod("default", member)


class _PauseAfterDecisions:
    """Blocks a replica's event loop, as SIGSTOP would, right after a session decided binds."""

    def __init__(self, replica: SchedulerComponent) -> None:
        assert replica.service is not None
        self.paused = threading.Event()
        self.resume = threading.Event()
        service = replica.service
        # The session runs in a thread of its own; its decisions are dispatched on the loop.
        self._dispatch: Callable[..., Awaitable[None]] = service._dispatch
        service._dispatch = self._paused_dispatch  # type: ignore[method-assign]

    async def _paused_dispatch(self, out: Any, decisions: Decisions, *args: Any) -> None:
        if decisions.binds and not self.paused.is_set():
            self.paused.set()
            self.resume.wait(120)  # the loop blocked, as by SIGSTOP
        await self._dispatch(out, decisions, *args)


def _pods(sb: SandboxHandle) -> dict[str, Any]:
    pods = client.CoreV1Api(sb.api_client()).list_namespaced_pod("default").items
    return {p.metadata.name: p for p in pods}


def _gpus_bound(sb: SandboxHandle) -> dict[str, int]:
    """GPUs requested by the pods bound to each node, whatever their phase."""
    bound: dict[str, int] = {}
    for p in _pods(sb).values():
        if p.spec.node_name:
            gpus = int(p.spec.containers[0].resources.requests["nvidia.com/gpu"])
            bound[p.spec.node_name] = bound.get(p.spec.node_name, 0) + gpus
    return bound


def _holder(sb: SandboxHandle) -> str | None:
    coord = client.CoordinationV1Api(sb.api_client())
    return coord.read_namespaced_lease(LEASE, "default").spec.holder_identity  # type: ignore[no-any-return]


def _count(replica: SchedulerComponent, metric: str, **labels: str) -> float:
    assert replica.service is not None
    value = replica.service.metrics.registry.get_sample_value(f"{metric}_total", labels)
    return value or 0.0


def _stopped(replica: SchedulerComponent) -> bool:
    return replica._thread is not None and not replica._thread.is_alive()


@pytest.mark.xdist_group("kube-leadership")
def test_a_leader_paused_past_its_lease_binds_nothing_when_it_wakes() -> None:
    """The new leader used the room; the old one wakes with a bind decided for it, drops the
    bind and stops: no node is over-committed and no pod is bound twice."""
    a, b = _replica("replica-a"), _replica("replica-b")
    with run_sandbox(nodes=make_nodes(count=1, gpus=8)) as sb:
        client.SchedulingV1Api(sb.api_client()).create_priority_class(
            {"metadata": {"name": "high"}, "value": 1000}
        )
        a.start(kubeconfig=sb.kubeconfig_path)
        pause: _PauseAfterDecisions | None = None
        try:
            assert a.wait_ready(60)
            b.start(kubeconfig=sb.kubeconfig_path)
            pause = _PauseAfterDecisions(a)
            _submit(sb, "stale", 8)  # a decides stale-0 -> node-0 and is paused before sending
            wait_for(pause.paused.is_set, what="replica-a paused with its bind decided")
            _submit(sb, "urgent", 8, "high")  # what the new leader places first
            wait_for(lambda: _holder(sb) == "replica-b", what="replica-b took the lease")
            wait_for(
                lambda: _pods(sb)["urgent-0"].spec.node_name == "node-0",
                what="replica-b bound urgent-0 into the room",
            )
            pause.resume.set()
            wait_for(lambda: _stopped(a), what="replica-a found the lease lost and stopped")
            assert _pods(sb)["stale-0"].spec.node_name is None, "a stale leader bound a pod"
            assert _gpus_bound(sb) == {"node-0": 8}
            assert _count(a, "tephra_dropped_requests", kind="bind") == 1
            assert _count(a, "tephra_binds", result="conflict") == 0
        finally:
            if pause is not None:
                pause.resume.set()
            a.stop()
            b.stop()


@pytest.mark.xdist_group("kube-leadership")
def test_a_leader_paused_past_its_lease_resumes_once_it_has_renewed() -> None:
    """No standby took over: the woken leader drops the session decided before the pause,
    renews the Lease, still its own, and binds the pod in a new session."""
    a = _replica("replica-a")
    with run_sandbox(nodes=make_nodes(count=1, gpus=8)) as sb:
        a.start(kubeconfig=sb.kubeconfig_path)
        pause: _PauseAfterDecisions | None = None
        try:
            assert a.wait_ready(60)
            pause = _PauseAfterDecisions(a)
            _submit(sb, "late", 8)
            wait_for(pause.paused.is_set, what="replica-a paused with its bind decided")
            # The last renewal came before the pause: after this, the lease has lapsed.
            time.sleep(a.options.lease_seconds + 0.5)
            pause.resume.set()
            wait_for(
                lambda: _pods(sb)["late-0"].spec.node_name == "node-0",
                what="late-0 bound after the renewal",
            )
            assert _count(a, "tephra_dropped_requests", kind="bind") == 1
            assert _holder(sb) == "replica-a" and not _stopped(a)
        finally:
            if pause is not None:
                pause.resume.set()
            a.stop()


def test_an_eviction_is_not_sent_when_leadership_lapsed_after_the_pod_was_marked() -> None:
    """An eviction is two writes: the guard is checked again before the second."""

    class _Client:
        def __init__(self) -> None:
            self.writes: list[str] = []

        async def patch(self, _res: object, name: str, *_: object, **__: object) -> None:
            self.writes.append(f"mark {name}")

        async def request(self, method: str, path: str, **_: object) -> None:
            self.writes.append(f"{method} {path}")

    api = _Client()
    victim = EvictRequest("default", "victim", "uid-1", "preempt")
    with pytest.raises(Dropped):
        asyncio.run(Evictor(api).evict_one(victim, guard=lambda: False))  # type: ignore[arg-type]
    assert api.writes == ["mark victim"]
    _, ok, _ = asyncio.run(Evictor(api).evict_one(victim, guard=lambda: True))  # type: ignore[arg-type]
    assert ok and api.writes[-1].startswith("POST") and api.writes[-1].endswith("/eviction")
