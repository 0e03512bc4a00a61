"""Who may send a queue Command (issue 30.1): the right it needs and the verdict on the answer.

A bus Command lives in its requester's namespace but opens or closes a cluster-scoped Queue, so
its requester must be allowed to `update` that Queue; `batch.api.admission.access` says which
right, builds the SubjectAccessReview that asks for it, and turns the answer into a verdict.
"""

from __future__ import annotations

from typing import Any

from batch.api.admission import access_needed, access_review, access_verdict
from batch.api.admission.access import ACCESS_RULE

ALICE = {"username": "alice", "uid": "u-7", "groups": ["team-a", "system:authenticated"]}


def command(target_kind: str, name: str = "root", action: str = "CloseQueue") -> dict[str, Any]:
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "close-root", "namespace": "team-a"},
        "action": action,
        "target": {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": target_kind,
            "name": name,
        },
    }


def test_a_queue_command_needs_update_on_its_queue() -> None:
    need = access_needed("Command", "CREATE", command("Queue"))
    assert need is not None
    assert (need.verb, need.group, need.resource, need.name) == (
        "update",
        "scheduling.volcano.sh",
        "queues",
        "root",
    )
    assert access_needed("Command", "UPDATE", command("Queue")) == need  # retargeting counts too


def test_nothing_else_needs_more_than_the_request_itself() -> None:
    assert access_needed("Command", "CREATE", command("Job", "train", "AbortJob")) is None
    assert access_needed("Command", "DELETE", command("Queue")) is None
    assert access_needed("Queue", "UPDATE", {"metadata": {"name": "root"}}) is None
    assert access_needed("Command", "CREATE", {"action": "CloseQueue"}) is None  # no target


def test_the_review_asks_about_the_requester_not_the_webhook() -> None:
    need = access_needed("Command", "CREATE", command("Queue"))
    assert need is not None
    user = {**ALICE, "extra": {"scopes": ["a"]}}
    review = access_review(user, need)
    assert review["kind"] == "SubjectAccessReview"
    assert review["apiVersion"] == "authorization.k8s.io/v1"
    spec = review["spec"]
    assert (spec["user"], spec["uid"], spec["groups"]) == ("alice", "u-7", ALICE["groups"])
    assert spec["extra"] == {"scopes": ["a"]}
    assert spec["resourceAttributes"] == {
        "group": "scheduling.volcano.sh",
        "resource": "queues",
        "verb": "update",
        "name": "root",
    }


def test_the_verdict_follows_the_answer_and_fails_closed() -> None:
    need = access_needed("Command", "CREATE", command("Queue"))
    assert need is not None
    assert access_verdict(need, ALICE, {"status": {"allowed": True}}).allowed
    no = access_verdict(need, ALICE, {"status": {"allowed": False, "reason": "no RBAC rule"}})
    assert not no.allowed and no.error is not None
    assert (no.error.path, no.error.rule) == ("target", ACCESS_RULE)
    assert no.message.startswith(f"Command team-a/close-root: target: {ACCESS_RULE} (")
    assert "alice may not update queues.scheduling.volcano.sh 'root': no RBAC rule" in no.message
    assert "CloseQueue Command" in no.message
    # allowed and denied at once (an authorizer chain): denied wins
    both = {"status": {"allowed": True, "denied": True}}
    assert not access_verdict(need, ALICE, both).allowed
    # no answer (timeout, API error): refused, saying why
    late = access_verdict(need, ALICE, None, error="no answer within 2.5 s")
    assert not late.allowed and "could not be checked (no answer within 2.5 s)" in late.message
    anonymous = access_verdict(need, {}, {"status": {}})
    assert not anonymous.allowed and "an anonymous requester may not" in anonymous.message
