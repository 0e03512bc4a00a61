"""bus Command (`bus.volcano.sh/v1alpha1`, volcano-semantics.md#commands): an action for a Job or a
Queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.base import KubeModel
from batch.api.meta import ObjectMeta, OwnerReference

__all__ = ["Command", "queue_target"]


class Command(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    action: str | None = None
    target: OwnerReference | None = None
    reason: str | None = None
    message: str | None = None


def queue_target(cmd: Mapping[str, Any]) -> str | None:
    """The name of the Queue a raw Command targets (`target.kind: Queue`), None when it targets
    something else: the one test the queue controller and the webhook's access check share."""
    target = cmd.get("target")
    if not isinstance(target, Mapping) or target.get("kind") != "Queue":
        return None
    return str(target.get("name") or "")
