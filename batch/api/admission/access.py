"""Rights a request needs beyond creating its object: a queue Command needs `update` on its Queue.

A bus Command is namespaced while the Queue it opens or closes is cluster-scoped, so the right to
create Commands in one namespace would otherwise be the right to close every queue (issue 30.1:
a tenant's CloseQueue on `root` closed them all). The validating webhook therefore asks the API
server, with a SubjectAccessReview (authorization.k8s.io/v1) about the requester of the Command
(the review's `userInfo`: user, groups, uid, extra), whether that requester may `update` the
target Queue, and refuses the Command when not, or when the answer cannot be had: the check fails
closed. Pure: which right an object needs, the review that asks for it, and the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batch.api.bus import queue_target
from batch.api.constants import SCHEDULING_GROUP

from .common import object_ref
from .types import FieldError

__all__ = [
    "ACCESS_RULE",
    "AccessNeed",
    "AccessVerdict",
    "access_needed",
    "access_review",
    "access_verdict",
]

#: The rule id a denial names (the `reason` of its cause, after `target:` in its message).
ACCESS_RULE = "queueCommandAccess"
_REVIEW_API = "authorization.k8s.io/v1"


@dataclass(frozen=True)
class AccessNeed:
    """A right the requester must hold: `verb` on `resource`.`group` named `name`; `ref` and
    `action` name the object asking for it in the denial."""

    verb: str
    group: str
    resource: str
    name: str
    ref: str
    action: str


@dataclass(frozen=True)
class AccessVerdict:
    """Whether the requester holds the right; when not, the violated rule (`target` path)."""

    allowed: bool
    error: FieldError | None = None

    @property
    def message(self) -> str:
        """The denial on one line (object, field path, rule, why), empty when allowed."""
        return "" if self.error is None else str(self.error)


def access_needed(kind: str, operation: str, obj: Mapping[str, Any]) -> AccessNeed | None:
    """The right a CREATE or UPDATE of `obj` needs beyond the request's own: for a Command
    targeting a Queue, `update` on that Queue; None for anything else."""
    if kind != "Command" or operation not in ("CREATE", "UPDATE"):
        return None
    queue = queue_target(obj)
    if queue is None:
        return None
    return AccessNeed(
        verb="update",
        group=SCHEDULING_GROUP,
        resource="queues",
        name=queue,
        ref=object_ref("Command", obj, namespaced=True),
        action=str(obj.get("action") or "a"),
    )


def access_review(user_info: Mapping[str, Any], need: AccessNeed) -> dict[str, Any]:
    """The SubjectAccessReview asking whether the requester `user_info` holds `need`."""
    spec: dict[str, Any] = {
        "resourceAttributes": {
            "group": need.group,
            "resource": need.resource,
            "verb": need.verb,
            "name": need.name,
        }
    }
    for key, field in (("username", "user"), ("uid", "uid")):
        if user_info.get(key):
            spec[field] = str(user_info[key])
    for key in ("groups", "extra"):
        if user_info.get(key):
            spec[key] = user_info[key]
    return {"apiVersion": _REVIEW_API, "kind": "SubjectAccessReview", "spec": spec}


def access_verdict(
    need: AccessNeed,
    user_info: Mapping[str, Any],
    answer: Mapping[str, Any] | None,
    *,
    error: str = "",
) -> AccessVerdict:
    """The verdict from the API server's `answer` to `access_review` (None with `error` when it
    could not be had: refused, so that an unreachable API server never lets a Command through)."""
    user = str(user_info.get("username") or "") or "an anonymous requester"
    right = f"{need.verb} {need.resource}.{need.group} {need.name!r}"
    status = (answer or {}).get("status")
    status = status if isinstance(status, Mapping) else {}
    if answer is not None and status.get("allowed") is True and not status.get("denied"):
        return AccessVerdict(True)
    if answer is None:
        why = f"whether {user} may {right} could not be checked ({error or 'no answer'})"
    else:
        said = str(status.get("reason") or status.get("evaluationError") or "").strip()
        why = f"{user} may not {right}" + (f": {said}" if said else "")
    message = (
        f"{why}; a {need.action} Command acts on the Queue, so its requester needs "
        f"the right to {need.verb} that Queue"
    )
    return AccessVerdict(False, FieldError("target", ACCESS_RULE, message, need.ref))
