"""Kubernetes object metadata and the small shared types (owner references, label selectors).

Only what Tephra reads is typed; everything else is kept verbatim by `KubeModel`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from batch.api.base import KubeModel

__all__ = [
    "Condition",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ObjectMeta",
    "OwnerReference",
]


class OwnerReference(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(KubeModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Condition(KubeModel):
    """metav1.Condition-like entry (type, status, reason, message, times)."""

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = Field(default=None, ge=0)
