"""The review kinds (access, rules and self-subject reviews): answered, never stored. The
sandbox has one user, its admin."""

from __future__ import annotations

from typing import Any

from batch.sandbox.kubeconfig import ADMIN_GROUPS, ADMIN_USER
from batch.sandbox.meta import ResourceType
from batch.sandbox.store import Obj


def _is_admin(spec: Any) -> bool:
    """Whether an access review's subject is the sandbox's one user (by name or by group)."""
    if not isinstance(spec, dict):
        return False
    groups = spec.get("groups")
    groups = groups if isinstance(groups, list) else []
    return spec.get("user") == ADMIN_USER or ADMIN_GROUPS[0] in groups


def review(rt: ResourceType, body: Obj) -> Obj:
    """The sandbox has one user, its admin, whom every request is from: every review about
    the requester is allowed; one about another user (a webhook asking for the requester
    of a queue Command) is denied, since no other user exists."""
    out: Obj = {**body, "apiVersion": rt.api_version, "kind": rt.kind}
    out.setdefault("metadata", {})
    if rt.kind == "SelfSubjectReview":
        out["status"] = {"userInfo": {"username": ADMIN_USER, "groups": list(ADMIN_GROUPS)}}
    elif rt.kind == "SelfSubjectRulesReview":
        out["status"] = {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    elif rt.kind.startswith("Self") or _is_admin(body.get("spec")):
        out["status"] = {"allowed": True, "reason": "the sandbox authorizes its admin"}
    else:
        reason = f"the sandbox has one user, {ADMIN_USER} ({ADMIN_GROUPS[0]}); no other"
        out["status"] = {"allowed": False, "reason": reason}
    return out
