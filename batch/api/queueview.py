"""A typed, read-only view of a Queue (`scheduling.volcano.sh/v1beta1`) as its controller reads it.

Why this exists: as `batch.api.jobview` for VCJobs (issue 32.1), the queue controller read a Queue
as a raw dict (``spec.parent``, ``status.state``, the closed-by-parent annotation), each reader
with its own defaults. A view is built once per object version (`queue_view`, cached by uid and
resourceVersion); the status as stored stays raw for the diff taking it to the next one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batch.api.constants import ANN_CLOSED_BY_PARENT, ROOT_QUEUE
from batch.api.views import VersionCache, as_mapping

__all__ = ["QueueView", "queue_view"]

_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class QueueView:
    """A Queue: its identity, its place in the hierarchy and its state."""

    name: str
    uid: str
    resource_version: str
    deleting: bool
    #: spec.parent as written ("" when unset: `root`, which the controller writes)
    parent_written: str
    #: status.state as written ("" when unset)
    state: str
    #: volcano.sh/closed-by-parent=true: closed because its parent closed
    closed_by_parent: bool
    #: the status as stored, for the patch taking it to the next one
    status: Mapping[str, Any]

    @property
    def parent(self) -> str | None:
        """The parent queue (None for `root`, `root` when unset)."""
        if self.name == ROOT_QUEUE:
            return None
        return self.parent_written or ROOT_QUEUE


def _build(obj: Mapping[str, Any]) -> QueueView:
    meta = as_mapping(obj.get("metadata"))
    spec, status = as_mapping(obj.get("spec")), as_mapping(obj.get("status"))
    return QueueView(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        parent_written=str(spec.get("parent") or ""),
        state=str(status.get("state") or ""),
        closed_by_parent=as_mapping(meta.get("annotations")).get(ANN_CLOSED_BY_PARENT) == "true",
        status=status,
    )


#: The view of Queue ``obj``, built once per uid and resourceVersion.
queue_view = VersionCache(_build, size=_CACHE_SIZE)
