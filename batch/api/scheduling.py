"""Queue and PodGroup (`scheduling.volcano.sh/v1beta1`, volcano-semantics.md#queue-spec,
#podgroup-spec)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from batch.api.base import KubeModel, ResourceList
from batch.api.job import Count, NetworkTopologySpec
from batch.api.meta import LabelSelector, ObjectMeta

__all__ = [
    "Cluster",
    "Guarantee",
    "NodeGroupAffinity",
    "PodGroup",
    "PodGroupCondition",
    "PodGroupSpec",
    "PodGroupStatus",
    "Queue",
    "QueueAffinity",
    "QueueSpec",
    "QueueStatus",
    "Reservation",
    "SubGroupPolicy",
]


class Guarantee(KubeModel):
    resource: ResourceList | None = None


class NodeGroupAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(KubeModel):
    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class Cluster(KubeModel):
    name: str | None = None
    weight: int | None = None
    capacity: ResourceList | None = None


class QueueSpec(KubeModel):
    weight: int | None = Field(
        default=None, ge=1, le=65535, json_schema_extra={"x-tephra-default": 1}
    )
    capability: ResourceList | None = None
    reclaimable: bool | None = None
    guarantee: Guarantee | None = None
    deserved: ResourceList | None = None
    parent: str | None = None
    priority: int | None = Field(default=None, ge=0)
    affinity: QueueAffinity | None = None
    extend_clusters: list[Cluster] | None = None
    type: str | None = None
    dequeue_strategy: Literal["fifo", "traverse"] | None = None


class Reservation(KubeModel):
    nodes: list[str] | None = None
    resource: ResourceList | None = None


class QueueStatus(KubeModel):
    state: Literal["Open", "Closed", "Closing", "Unknown"] | None = None
    unknown: Count | None = None
    pending: Count | None = None
    running: Count | None = None
    inqueue: Count | None = None
    completed: Count | None = None
    reservation: Reservation | None = None
    allocated: ResourceList | None = None


class Queue(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: QueueSpec | None = None
    status: QueueStatus | None = None


class SubGroupPolicy(KubeModel):
    name: str | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int | None = Field(
        default=None, ge=1, json_schema_extra={"x-tephra-default": 1}
    )
    min_sub_groups: int | None = Field(
        default=None, ge=0, json_schema_extra={"x-tephra-default": 0}
    )
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None


class PodGroupSpec(KubeModel):
    min_member: int | None = Field(default=None, ge=0)
    min_task_member: dict[str, int] | None = None
    queue: str | None = Field(default=None, json_schema_extra={"x-tephra-default": "default"})
    priority_class_name: str | None = None
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] | None = None


class PodGroupCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    transition_id: str | None = Field(default=None, alias="transitionID")
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(KubeModel):
    phase: Literal["Pending", "Inqueue", "Running", "Unknown", "Completed"] | None = None
    conditions: list[PodGroupCondition] | None = None
    running: Count | None = None
    succeeded: Count | None = None
    failed: Count | None = None


class PodGroup(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodGroupSpec | None = None
    status: PodGroupStatus | None = None
