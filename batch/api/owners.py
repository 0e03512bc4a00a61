"""Which workload a PodGroup (or pod) belongs to, named as its users name it.

Why this exists: a PodGroup is an implementation detail; people know their VCJob, PyTorchJob or
RayCluster. The scheduler's eviction events, `tephra job why/list/view` and the dashboard all
name the workload that controls a PodGroup (its controller ownerReference), so that rule lives
once, here: a VCJob is `job NS/NAME`, any other owner `KIND NS/NAME`, and a PodGroup nobody owns
is itself (`PodGroup NS/NAME`). Adapters that make a gang for pods with no controller label the
PodGroup with the workload's kind and name (`batch.api.integration`), which count as its owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.constants import BATCH_GROUP

__all__ = [
    "VCJOB_KIND",
    "WORKLOAD_KIND_LABEL",
    "WORKLOAD_NAME_LABEL",
    "controller_ref",
    "workload_label",
    "workload_of",
]

#: how a VCJob (batch.volcano.sh Job) is named beside other kinds
VCJOB_KIND = "VCJob"
#: labels put on PodGroups Tephra creates, naming the workload (for listing and GC)
WORKLOAD_KIND_LABEL = "tephra.io/workload-kind"
WORKLOAD_NAME_LABEL = "tephra.io/workload-name"


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object's controller ownerReference, else its first one, else None (the one rule for
    "who owns this", read by the ledger, the dashboard and the CLI)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    owners = [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []
    for owner in owners:
        if owner.get("controller"):
            return dict(owner)
    return dict(owners[0]) if owners else None


def workload_of(podgroup: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the workload that owns `podgroup`: `VCJob` for a batch.volcano.sh Job,
    the owner's kind otherwise; ("PodGroup", its own name) when nothing owns it."""
    meta = podgroup.get("metadata") or {}
    owner = controller_ref(podgroup)
    if owner is not None and owner.get("kind") and owner.get("name"):
        kind = str(owner["kind"])
        if kind == "Job" and str(owner.get("apiVersion") or "").startswith(BATCH_GROUP):
            kind = VCJOB_KIND
        return kind, str(owner["name"])
    labels = meta.get("labels") or {}
    if labels.get(WORKLOAD_KIND_LABEL) and labels.get(WORKLOAD_NAME_LABEL):
        return str(labels[WORKLOAD_KIND_LABEL]), str(labels[WORKLOAD_NAME_LABEL])
    return "PodGroup", str(meta.get("name") or "")


def workload_label(podgroup: Mapping[str, Any]) -> str:
    """`job NS/NAME` for a VCJob's PodGroup, `KIND NS/NAME` for another owner's."""
    namespace = str((podgroup.get("metadata") or {}).get("namespace") or "default")
    kind, name = workload_of(podgroup)
    return f"{'job' if kind == VCJOB_KIND else kind} {namespace}/{name}"
