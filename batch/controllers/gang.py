"""What the PodGroup controller does with a gang an adapter derived: the PodGroup it wants.

Why this exists: the rules are the controller's, not the adapters' (they live above
``batch.api.integration``, which only says what a gang is). Pure functions of the gang, the
existing PodGroup and the workload's pods, so they are written and tested once:
:func:`decide_podgroup` (create / update / adopt / wait / nothing), :func:`podgroup_manifest`
(the PodGroup Tephra creates) and :func:`spec_fingerprint` (how Tephra tells that somebody else
rewrote a PodGroup it created: see the adoption rule in ``batch.api.integration``).
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from batch.api.integration import (
    CREATED_BY_ANNOTATION,
    DEFAULT_QUEUE,
    GANG_HASH_ANNOTATION,
    PODGROUP_API_VERSION,
    QUEUE_NAME_ANNOTATION,
    WORKLOAD_KIND_LABEL,
    WORKLOAD_NAME_LABEL,
    GangSpec,
    annotations_of,
)
from batch.api.quantity import QuantityError
from batch.api.resources import format_resource_list, parse_resource_list

__all__ = [
    "PodGroupAction",
    "PodGroupDecision",
    "decide_podgroup",
    "desired_podgroup_spec",
    "podgroup_manifest",
    "resolve_queue",
    "spec_fingerprint",
]


def resolve_queue(gang: GangSpec, namespace_obj: Mapping[str, Any] | None = None) -> str:
    """The queue for the gang: the workload's, else the namespace annotation, else ``default``."""
    if gang.queue:
        return gang.queue
    if namespace_obj is not None:
        ns_q = annotations_of(namespace_obj).get(QUEUE_NAME_ANNOTATION)
        if ns_q:
            return str(ns_q)
    return DEFAULT_QUEUE


def desired_podgroup_spec(
    gang: GangSpec,
    *,
    leader_running: bool = False,
    namespace_obj: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The PodGroup ``spec`` Tephra wants for ``gang`` now (camelCase, as the API stores it).

    With a ``leader_role`` and the leader not yet running, minMember and minTaskMember cover the
    leader only (so it can start and create the rest); minResources always covers the whole gang.
    """
    min_member = gang.min_member
    min_task = dict(gang.min_task_member)
    if gang.leader_role is not None and not leader_running:
        lead = gang.min_task_member[gang.leader_role]
        min_member = min(lead, gang.min_member)
        min_task = {gang.leader_role: lead}
    spec: dict[str, Any] = {"minMember": min_member, "queue": resolve_queue(gang, namespace_obj)}
    if min_task:
        spec["minTaskMember"] = min_task
    if gang.min_resources:  # an empty list admits everything, like no list at all
        spec["minResources"] = dict(gang.min_resources)
    if gang.priority_class_name:
        spec["priorityClassName"] = gang.priority_class_name
    return spec


_MANAGED_FIELDS = ("minMember", "minTaskMember", "minResources", "priorityClassName", "queue")
# The queue is set once and never updated (admission may also default it from the namespace),
# so it is not part of the fingerprint that tells whether somebody else rewrote the group.
_FINGERPRINT_FIELDS = ("minMember", "minTaskMember", "minResources", "priorityClassName")


def spec_fingerprint(spec: Mapping[str, Any]) -> str:
    """Stable hash of the PodGroup spec fields Tephra keeps up to date (order-insensitive;
    quantities compared by value, so ``1000m`` and ``1`` are the same)."""
    picked = {k: spec[k] for k in _FINGERPRINT_FIELDS if spec.get(k) not in (None, {}, "")}
    if isinstance(picked.get("minResources"), Mapping):
        with contextlib.suppress(QuantityError):  # malformed: hash it as written
            picked["minResources"] = format_resource_list(
                parse_resource_list(picked["minResources"])
            )
    blob = json.dumps(picked, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def podgroup_manifest(
    gang: GangSpec,
    *,
    leader_running: bool = False,
    namespace_obj: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full PodGroup object Tephra creates for ``gang`` (status is left to the controller)."""
    spec = desired_podgroup_spec(gang, leader_running=leader_running, namespace_obj=namespace_obj)
    labels = {
        WORKLOAD_KIND_LABEL: gang.workload.kind,
        WORKLOAD_NAME_LABEL: gang.workload.name,
        **gang.labels,
    }
    annotations = {
        **gang.annotations,
        CREATED_BY_ANNOTATION: gang.adapter,
        GANG_HASH_ANNOTATION: spec_fingerprint(spec),
    }
    metadata: dict[str, Any] = {
        "name": gang.name,
        "namespace": gang.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if gang.owner is not None:
        metadata["ownerReferences"] = [gang.owner.to_dict()]
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }


class PodGroupAction(enum.Enum):
    CREATE = "create"  # no PodGroup yet: create `body`
    UPDATE = "update"  # Tephra's own PodGroup, out of date: merge-patch with `body`
    ADOPT = "adopt"  # a PodGroup somebody else owns (the operator): use it, write nothing
    WAIT = "wait"  # the operator is expected to create it: do nothing yet, retry later
    REPLACE = "replace"  # Tephra's, made for an earlier workload of this name: delete it
    NOTHING = "nothing"  # Tephra's own PodGroup, up to date


@dataclass(frozen=True, slots=True)
class PodGroupDecision:
    action: PodGroupAction
    name: str
    body: dict[str, Any] | None = None
    reason: str = ""


def _owned_by_another(existing: Mapping[str, Any], gang: GangSpec) -> bool:
    """Whether ``existing`` names a controller other than the gang's workload (by uid)."""
    if gang.owner is None:
        return False
    refs = (existing.get("metadata") or {}).get("ownerReferences") or []
    owners = {str(r.get("uid")) for r in refs if r.get("controller")}
    return bool(owners) and gang.owner.uid not in owners


def decide_podgroup(
    gang: GangSpec,
    existing: Mapping[str, Any] | None,
    *,
    leader_running: bool = False,
    workload_age_seconds: float = 0.0,
    namespace_obj: Mapping[str, Any] | None = None,
    pods_exist: bool = True,
    pod_group_names: Iterable[str] = (),
) -> PodGroupDecision:
    """What the PodGroup controller does for ``gang`` given the PodGroup named ``gang.name``.

    ``pods_exist``: whether the workload has any pod yet; ``pod_group_names``: the
    ``scheduling.k8s.io/group-name`` values already on its pods.

    * a pod already names another PodGroup (an operator configured for Volcano named its own):
      ADOPT that one (``decision.name``), never create a second.
    * none exists: WAIT while ``gang.adopt_existing`` and the workload is younger than
      ``gang.adopt_grace_seconds``, or while the workload has no pod yet (a Volcano-configured
      operator makes its PodGroup before its pods, so waiting for the first pod never races it;
      pods without a PodGroup are not scheduled meanwhile); else CREATE
      (:func:`podgroup_manifest`).
    * one exists without Tephra's fingerprint annotation: ADOPT (the operator owns it).
    * Tephra's, owned by an earlier workload of the same name (deleted and created again
      before the garbage collector removed the old group): REPLACE. Kept, it would name the
      gang until the collector deletes it, and the pods would then wait for a group no event
      brings back.
    * Tephra's, but its spec no longer matches the fingerprint Tephra wrote: somebody else
      (an operator that updates existing groups, e.g. training-operator) took it over: ADOPT.
    * Tephra's and unchanged since: UPDATE when the desired spec differs (the queue of an
      existing group is never changed), else NOTHING.
    """
    name = gang.name
    others = sorted({n for n in pod_group_names if n and n != name})
    if others:
        return PodGroupDecision(
            PodGroupAction.ADOPT, others[0], reason="the workload's pods name their own PodGroup"
        )
    if existing is None:
        if gang.adopt_existing and workload_age_seconds < gang.adopt_grace_seconds:
            return PodGroupDecision(
                PodGroupAction.WAIT, name, reason="waiting for the operator's PodGroup"
            )
        if not pods_exist:
            return PodGroupDecision(
                PodGroupAction.WAIT, name, reason="waiting for the workload's first pod"
            )
        body = podgroup_manifest(gang, leader_running=leader_running, namespace_obj=namespace_obj)
        return PodGroupDecision(PodGroupAction.CREATE, name, body, "no PodGroup yet")
    annotations = annotations_of(existing)
    written = annotations.get(GANG_HASH_ANNOTATION)
    current_spec: Mapping[str, Any] = existing.get("spec") or {}
    if not written:
        return PodGroupDecision(PodGroupAction.ADOPT, name, reason="PodGroup made by its operator")
    if _owned_by_another(existing, gang):
        return PodGroupDecision(
            PodGroupAction.REPLACE, name, reason="PodGroup of an earlier workload of this name"
        )
    if spec_fingerprint(current_spec) != written:
        return PodGroupDecision(
            PodGroupAction.ADOPT, name, reason="PodGroup changed by another writer; handed over"
        )
    desired = desired_podgroup_spec(
        gang, leader_running=leader_running, namespace_obj=namespace_obj
    )
    if current_spec.get("queue"):
        desired["queue"] = current_spec["queue"]
    new_hash = spec_fingerprint(desired)
    if new_hash == written:
        return PodGroupDecision(PodGroupAction.NOTHING, name)
    patch_spec: dict[str, Any] = dict(desired)
    for key in _MANAGED_FIELDS:  # clear managed fields Tephra no longer sets
        if key in current_spec and key not in desired:
            patch_spec[key] = None
    for key in ("minTaskMember", "minResources"):  # merge-patch: drop keys no longer wanted
        old, new = current_spec.get(key), patch_spec.get(key)
        if isinstance(old, Mapping) and isinstance(new, dict):
            patch_spec[key] = {**{k: None for k in old if k not in new}, **new}
    body = {"metadata": {"annotations": {GANG_HASH_ANNOTATION: new_hash}}, "spec": patch_spec}
    return PodGroupDecision(PodGroupAction.UPDATE, name, body, "gang spec changed")
