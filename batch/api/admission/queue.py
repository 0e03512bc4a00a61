"""Queue admission (volcano-semantics.md#queue-spec): weight/reclaimable defaults, resource
relations, hierarchy.

Rules: weight 1..65535 (default 1), reclaimable default true; capability >= deserved >= guarantee
per dimension present in both; legacy hierarchy annotations (`volcano.sh/hierarchy`,
`volcano.sh/hierarchy-weights`) get `root/` and `1/` prefixed, need equal segment counts and
positive weights, and one queue's path may not be a prefix of another's; `spec.parent` must
exist and not be the queue itself; `root` and `default` cannot be deleted, nor a queue with
children; the root queue's resources are immutable. A queue in any state (Open, Closing, Closed,
or not yet given one) can be deleted, as Volcano v1.10's webhook allows: its `validateQueueDeleting`
checks only the name, older releases (<= v1.5) refused any state but `Closed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.constants import (
    ANN_HIERARCHY,
    ANN_HIERARCHY_WEIGHTS,
    DEFAULT_QUEUE,
    ROOT_QUEUE,
)
from batch.api.scheduling import Queue, QueueSpec

from .common import Errors, as_dict, check_amount, is_dns1123_subdomain, join
from .types import AdmissionLookup

__all__ = ["mutate_queue", "validate_queue", "validate_queue_delete"]


def mutate_queue(obj: dict[str, Any]) -> None:
    spec = as_dict(obj.get("spec"))
    if spec is None:
        if "spec" in obj and obj["spec"] is not None:
            return  # wrong type: reported by schema validation
        spec = obj["spec"] = {}
    weight = spec.get("weight")
    if weight is None or (type(weight) is int and weight == 0):
        spec["weight"] = 1
    if spec.get("reclaimable") is None:
        spec["reclaimable"] = True
    meta = as_dict(obj.get("metadata"))
    ann = as_dict(meta.get("annotations")) if meta else None
    if ann is not None:
        path, weights = ann.get(ANN_HIERARCHY), ann.get(ANN_HIERARCHY_WEIGHTS)
        if (
            isinstance(path, str)
            and path
            and isinstance(weights, str)
            and weights
            and path != ROOT_QUEUE
            and not path.startswith(f"{ROOT_QUEUE}/")
        ):
            ann[ANN_HIERARCHY] = f"{ROOT_QUEUE}/{path}"
            ann[ANN_HIERARCHY_WEIGHTS] = f"1/{weights}"


def _amounts(rl: Mapping[str, Any] | None, path: str, errors: Errors) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (rl or {}).items():
        amount = check_amount(name, value, join(path, name), errors)
        if amount is not None:
            out[name] = amount
    return out


def _hierarchy(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = as_dict(obj.get("metadata")) or {}
    ann = as_dict(meta.get("annotations")) or {}
    path, weights = ann.get(ANN_HIERARCHY), ann.get(ANN_HIERARCHY_WEIGHTS)
    if isinstance(path, str) and path:
        return path, weights if isinstance(weights, str) else ""
    return None


def _is_prefix_path(a: list[str], b: list[str]) -> bool:
    return len(a) < len(b) and b[: len(a)] == a


def validate_queue(
    queue: Queue,
    raw: Mapping[str, Any],
    *,
    operation: str,
    old: Mapping[str, Any] | None,
    lookup: AdmissionLookup | None,
    errors: Errors,
) -> None:
    name = queue.metadata.name if queue.metadata and queue.metadata.name else ""
    _check_queue_name(name, operation, errors)
    spec = queue.spec
    if spec is None:
        return
    _check_resources(spec, errors)
    if spec.parent:
        _check_parent(name, spec.parent, lookup, errors)
    hier = _hierarchy(raw)
    if hier is not None:
        _check_hierarchy(name, hier, lookup, errors)
    if operation == "UPDATE" and name == ROOT_QUEUE and old is not None:
        _check_root_resources_unchanged(raw, old, errors)


def _check_queue_name(name: str, operation: str, errors: Errors) -> None:
    if not name:
        errors.add("metadata.name", "required", "a queue needs a name")
    elif not is_dns1123_subdomain(name):
        errors.add("metadata.name", "dns1123Subdomain", f"invalid queue name {name!r}")
    elif len(name) > 63 and operation == "CREATE":
        # Every pod of a job in the queue carries the name as the label volcano.sh/queue-name,
        # and label values are at most 63 characters: the API server would refuse those pods.
        errors.add(
            "metadata.name",
            "labelValue",
            f"queue name is {len(name)} characters; at most 63, because pods carry it as the "
            "label volcano.sh/queue-name",
        )


def _check_resources(spec: QueueSpec, errors: Errors) -> None:
    """Valid quantities, and capability >= deserved >= guarantee in every dimension of both."""
    cap = _amounts(spec.capability, "spec.capability", errors)
    des = _amounts(spec.deserved, "spec.deserved", errors)
    guarantee = spec.guarantee.resource if spec.guarantee else None
    gua = _amounts(guarantee, "spec.guarantee.resource", errors)
    for rname, amount in des.items():
        if rname in cap and amount > cap[rname]:
            errors.add(
                join("spec.deserved", rname),
                "deservedLessEqualCapability",
                f"deserved {(spec.deserved or {}).get(rname)!r} exceeds capability "
                f"{(spec.capability or {}).get(rname)!r}",
            )
    for rname, amount in gua.items():
        gpath = join("spec.guarantee.resource", rname)
        shown = (guarantee or {}).get(rname)
        if rname not in des:  # Volcano >= 1.15 refuses a guarantee without deserved too
            errors.add(
                gpath,
                "guaranteeInDeserved",
                f"deserved[{rname}] must be >= guarantee[{rname}]={shown} "
                f"(set spec.deserved.{rname})",
            )
        elif amount > des[rname]:
            errors.add(
                gpath,
                "guaranteeLessEqualDeserved",
                f"deserved[{rname}]={(spec.deserved or {}).get(rname)} must be >= "
                f"guarantee[{rname}]={shown}",
            )
        if rname in cap and amount > cap[rname]:
            errors.add(
                gpath, "guaranteeLessEqualCapability", f"guarantee of {rname} exceeds capability"
            )


def _check_parent(name: str, parent: str, lookup: AdmissionLookup | None, errors: Errors) -> None:
    if parent == name:
        errors.add("spec.parent", "parent", "a queue cannot be its own parent")
    elif name == ROOT_QUEUE:
        errors.add("spec.parent", "parent", "the root queue has no parent")
    elif lookup is not None and parent != ROOT_QUEUE:
        _check_ancestors(name, parent, lookup, errors)


_HIERARCHY_PATH = f"metadata.annotations[{ANN_HIERARCHY}]"
_HIERARCHY_WEIGHTS_PATH = f"metadata.annotations[{ANN_HIERARCHY_WEIGHTS}]"


def _check_hierarchy(
    name: str, hier: tuple[str, str], lookup: AdmissionLookup | None, errors: Errors
) -> None:
    """The legacy hierarchy annotations: one positive weight per segment, no empty segment, and
    (with a lookup) no other queue's path a prefix of this one's or the other way round."""
    hpath, hweights = hier
    segments, wsegs = hpath.split("/"), hweights.split("/") if hweights else []
    if len(segments) != len(wsegs):
        errors.add(
            _HIERARCHY_WEIGHTS_PATH,
            "hierarchyWeights",
            f"{len(segments)} hierarchy segments but {len(wsegs)} weights",
        )
    bad = next((w for w in wsegs if not _is_positive_number(w)), None)
    if bad is not None:
        message = f"weight {bad!r} must be a positive number"
        errors.add(_HIERARCHY_WEIGHTS_PATH, "hierarchyWeights", message)
    if any(not s for s in segments):
        errors.add(_HIERARCHY_PATH, "hierarchy", f"empty segment in hierarchy {hpath!r}")
    if lookup is not None:
        _check_hierarchy_prefixes(name, hpath, lookup, errors)


def _is_positive_number(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def _check_hierarchy_prefixes(
    name: str, hpath: str, lookup: AdmissionLookup, errors: Errors
) -> None:
    """The first other queue whose hierarchy path is a prefix of `hpath`, or has it as prefix."""
    segments = hpath.split("/")
    for other in lookup.list_queues():
        oname = (as_dict(other.get("metadata")) or {}).get("name")
        ohier = _hierarchy(other) if oname != name else None
        if ohier is None:
            continue
        osegs = ohier[0].split("/")
        if _is_prefix_path(segments, osegs) or _is_prefix_path(osegs, segments):
            errors.add(
                _HIERARCHY_PATH,
                "hierarchyPrefix",
                f"{hpath!r} and queue {oname!r}'s {ohier[0]!r} are prefix paths",
            )
            return


def _check_root_resources_unchanged(
    raw: Mapping[str, Any], old: Mapping[str, Any], errors: Errors
) -> None:
    ospec = as_dict(old.get("spec")) or {}
    nspec = as_dict(raw.get("spec")) or {}
    for key in ("capability", "deserved", "guarantee"):
        if ospec.get(key) != nspec.get(key):
            errors.add(f"spec.{key}", "immutable", "the root queue's resources are immutable")


def _check_ancestors(name: str, parent: str, lookup: AdmissionLookup, errors: Errors) -> None:
    """The parent exists and the queue is not among its ancestors: a cycle refused on create
    could otherwise be made by an update (`kubectl patch q qa -p '{"spec":{"parent":"qb"}}'`)."""
    chain = [name]
    current: str | None = parent
    while current and current != ROOT_QUEUE:
        if current in chain:
            path = " -> ".join([*chain, current])
            errors.add("spec.parent", "parentCycle", f"queue hierarchy would have a cycle: {path}")
            return
        found = lookup.get_queue(current)
        if found is None:
            if current == parent:
                errors.add("spec.parent", "parentExists", f"parent queue {parent!r} does not exist")
            return
        chain.append(current)
        value = (as_dict(found.get("spec")) or {}).get("parent")
        current = value if isinstance(value, str) else None


def validate_queue_delete(
    obj: Mapping[str, Any], lookup: AdmissionLookup | None, errors: Errors
) -> None:
    name = (as_dict(obj.get("metadata")) or {}).get("name")
    if name in (ROOT_QUEUE, DEFAULT_QUEUE):
        errors.add("metadata.name", "deletionProtected", f"queue {name!r} cannot be deleted")
        return
    if lookup is None or not isinstance(name, str):
        return
    for other in lookup.list_queues():
        ospec = as_dict(other.get("spec")) or {}
        if ospec.get("parent") == name:
            oname = (as_dict(other.get("metadata")) or {}).get("name")
            errors.add("metadata.name", "hasChildren", f"queue {name!r} has child queue {oname!r}")
            return
