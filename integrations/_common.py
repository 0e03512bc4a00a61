"""Helpers every Tephra adapter uses: field access with clear errors, resource sums.

Why this exists: adapters read user-written workload objects; a bad field must become one
:class:`~batch.api.integration.GangError` line naming the object, the field path and the rule.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from batch.api.integration import GangError, WorkloadKind, annotations_of, pod_requests
from batch.api.quantity import QuantityError
from batch.api.resources import Resource, format_resource_list, parse_resource_list

#: Workload annotations with this prefix are copied onto the PodGroup (as Volcano's own
#: PodGroup controller copies owner annotations).
_COPIED_ANNOTATION_PREFIX = "volcano.sh/"

log = logging.getLogger(__name__)


class HasPodSpec(Protocol):
    @property
    def pod_spec(self) -> Mapping[str, Any]: ...


def describe(obj: Mapping[str, Any]) -> str:
    """``Kind ns/name`` for messages."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{obj.get('kind', '?')} {ns}/{name}"


def as_count(obj: Mapping[str, Any], value: Any, path: str, *, default: int) -> int:
    """A non-negative integer field (``default`` when absent); GangError otherwise."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GangError(f"{describe(obj)}: {path}: must be an integer >= 0, got {value!r}")
    return value


def canonical_resource_list(obj: Mapping[str, Any], rl: Any, path: str) -> dict[str, str]:
    """A user-given ResourceList in canonical Kubernetes form; GangError when malformed."""
    if not isinstance(rl, Mapping):
        raise GangError(f"{describe(obj)}: {path}: must be a map of resource quantities")
    try:
        return format_resource_list(parse_resource_list(rl))
    except QuantityError as exc:
        raise GangError(f"{describe(obj)}: {path}: {exc}") from None


def name_and_namespace(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise GangError(f"{describe(obj)}: metadata.name: required (not yet assigned)")
    return str(name), str(meta.get("namespace") or "default")


def copied_annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        k: str(v) for k, v in annotations_of(obj).items() if k.startswith(_COPIED_ANNOTATION_PREFIX)
    }


def sum_members(roles: Iterable[tuple[HasPodSpec, int]]) -> dict[str, str]:
    """ResourceList of ``count`` pods of each role."""
    total = Resource.zero()
    for role, count in roles:
        if count:
            total = total.add(pod_requests(role.pod_spec).scale(count))
    return total.to_list()


def is_kind(workload: Mapping[str, Any], kinds: Sequence[WorkloadKind], kind: str) -> bool:
    """Whether ``workload`` is ``kind`` of one of ``kinds`` (an object without apiVersion, as a
    stored manifest may be, matches by kind alone)."""
    if workload.get("kind") != kind:
        return False
    version = workload.get("apiVersion")
    return any(k.kind == kind and version in (None, "", k.api_version) for k in kinds)


def observed_requests(parts: Iterable[tuple[Mapping[str, Any], int]]) -> dict[str, int]:
    """Total requests of ``count`` pods of each pod spec, for the ledger: a pod spec with a
    malformed quantity is left out with a warning instead of raising."""
    total = Resource.zero()
    for pod_spec, count in parts:
        if count <= 0:
            continue
        try:
            total = total.add(pod_requests(pod_spec).scale(count))
        except GangError as exc:
            log.warning("ledger: ignoring the requests of a pod spec: %s", exc)
    return {k: v for k, v in total.items() if v}


def count_or_none(value: Any) -> int | None:
    """An integer field as the ledger reads it (None unless it is an integer)."""
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None
