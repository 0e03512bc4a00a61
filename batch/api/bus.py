"""bus Command (`bus.volcano.sh/v1alpha1`, volcano-semantics.md#commands): an action for a Job or a
Queue."""

from __future__ import annotations

from batch.api.base import KubeModel
from batch.api.meta import ObjectMeta, OwnerReference

__all__ = ["Command"]


class Command(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    action: str | None = None
    target: OwnerReference | None = None
    reason: str | None = None
    message: str | None = None
