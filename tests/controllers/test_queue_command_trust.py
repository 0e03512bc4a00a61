"""Who may open and close queues, over HTTP against the sandbox (issue 30.1).

A tenant who may create Commands in their own namespace closed `root`, and so every queue. Two
rules now stop that, shown here through the API a user has:
* the webhook (`/commands/validate`) asks the cluster, with a SubjectAccessReview about the
  requester, whether they may update the Queue: the sandbox's one user (its admin) may, another
  user (one the sandbox does not know) may not, and is refused with the rule's name;
* the controller, run with `--queue-command-namespace queue-admin`, executes queue Commands
  from that namespace only: a tenant's Command is never executed, but reported (`CommandRefused`
  on the Command and the Queue) and deleted; the admin's is executed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.controllers.webhook import ClusterFacts
from batch.sandbox.kubeconfig import ADMIN_GROUPS, ADMIN_USER
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

from .test_webhook import Server
from .test_webhook_access import command_review

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

BUS = ("bus.volcano.sh", "v1alpha1")
SCHED = ("scheduling.volcano.sh", "v1beta1")
ADMIN_NS = "queue-admin"
TENANT_NS = "team-a"


@pytest.fixture(scope="module")
def sb() -> Iterator[SandboxHandle]:
    options = SandboxOptions(queue_command_namespace=ADMIN_NS)
    with run_sandbox(options=options, components=[ControllerComponent(options)]) as handle:
        handle.apply(
            *(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                for ns in (ADMIN_NS, TENANT_NS)
            ),
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "team"},
                "spec": {"weight": 1},
            },
        )
        yield handle


@pytest.fixture(scope="module")
def co(sb: SandboxHandle) -> Iterator[client.CustomObjectsApi]:
    api = sb.api_client()
    yield client.CustomObjectsApi(api)
    api.close()


def close_command(namespace: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": f"close-{queue}", "namespace": namespace},
        "action": "CloseQueue",
        "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": queue},
    }


def state(co: client.CustomObjectsApi, queue: str) -> str:
    found = co.get_cluster_custom_object(*SCHED, "queues", queue)
    return str((found.get("status") or {}).get("state") or "")


def commands(co: client.CustomObjectsApi, namespace: str) -> list[str]:
    items = co.list_namespaced_custom_object(*BUS, namespace, "commands")["items"]
    return [c["metadata"]["name"] for c in items]


def refusals(sb: SandboxHandle) -> dict[str, str]:
    """CommandRefused events: involved object kind -> message."""
    api = sb.api_client()
    try:
        events = client.CoreV1Api(api).list_event_for_all_namespaces().items
    finally:
        api.close()
    return {e.involved_object.kind: e.message for e in events if e.reason == "CommandRefused"}


def test_a_tenants_queue_command_is_refused_and_an_admins_executed(
    sb: SandboxHandle, co: client.CustomObjectsApi
) -> None:
    wait_for(lambda: state(co, "team") == "Open", what="queue team open")
    co.create_namespaced_custom_object(
        *BUS, TENANT_NS, "commands", close_command(TENANT_NS, "root")
    )
    wait_for(lambda: not commands(co, TENANT_NS), what="the tenant's Command handled")
    seen = wait_for(lambda: len(refusals(sb)) == 2 and refusals(sb), what="refusal events")
    assert set(seen) == {"Command", "Queue"}, seen
    assert f"{TENANT_NS}/close-root" in seen["Queue"] and ADMIN_NS in seen["Queue"], seen
    assert state(co, "root") == "Open" and state(co, "team") == "Open"

    co.create_namespaced_custom_object(*BUS, ADMIN_NS, "commands", close_command(ADMIN_NS, "team"))
    wait_for(lambda: state(co, "team") == "Closed", what="queue team closed by the admin")
    wait_for(lambda: not commands(co, ADMIN_NS), what="the admin's Command deleted")
    assert state(co, "root") == "Open"


def test_the_webhook_asks_the_cluster_who_may_update_the_queue(
    sb: SandboxHandle, tmp_path: Path
) -> None:
    server = Server(tmp_path, facts=ClusterFacts(sb.kubeconfig_path))
    try:
        admin = {"username": ADMIN_USER, "groups": list(ADMIN_GROUPS)}
        stranger = {"username": "alice", "groups": ["system:authenticated"]}
        assert server.post("/commands/validate", command_review(admin))["response"]["allowed"]
        refused = server.post("/commands/validate", command_review(stranger))["response"]
        assert refused["allowed"] is False, refused
        message = refused["status"]["message"]
        assert "target: queueCommandAccess" in message and "alice may not update" in message
        assert "the sandbox has one user" in message, message
    finally:
        server.stop()


def test_the_cli_sends_queue_commands_from_the_admin_namespace(
    sb: SandboxHandle, co: client.CustomObjectsApi
) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    kubeconfig = ["--kubeconfig", str(sb.kubeconfig_path)]
    co.create_namespaced_custom_object(*BUS, ADMIN_NS, "commands", close_command(ADMIN_NS, "team"))
    wait_for(lambda: state(co, "team") == "Closed", what="queue team closed")
    operate = ["queue", "operate", "-n", "team", "-a", "open", *kubeconfig]
    done = CliRunner().invoke(main, [*operate, "--command-namespace", ADMIN_NS])
    assert done.exit_code == 0, done.output
    wait_for(lambda: state(co, "team") == "Open", what="queue team reopened through the CLI")


def test_a_bad_queue_command_namespace_is_one_line() -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    done = CliRunner().invoke(main, ["controller", "--queue-command-namespace", "Team_A"])
    assert done.exit_code == 2, done.output
    assert "'Team_A' is not a namespace name" in done.output and "Traceback" not in done.output
