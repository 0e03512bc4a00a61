"""Typed, read-only views of the API objects the scheduler, controllers, ledger and screens read.

Why this exists: a PodGroup read as a raw dict was parsed again by every reader (the scheduler's
cache, `job why`, `job list`, the dashboard, the ledger), each with its own defaults and string
keys (issue 32.1). A view is built once per object version (`podgroup_view`, cached by uid and
resourceVersion) and read through typed attributes; raw dicts stay at the I/O edge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from batch.api.owners import controller_ref

__all__ = ["PodGroupView", "VersionCache", "as_mapping", "podgroup_view"]

_CACHE_SIZE = 8192
V = TypeVar("V")


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (a raw object's field read safely)."""
    if type(value) is dict:  # decoded JSON: skips the ABC check (millions per watch burst)
        return value
    return value if isinstance(value, Mapping) else {}


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


@dataclass(frozen=True, slots=True)
class PodGroupView:
    """A PodGroup (`scheduling.volcano.sh/v1beta1`) as its readers use it."""

    namespace: str
    name: str
    uid: str
    #: metadata.creationTimestamp as written ("" when unset)
    created: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    #: its controller ownerReference, else its first (`batch.api.owners.controller_ref`)
    owner: Mapping[str, Any] | None
    #: spec.queue; "" when unset (the scheduler's `--default-queue`, "default" on screens)
    queue: str
    #: spec.minMember; None when unset
    min_member: int | None
    min_task_member: Mapping[str, int]
    #: spec.minResources as written (a ResourceList); None when unset
    min_resources: Mapping[str, Any] | None
    priority_class_name: str
    network_topology: Any
    #: status.phase as written ("" when unset: the scheduler has not written it yet)
    status_phase: str
    conditions: tuple[Mapping[str, Any], ...]
    running: int
    succeeded: int
    failed: int

    @property
    def phase(self) -> str:
        """status.phase, Pending until written."""
        return self.status_phase or "Pending"

    @property
    def queue_or_default(self) -> str:
        return self.queue or "default"

    def condition(self, *kinds: str) -> Mapping[str, Any] | None:
        """The latest condition whose status is True of one of the types ``kinds``, or None."""
        found = [c for c in self.conditions if c.get("type") in kinds and c.get("status") == "True"]
        found.sort(key=lambda c: str(c.get("lastTransitionTime") or ""))
        return found[-1] if found else None


class VersionCache(Generic[V]):
    """Views built once per object version: keyed by uid and resourceVersion, emptied when
    full (an object without either, such as one not yet stored, is read every time)."""

    def __init__(self, build: Callable[[Mapping[str, Any]], V], size: int = _CACHE_SIZE) -> None:
        self.build = build
        self.size = size
        self._views: dict[tuple[str, str], V] = {}

    def __call__(self, obj: Mapping[str, Any]) -> V:
        meta = as_mapping(obj.get("metadata"))
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        if not all(key):
            return self.build(obj)
        got = self._views.get(key)
        if got is None:
            if len(self._views) >= self.size:
                self._views.clear()
            got = self._views[key] = self.build(obj)
        return got


def _build(obj: Mapping[str, Any]) -> PodGroupView:
    meta = as_mapping(obj.get("metadata"))
    spec, status = as_mapping(obj.get("spec")), as_mapping(obj.get("status"))
    mm = spec.get("minMember")
    min_res = spec.get("minResources")
    conditions = status.get("conditions")
    return PodGroupView(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        labels={str(k): str(v) for k, v in as_mapping(meta.get("labels")).items()},
        annotations={str(k): str(v) for k, v in as_mapping(meta.get("annotations")).items()},
        owner=controller_ref({"metadata": meta}),
        queue=str(spec.get("queue") or ""),
        min_member=mm if isinstance(mm, int) and not isinstance(mm, bool) else None,
        min_task_member={str(k): int(v) for k, v in as_mapping(spec.get("minTaskMember")).items()},
        min_resources=as_mapping(min_res) if min_res is not None else None,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        network_topology=spec.get("networkTopology"),
        status_phase=str(status.get("phase") or ""),
        conditions=tuple(dict(c) for c in conditions if isinstance(c, Mapping))
        if isinstance(conditions, list)
        else (),
        running=_count(status.get("running")),
        succeeded=_count(status.get("succeeded")),
        failed=_count(status.get("failed")),
    )


#: The view of PodGroup ``obj``, built once per uid and resourceVersion.
podgroup_view = VersionCache(_build)
