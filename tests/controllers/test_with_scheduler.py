"""The controllers with the real scheduler service on the sandbox: gang admission end to end."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")

from click.testing import CliRunner
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .test_integration import B, vcjob

pytestmark = pytest.mark.xdist_group("controllers-scheduler")


@pytest.fixture(scope="module")
def sb() -> Iterator[Any]:
    with run_sandbox(
        nodes=make_nodes(count=1, cpu="2", memory="8Gi"),
        components=[ControllerComponent(), SchedulerComponent()],
        max_grace_seconds=0.3,
        ready_timeout=120,
    ) as handle:
        yield handle


def _phase(co: Any, name: str) -> str:
    j = co.get_namespaced_custom_object(*B, "default", "jobs", name)
    return ((j.get("status") or {}).get("state") or {}).get("phase", "")


def test_gang_waits_for_capacity_then_completes(sb: Any) -> None:
    from batch.cli.main import main

    api = sb.api_client()
    co = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    body = vcjob("gang", replicas=3, run=0.5)
    body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"}
    }
    co.create_namespaced_custom_object(*B, "default", "jobs", body)
    small = vcjob("small", replicas=1, run=0.5)
    co.create_namespaced_custom_object(*B, "default", "jobs", small)
    wait_for(lambda: _phase(co, "small") == "Completed", timeout=60, what="small job Completed")
    # 3 x 1 cpu on a 2-cpu node: the gang is never partly bound
    pods = core.list_namespaced_pod("default", label_selector="volcano.sh/job-name=gang").items
    assert all(not p.spec.node_name for p in pods)
    assert _phase(co, "gang") == "Pending"
    out = CliRunner().invoke(main, ["job", "why", "gang", "--kubeconfig", str(sb.kubeconfig_path)])
    assert out.exit_code == 0, out.output
    assert "PodGroup gang-" in out.output
    assert "queue position: 1 of 1 waiting in queue default" in out.output, out.output
    assert "Unschedulable" in out.output, out.output
    # figures, not "3/0 ... exceed 1.2 x cluster capacity minus used" (issue 15, item 6), and
    # "can never fit" rather than overcommit's jargon for a gang larger than the cluster (29.2)
    assert "can never fit: the gang asks for 3 cpu, the cluster has 2" in out.output, out.output
    share = "queue default: weight 1 of 1 among the queues under root; holds "
    assert re.search(re.escape(share) + r"[\d.]+ of 2 cpu \(\d+%\)\n", out.output), out.output
    # capacity arrives: the gang runs and completes
    node = make_nodes(count=1, cpu="4", memory="8Gi", prefix="big")[0]
    core.create_node(node)
    wait_for(lambda: _phase(co, "gang") == "Completed", timeout=90, what="gang Completed")
    job = co.get_namespaced_custom_object(*B, "default", "jobs", "gang")
    assert job["status"]["succeeded"] == 3


def test_job_why_names_a_missing_priority_class(sb: Any) -> None:
    """Issue 20.4: every pod create got a 403 while `job why` said NotEnoughResources."""
    from batch.cli.main import main

    api = sb.api_client()
    co = client.CustomObjectsApi(api)
    body = vcjob("classless", replicas=1, run=0.5)
    body["spec"]["priorityClassName"] = "no-such-class"
    co.create_namespaced_custom_object(*B, "default", "jobs", body)

    def reason() -> str:
        j = co.get_namespaced_custom_object(*B, "default", "jobs", "classless")
        return str(((j.get("status") or {}).get("state") or {}).get("reason") or "")

    wait_for(lambda: reason() == "PriorityClassNotFound", timeout=60, what="reason recorded")
    out = CliRunner().invoke(
        main, ["job", "why", "classless", "--kubeconfig", str(sb.kubeconfig_path)]
    )
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    # one sentence first (issue 31.3), then the controller's reason ahead of the details
    assert lines[0].startswith(
        "Job default/classless is held by the job controller: PriorityClassNotFound: "
        'PriorityClass "no-such-class"'
    ), out.output
    assert lines[2].startswith('  PriorityClassNotFound: PriorityClass "no-such-class"'), out.output
    pods = client.CoreV1Api(api).list_namespaced_pod(
        "default", label_selector="volcano.sh/job-name=classless"
    )
    assert pods.items == []
    co.delete_namespaced_custom_object(*B, "default", "jobs", "classless")
