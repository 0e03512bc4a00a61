"""The registry of kinds Tephra serves: group, version, names, scope, printer columns, model.

One table used by CRD generation, `tephra validate`, the sandbox API server and admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from batch.api.base import KubeModel
from batch.api.bus import Command
from batch.api.constants import BATCH_GROUP, BUS_GROUP, SCHEDULING_GROUP, TOPOLOGY_GROUP
from batch.api.cronjob import CronJob
from batch.api.job import Job
from batch.api.scheduling import PodGroup, Queue
from batch.api.topology import HyperNode

__all__ = ["KINDS", "KindInfo", "PrinterColumn", "kind_for", "kind_for_object"]


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: Literal["string", "integer", "date", "boolean", "number"]
    priority: int = 0
    description: str = ""

    def to_crd(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.priority:
            out["priority"] = self.priority
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class KindInfo:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Literal["Namespaced", "Cluster"]
    model: type[KubeModel]
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"


_AGE = PrinterColumn("AGE", ".metadata.creationTimestamp", "date")

KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        group=BATCH_GROUP,
        version="v1alpha1",
        kind="Job",
        plural="jobs",
        singular="job",
        scope="Namespaced",
        model=Job,
        short_names=("vcjob", "vj"),
        printer_columns=(
            PrinterColumn("STATUS", ".status.state.phase", "string"),
            PrinterColumn("minAvailable", ".status.minAvailable", "integer"),
            PrinterColumn("RUNNINGS", ".status.running", "integer"),
            _AGE,
            PrinterColumn("QUEUE", ".spec.queue", "string", priority=1),
        ),
    ),
    KindInfo(
        group=BATCH_GROUP,
        version="v1alpha1",
        kind="CronJob",
        plural="cronjobs",
        singular="cronjob",
        scope="Namespaced",
        model=CronJob,
        short_names=("cronvcjob", "cronvj"),
        printer_columns=(
            PrinterColumn("SCHEDULE", ".spec.schedule", "string"),
            PrinterColumn("SUSPEND", ".spec.suspend", "boolean"),
            PrinterColumn("LAST SCHEDULE", ".status.lastScheduleTime", "date"),
            _AGE,
        ),
    ),
    KindInfo(
        group=BUS_GROUP,
        version="v1alpha1",
        kind="Command",
        plural="commands",
        singular="command",
        scope="Namespaced",
        model=Command,
        status_subresource=False,
    ),
    KindInfo(
        group=SCHEDULING_GROUP,
        version="v1beta1",
        kind="PodGroup",
        plural="podgroups",
        singular="podgroup",
        scope="Namespaced",
        model=PodGroup,
        short_names=("pg", "podgroup-v1beta1"),
        # As Volcano's CRD: its scheduler and controllers write PodGroup status with a plain
        # update, which a status subresource would silently strip (volcano-semantics.md#crds).
        status_subresource=False,
        printer_columns=(
            PrinterColumn("STATUS", ".status.phase", "string"),
            PrinterColumn("minMember", ".spec.minMember", "integer"),
            PrinterColumn("RUNNINGS", ".status.running", "integer"),
            _AGE,
            PrinterColumn("QUEUE", ".spec.queue", "string", priority=1),
        ),
    ),
    KindInfo(
        group=SCHEDULING_GROUP,
        version="v1beta1",
        kind="Queue",
        plural="queues",
        singular="queue",
        scope="Cluster",
        model=Queue,
        short_names=("q", "queue-v1beta1"),
        printer_columns=(
            PrinterColumn(
                "PARENT", ".spec.parent", "string", description="The parent queue of this queue"
            ),
        ),
    ),
    KindInfo(
        group=TOPOLOGY_GROUP,
        version="v1alpha1",
        kind="HyperNode",
        plural="hypernodes",
        singular="hypernode",
        scope="Cluster",
        model=HyperNode,
        short_names=("hn",),
        printer_columns=(
            PrinterColumn("Tier", ".spec.tier", "string"),
            PrinterColumn("TierName", ".spec.tierName", "string"),
            PrinterColumn("NodeCount", ".status.nodeCount", "integer"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
    ),
)

_BY_GVK: dict[tuple[str, str], KindInfo] = {(k.api_version, k.kind): k for k in KINDS}


def kind_for(api_version: str, kind: str) -> KindInfo | None:
    """The served kind for an apiVersion/kind pair, or None when Tephra does not serve it."""
    return _BY_GVK.get((api_version, kind))


def kind_for_object(obj: Mapping[str, Any]) -> KindInfo | None:
    """The served kind of a raw object (by its apiVersion and kind), or None."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return kind_for(api_version, kind)
