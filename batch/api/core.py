"""The parts of core/v1 pod templates that Tephra reads, typed; the rest kept verbatim.

Typed: container resources and ports (hostPort), nodeSelector, affinity, tolerations,
schedulerName, priorityClassName, schedulingGates, restartPolicy, hostNetwork/dnsPolicy.
Everything else in a pod spec survives a load/dump round trip unchanged (`extra="allow"`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from batch.api.base import KubeModel, ResourceList
from batch.api.meta import LabelSelector, ObjectMeta

__all__ = [
    "Affinity",
    "Container",
    "ContainerPort",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodAffinity",
    "PodAffinityTerm",
    "PodSchedulingGate",
    "PodSpec",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "Toleration",
    "WeightedPodAffinityTerm",
]


class ResourceRequirements(KubeModel):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ContainerPort(KubeModel):
    name: str | None = None
    container_port: int | None = None
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")
    protocol: str | None = None


class Container(KubeModel):
    name: str | None = None
    image: str | None = None
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] | None = None


class Toleration(KubeModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(KubeModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        None
    )


class PodAffinityTerm(KubeModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str | None = None
    namespace_selector: LabelSelector | None = None


class WeightedPodAffinityTerm(KubeModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeModel):
    """Used for both podAffinity and podAntiAffinity."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        None
    )


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class PodSchedulingGate(KubeModel):
    name: str


class PodSpec(KubeModel):
    crd_preserve_unknown: ClassVar[bool] = True

    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    node_selector: dict[str, str] | None = None
    node_name: str | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    scheduling_gates: list[PodSchedulingGate] | None = None
    restart_policy: Literal["Always", "OnFailure", "Never"] | None = None
    host_network: bool | None = None
    dns_policy: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    termination_grace_period_seconds: int | None = None


class TemplateMeta(ObjectMeta):
    """Pod template metadata (kept whole: Volcano prunes nothing a pod may use)."""

    crd_preserve_unknown: ClassVar[bool] = True


class PodTemplateSpec(KubeModel):
    crd_preserve_unknown: ClassVar[bool] = True

    metadata: TemplateMeta | None = None
    spec: PodSpec | None = None
