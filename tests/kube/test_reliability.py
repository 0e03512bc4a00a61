"""Reliability of the scheduler service against the sandbox: faults, crashes, leader failover.

* With 5% of writes failing and watch streams dropped every 2 s, every gang that fits is still
  bound whole and a gang that cannot fit never has a pod bound.
* A scheduler SIGKILLed while binding a large gang is restarted; the gang completes and no pod
  is bound twice (the API server answers 409 to a second bind, so a pod's node never changes).
* Two replicas with leader election: only the leader binds; when it is SIGKILLed the standby
  takes over within 15 s.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import FaultOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for as _wait_for

GROUP = "scheduling.volcano.sh"
# API calls of the predicates may meet injected faults (500/429) or a lease not yet created.
wait_for = functools.partial(_wait_for, tolerate=(ApiException,))
TEPHRA = str(Path(sys.executable).with_name("tephra"))


def retry(fn: Callable[[], Any], attempts: int = 20) -> Any:
    """Call through injected faults (500/429), treating 409 AlreadyExists as done."""
    for _ in range(attempts):
        try:
            return fn()
        except ApiException as exc:
            if exc.status == 409:
                return None
            if exc.status not in (429, 500):
                raise
            time.sleep(0.05)
    raise AssertionError("too many failed attempts")


def submit(sb: SandboxHandle, name: str, size: int, gpus: int, ns: str = "default") -> None:
    api = sb.api_client()
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    pg = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": size, "queue": "default"},
    }
    retry(lambda: custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", pg))
    for i in range(size):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": ns,
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": "100m", "nvidia.com/gpu": str(gpus)},
                            "limits": {"nvidia.com/gpu": str(gpus)},
                        },
                    }
                ],
            },
        }
        retry(lambda pod=pod: core.create_namespaced_pod(ns, pod))


def placements(sb: SandboxHandle, ns: str = "default") -> dict[str, str | None]:
    core = client.CoreV1Api(sb.api_client())
    pods = retry(lambda: core.list_namespaced_pod(ns)).items
    return {p.metadata.name: p.spec.node_name for p in pods}


def gang_nodes(places: dict[str, str | None], gang: str) -> list[str | None]:
    return [n for name, n in places.items() if name.rsplit("-", 1)[0] == gang]


@pytest.mark.xdist_group("kube-reliability")
def test_faults_never_leak_a_partial_gang() -> None:
    faults = FaultOptions(error_rate=0.05, drop_watch_every=2.0, seed=7)
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(
        nodes=make_nodes(count=4, gpus=8), components=[scheduler], faults=faults
    ) as sb:
        gangs = [f"fit{i}" for i in range(6)]  # 6 x 4 pods x 1 GPU = 24 of 32 GPUs
        for g in gangs:
            submit(sb, g, 4, 1)
        submit(sb, "never", 3, 8)  # 24 GPUs: can never fit beside the others
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            places = placements(sb)
            assert not any(gang_nodes(places, "never")), "a pod of the unfittable gang was bound"
            if all(all(gang_nodes(places, g)) and len(gang_nodes(places, g)) == 4 for g in gangs):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"not every fitting gang was bound: {placements(sb)}")
        time.sleep(1.0)
        assert not any(gang_nodes(placements(sb), "never"))
        assert sb.sandbox is not None


def _scheduler_process(kubeconfig: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            TEPHRA,
            "scheduler",
            "--kubeconfig",
            str(kubeconfig),
            "--schedule-period",
            "200ms",
            "--metrics-port",
            "0",
            "--healthz-port",
            "0",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def sandbox_with_latency() -> Iterator[SandboxHandle]:
    # Slow requests (and 4 binds in flight) so that binding a 120-pod gang takes long enough
    # (about 1.5 s) to be interrupted.
    faults = FaultOptions(latency=0.05, seed=3)
    with run_sandbox(nodes=make_nodes(count=16, gpus=8), faults=faults) as sb:
        yield sb


@pytest.mark.xdist_group("kube-reliability")
def test_sigkill_while_binding_then_restart(sandbox_with_latency: SandboxHandle) -> None:
    sb = sandbox_with_latency
    submit(sb, "big", 120, 1)
    first = _scheduler_process(sb.kubeconfig_path, "--bind-concurrency", "4")
    try:
        wait_for(lambda: any(gang_nodes(placements(sb), "big")), timeout=60, what="first binds")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        partial = gang_nodes(placements(sb), "big")
        bound_at_kill = {n: node for n, node in placements(sb).items() if node}
        assert 0 < sum(1 for n in partial if n) < 120, "kill did not land mid-binding"
    finally:
        if first.poll() is None:
            first.kill()
    second = _scheduler_process(sb.kubeconfig_path)
    try:
        wait_for(lambda: all(gang_nodes(placements(sb), "big")), timeout=90, what="gang completed")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(15)
    final = placements(sb)
    # No pod was re-bound elsewhere: every pod bound before the kill kept its node.
    for name, node in bound_at_kill.items():
        assert final[name] == node
    assert len([n for n in gang_nodes(final, "big") if n]) == 120


def failover_seconds(sb: SandboxHandle) -> float:
    """Two `tephra scheduler --leader-elect` processes on `sb`; the leader is killed (SIGKILL)
    once it has bound a gang, and a gang submitted then is bound by the standby. Returns the
    seconds from the kill to that bind (benchmarks/failover.py prints them)."""
    a = _scheduler_process(sb.kubeconfig_path, "--leader-elect", "--lease-namespace", "default")
    b = _scheduler_process(sb.kubeconfig_path, "--leader-elect", "--lease-namespace", "default")
    procs = {a.pid: a, b.pid: b}
    coord = client.CoordinationV1Api(sb.api_client())
    try:
        lease = wait_for(
            lambda: coord.read_namespaced_lease("tephra-scheduler", "default"),
            timeout=30,
            what="a leader",
        )
        holder = lease.spec.holder_identity
        leader_pid = int(holder.rsplit("-", 1)[1])
        assert leader_pid in procs
        submit(sb, "before", 2, 1)
        wait_for(lambda: all(gang_nodes(placements(sb), "before")), what="leader binds")
        os.kill(leader_pid, signal.SIGKILL)
        procs[leader_pid].wait(10)
        killed_at = time.monotonic()
        submit(sb, "after", 2, 1)
        wait_for(  # the lease is 10 s: this only catches a standby that never takes over
            lambda: all(gang_nodes(placements(sb), "after")),
            timeout=60,
            what="the standby binds",
        )
        took = time.monotonic() - killed_at
        lease = coord.read_namespaced_lease("tephra-scheduler", "default")
        assert lease.spec.holder_identity != holder
        return took
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()


@pytest.mark.xdist_group("kube-reliability")
def test_the_standby_takes_over_when_the_leader_is_killed() -> None:
    # how fast (issue: under 15 s): benchmarks/failover.py; a time bound here fails on a
    # loaded machine for no fault of the code
    with run_sandbox(nodes=make_nodes(count=2, gpus=8)) as sb:
        print(f"failover took {failover_seconds(sb):.1f} s")
