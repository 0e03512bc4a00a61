"""PodGroup admission (volcano-semantics.md#podgroup-spec): queue from the namespace, gang sizes,
sub-groups.

Defaulting (CREATE): a PodGroup whose queue is empty or `default` takes the queue named by its
namespace's annotation `scheduling.volcano.sh/queue-name` (Volcano's PodGroup mutating webhook).
Validation: minMember >= 0, minTaskMember values >= 0, minResources quantities, networkTopology
exclusivity, unique subGroupPolicy names; on CREATE the queue must exist and be Open. The
scheduler checks every minTaskMember role and subGroupPolicy entry of every gang in every
session, so there are at most as many of each as a job may have tasks (`limits.py`).
"""

from __future__ import annotations

from typing import Any

from batch.api.constants import ANN_QUEUE_NAME, DEFAULT_QUEUE, QUEUE_OPEN
from batch.api.scheduling import PodGroup

from .common import Errors, as_dict, check_amount, join
from .job import validate_network_topology
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
) -> None:
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
    if operation == "CREATE" and lookup is not None:
        queue = spec.queue or DEFAULT_QUEUE
        found = lookup.get_queue(queue)
        if found is None:
            errors.add("spec.queue", "queueExists", f"queue {queue!r} does not exist")
        else:
            state = (as_dict(found.get("status")) or {}).get("state") or QUEUE_OPEN
            if state != QUEUE_OPEN:
                errors.add(
                    "spec.queue", "queueOpen", f"queue {queue!r} is {state}, it must be Open"
                )
