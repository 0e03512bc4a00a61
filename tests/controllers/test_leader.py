"""Two controller replicas with leader election: one works, the other waits and takes over."""

from __future__ import annotations

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import B, vcjob


def test_standby_takes_over_when_leader_stops() -> None:
    with run_sandbox(nodes=make_nodes(count=1, cpu="8"), max_grace_seconds=0.3) as sb:
        a = ControllerComponent(leader_elect=True, identity="replica-a")
        b = ControllerComponent(leader_elect=True, identity="replica-b")
        sched = MiniScheduler(sb.api_client(), nodes=["node-0"]).start()
        co = client.CustomObjectsApi(sb.api_client())

        def phase(name: str) -> str:
            j = co.get_namespaced_custom_object(*B, "default", "jobs", name)
            return ((j.get("status") or {}).get("state") or {}).get("phase", "")

        try:
            a.start(kubeconfig=sb.kubeconfig_path)
            assert a.wait_ready(60)
            b.start(kubeconfig=sb.kubeconfig_path)
            assert b.standby.wait(30)
            assert not b.wait_ready(3)  # replica-a holds the Lease
            co.create_namespaced_custom_object(
                *B, "default", "jobs", vcjob("one", replicas=1, run=0.3)
            )
            wait_for(lambda: phase("one") == "Completed", timeout=60, what="job one Completed")
            assert a.manager is not None and a.manager.reconciles > 0
            assert b.manager is not None and b.manager.reconciles == 0
            lease = client.CoordinationV1Api(sb.api_client()).read_namespaced_lease(
                "tephra-controllers", "default"
            )
            assert lease.spec.holder_identity == "replica-a"
            a.stop()
            assert b.wait_ready(30)
            co.create_namespaced_custom_object(
                *B, "default", "jobs", vcjob("two", replicas=1, run=0.3)
            )
            wait_for(lambda: phase("two") == "Completed", timeout=60, what="job two Completed")
        finally:
            sched.stop()
            a.stop()
            b.stop()
