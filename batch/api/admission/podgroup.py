"""PodGroup admission (volcano-semantics.md#podgroup-spec): queue from the namespace, gang sizes,
sub-groups.

Defaulting (CREATE): a PodGroup whose queue is empty or `default` takes the queue named by its
namespace's annotation `scheduling.volcano.sh/queue-name` (Volcano's PodGroup mutating webhook).
Validation: minMember >= 0, minTaskMember values >= 0, minResources quantities, networkTopology
exclusivity, unique subGroupPolicy names; on CREATE, and on an UPDATE that moves it, the queue
must be an Open leaf queue other than `root` (issue 30: a user moved one into `root`). The
scheduler checks every minTaskMember role and subGroupPolicy entry of every gang in every
session, so there are at most as many of each as a job may have tasks (`limits.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.constants import ANN_QUEUE_NAME, DEFAULT_QUEUE
from batch.api.scheduling import PodGroup

from .common import Errors, as_dict, check_amount, join
from .job import check_queue, validate_network_topology
from .limits import DEFAULT_LIMITS, AdmissionLimits
from .types import AdmissionLookup

__all__ = ["mutate_podgroup", "validate_podgroup"]


def mutate_podgroup(obj: dict[str, Any], lookup: AdmissionLookup | None) -> None:
    spec = as_dict(obj.get("spec"))
    if spec is None or lookup is None:
        return
    queue = spec.get("queue")
    if queue not in (None, "", DEFAULT_QUEUE):
        return
    meta = as_dict(obj.get("metadata")) or {}
    ns_name = meta.get("namespace")
    ns = lookup.get_namespace(ns_name if isinstance(ns_name, str) and ns_name else "default")
    if ns is None:
        return
    ann = as_dict((as_dict(ns.get("metadata")) or {}).get("annotations")) or {}
    target = ann.get(ANN_QUEUE_NAME)
    if isinstance(target, str) and target:
        spec["queue"] = target


def validate_podgroup(
    pg: PodGroup,
    *,
    operation: str,
    lookup: AdmissionLookup | None,
    errors: Errors,
    limits: AdmissionLimits = DEFAULT_LIMITS,
    old: Mapping[str, Any] | None = None,
) -> None:
    """The rules of a PodGroup on CREATE and UPDATE (`old`: the stored PodGroup)."""
    spec = pg.spec
    if spec is None:
        return
    for path, items in (
        ("spec.minTaskMember", spec.min_task_member),
        ("spec.subGroupPolicy", spec.sub_group_policy),
    ):
        too_many = limits.tasks_error(len(items or ()))
        if too_many:
            errors.add(path, "maxTasks", f"{too_many} (one entry per task)")
            return
    for task, n in (spec.min_task_member or {}).items():
        if n < 0:
            errors.add(join("spec.minTaskMember", task), "minimum", "must be >= 0")
    for rname, value in (spec.min_resources or {}).items():
        check_amount(rname, value, join("spec.minResources", rname), errors)
    validate_network_topology(spec.network_topology, "spec.networkTopology", errors)
    names: set[str] = set()
    for i, sg in enumerate(spec.sub_group_policy or []):
        spath = join("spec.subGroupPolicy", i)
        if sg.name:
            if sg.name in names:
                errors.add(join(spath, "name"), "unique", f"duplicate subGroupPolicy {sg.name!r}")
            names.add(sg.name)
        validate_network_topology(sg.network_topology, join(spath, "networkTopology"), errors)
    _check_queue_move(spec.queue or DEFAULT_QUEUE, operation, old, lookup, errors)


def _check_queue_move(
    queue: str,
    operation: str,
    old: Mapping[str, Any] | None,
    lookup: AdmissionLookup | None,
    errors: Errors,
) -> None:
    """The queue of a new PodGroup, or the new queue of a moved one, is a leaf queue that exists
    and is Open, never `root` (as a job's: `job.check_queue`). An UPDATE that keeps its queue is
    not checked, so closing a queue never freezes the PodGroups already in it."""
    if operation == "UPDATE" and old is not None:
        before = (as_dict(old.get("spec")) or {}).get("queue") or DEFAULT_QUEUE
        if before == queue:
            return
    elif operation != "CREATE":
        return
    check_queue(queue, "spec.queue", lookup, errors, what="PodGroups")
