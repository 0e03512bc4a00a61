"""Typed intended changes returned by the pure reconcilers.

A reconciler never talks to the API server: it returns a list of these, in the order they must be
applied (a state transition is always written before the kills it implies, so a controller killed
between two writes re-derives the rest from the stored status; see docs/controllers.md). What
each means is decided once, by `batch.controllers.interpreter`, through which the API shell, the
in-memory runner and the simulator apply them. (Named effects to keep them apart from the
scheduler's session actions, `batch.scheduler.actions`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Identifies one object: apiVersion, kind, namespace ("" for cluster scope), name.

    `resource_version` is the version the reconcile saw; only events carry it (it takes no part
    in comparing references).
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None
    resource_version: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name", "")),
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
        )


@dataclass(frozen=True, slots=True)
class CreateObject:
    """Create `body`; an AlreadyExists (409) answer counts as success (names are deterministic)."""

    body: JSON

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.body)


@dataclass(frozen=True, slots=True)
class PatchObject:
    """JSON merge-patch of the main resource (metadata/spec)."""

    ref: ObjectRef
    patch: JSON


@dataclass(frozen=True, slots=True)
class PatchStatus:
    """JSON merge-patch of the `status` subresource; `status` is the new status fragment."""

    ref: ObjectRef
    status: JSON


@dataclass(frozen=True, slots=True)
class DeleteObject:
    """Delete the object (NotFound counts as success). With `uid`, only that incarnation."""

    ref: ObjectRef


@dataclass(frozen=True, slots=True)
class EmitEvent:
    """A core/v1 Event about `ref`."""

    ref: ObjectRef
    reason: str
    message: str
    type: str = "Normal"


Action = CreateObject | PatchObject | PatchStatus | DeleteObject | EmitEvent


@dataclass(slots=True)
class ReconcileResult:
    """What a reconcile wants: ordered actions, and when to look again (seconds), if ever."""

    actions: list[Action] = field(default_factory=list)
    requeue_after: float | None = None
    notes: list[str] = field(default_factory=list)

    def requeue(self, seconds: float) -> None:
        """Ask to be called again after `seconds` (keeps the earliest request)."""
        seconds = max(0.0, seconds)
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds

    def of_type(self, kind: type[Any]) -> list[Any]:
        """The actions of one class (handy in tests)."""
        return [a for a in self.actions if isinstance(a, kind)]
