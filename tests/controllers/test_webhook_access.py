"""The webhook refuses a queue Command whose requester may not update the Queue (issue 30.1).

Before, any user allowed to create Commands in their own namespace could close `root` (and so
every queue). `/commands/validate` now asks the cluster, with a SubjectAccessReview about the
review's `userInfo`, and refuses with 403 and the rule's name when the answer is no, or when
there is no answer (fails closed). Commands for Jobs are not asked about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from batch.controllers.webhook import ClusterFacts, make_app

ADMIN = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
ALICE = {"username": "alice", "groups": ["team-a", "system:authenticated"]}


def command_review(
    user: Mapping[str, Any], *, kind: str = "Queue", op: str = "CREATE"
) -> dict[str, Any]:
    target = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": kind, "name": "root"}
    if kind == "Job":
        target["apiVersion"] = "batch.volcano.sh/v1alpha1"
    obj = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "close-root", "namespace": "team-a"},
        "action": "CloseQueue" if kind == "Queue" else "AbortJob",
        "target": target,
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "bus.volcano.sh", "version": "v1alpha1", "kind": "Command"},
            "operation": op,
            "namespace": "team-a",
            "userInfo": dict(user),
            "object": obj,
        },
    }


class Rbac(ClusterFacts):
    """An apiserver whose authorizer lets system:masters update queues and nobody else."""

    def __init__(self, *, fail: BaseException | None = None, delay: float = 0.0) -> None:
        super().__init__(None)
        self.reviews: list[Mapping[str, Any]] = []
        self.fail = fail
        self.delay = delay

    async def lookup(self, review: Mapping[str, Any]) -> Any:
        from batch.api.admission import StaticLookup

        return StaticLookup()

    async def review_access(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.reviews.append(body)
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        allowed = "system:masters" in body["spec"].get("groups", [])
        return {**body, "status": {"allowed": allowed, "reason": "" if allowed else "no rule"}}

    async def close(self) -> None:
        return None


async def _post(path: str, body: Any, facts: ClusterFacts | None) -> dict[str, Any]:
    async with TestClient(TestServer(make_app(facts=facts, adapters=[]))) as client:
        answer = await client.post(path, json=body)
        assert answer.status == 200
        response: dict[str, Any] = (await answer.json())["response"]
        return response


def post(
    review: dict[str, Any], facts: ClusterFacts | None, path: str = "/commands/validate"
) -> dict[str, Any]:
    return asyncio.run(_post(path, review, facts))


def test_a_tenants_queue_command_is_refused_naming_the_rule() -> None:
    facts = Rbac()
    response = post(command_review(ALICE), facts)
    assert response["allowed"] is False, response
    status = response["status"]
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert "target: queueCommandAccess" in status["message"], status
    assert "alice may not update queues.scheduling.volcano.sh 'root'" in status["message"]
    assert status["details"]["causes"][0]["reason"] == "queueCommandAccess"
    (review,) = facts.reviews
    assert review["spec"]["user"] == "alice"
    assert review["spec"]["resourceAttributes"]["name"] == "root"


def test_an_admins_queue_command_is_allowed_on_both_endpoints() -> None:
    for path in ("/commands/validate", "/validate"):
        assert post(command_review(ADMIN), Rbac(), path)["allowed"] is True, path
        assert post(command_review(ALICE), Rbac(), path)["allowed"] is False, path


def test_retargeting_a_command_at_a_queue_is_checked_too() -> None:
    assert post(command_review(ALICE, op="UPDATE"), Rbac())["allowed"] is False


def test_job_commands_and_mutation_ask_nothing() -> None:
    facts = Rbac()
    assert post(command_review(ALICE, kind="Job"), facts)["allowed"] is True
    assert post(command_review(ALICE), facts, "/commands/mutate")["allowed"] is True
    assert facts.reviews == []


def test_no_answer_refuses_the_command() -> None:
    """An apiserver error, a late answer, or no cluster at all: refused, saying why."""
    cases: list[tuple[ClusterFacts | None, str]] = [
        (Rbac(fail=RuntimeError("connection refused")), "connection refused"),
        (None, "the webhook does not read the cluster"),
    ]
    for facts, why in cases:
        response = post(command_review(ADMIN), facts)
        assert response["allowed"] is False, why
        assert "could not be checked" in response["status"]["message"], response
        assert why in response["status"]["message"], response
    late = asyncio.run(_post("/commands/validate?timeout=1s", command_review(ADMIN), Rbac(delay=5)))
    assert late["allowed"] is False and "no answer within" in late["status"]["message"], late
