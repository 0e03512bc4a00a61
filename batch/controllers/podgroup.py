"""The PodGroup reconciler for pods that no VCJob created
(`volcano-semantics.md#podgroup-controller, #framework-integrations`).

Two paths, both pure:
* **Volcano's default** (`reconcile_plain_pod`): a pod whose schedulerName is ours and which names
  no PodGroup gets `podgroup-<controller owner uid>` (one per ReplicaSet, StatefulSet, batch Job,
  ...) or `podgroup-<pod uid>` for a bare pod, with minMember from the owner's
  `scheduling.volcano.sh/group-min-member`, minResources = pod requests x minMember, queue from
  the pod's `scheduling.volcano.sh/queue-name`, priorityClassName from the pod, `volcano.sh/`
  owner annotations, network topology from pod annotations; then the pod is annotated with
  `scheduling.k8s.io/group-name`.
* **Framework adapters** (`reconcile_adapter_pod`): when an adapter loaded from the
  `tephra.integrations` entry points claims the pod, its `GangSpec` and
  `batch.controllers.gang.decide_podgroup` decide create/update/adopt/wait. When the adapter
  has no gang for the pod's workload (`gang_for_workload` returns None, e.g. Spark executors
  whose driver is an ordinary notebook pod), the pod takes the default path like any other.
`reconcile_group` marks a group Completed when its workload finished and deletes orphans (owner
gone, or a ReplicaSet/StatefulSet scaled to zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from batch.api.integration import (
    GangSpec,
    WorkloadAdapter,
)
from batch.api.mergepatch import merge_patch
from batch.api.owners import controller_ref
from batch.controllers import constants as c
from batch.controllers.effects import (
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.gang import PodGroupAction, decide_podgroup
from batch.controllers.jobspec import meta
from batch.controllers.quantities import ResourceSum, pod_request_lists
from batch.controllers.timeutil import parse_time

JSON = dict[str, Any]

CREATED_BY = "tephra.io/created-by"
CREATED_BY_CONTROLLER = "podgroup-controller"
_COPIED_POD_KEYS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)


controller_owner = controller_ref


def is_vcjob_pod(pod: Mapping[str, Any]) -> bool:
    owner = controller_owner(pod)
    return bool(
        owner
        and owner.get("kind") == "Job"
        and str(owner.get("apiVersion", "")).startswith(c.BATCH_GROUP)
    )


def wants_group(pod: Mapping[str, Any], *, scheduler_names: Sequence[str]) -> bool:
    """Whether the default path applies: our scheduler, no group yet, not a VCJob's pod."""
    spec = pod.get("spec") or {}
    if str(spec.get("schedulerName") or "") not in scheduler_names:
        return False
    if (meta(pod).get("annotations") or {}).get(c.GROUP_NAME_ANNOTATION):
        return False
    if meta(pod).get("deletionTimestamp"):
        return False
    return not is_vcjob_pod(pod)


def plain_podgroup_name(pod: Mapping[str, Any]) -> str:
    owner = controller_owner(pod)
    uid = owner.get("uid") if owner else meta(pod).get("uid")
    return f"podgroup-{uid}"


def build_plain_podgroup(
    pod: Mapping[str, Any],
    owner_obj: Mapping[str, Any] | None,
    *,
    inherit_owner_annotations: bool = True,
) -> JSON:
    pm = meta(pod)
    pod_ann = pm.get("annotations") or {}
    pod_labels = pm.get("labels") or {}
    owner_ann = (meta(owner_obj).get("annotations") or {}) if owner_obj else {}
    min_member = 1
    if inherit_owner_annotations and owner_ann.get(c.GROUP_MIN_MEMBER):
        try:
            min_member = max(0, int(owner_ann[c.GROUP_MIN_MEMBER]))
        except (TypeError, ValueError):
            min_member = 1
    requests, _limits = pod_request_lists(pod.get("spec") or {})
    total = ResourceSum()
    total.add(requests, times=min_member)
    annotations: JSON = {k: v for k, v in owner_ann.items() if str(k).startswith("volcano.sh/")}
    labels: JSON = {}
    for key in _COPIED_POD_KEYS:
        if key in pod_ann:
            annotations[key] = pod_ann[key]
        if key in pod_labels:
            labels[key] = pod_labels[key]
    annotations[CREATED_BY] = CREATED_BY_CONTROLLER
    owners = list(pm.get("ownerReferences") or [])
    if not owners:
        owners = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pm.get("name"),
                "uid": pm.get("uid"),
                "controller": True,
            }
        ]
    spec: JSON = {
        "minMember": min_member,
        "minResources": total.to_list(),
        "queue": str(pod_ann.get(c.POD_QUEUE_ANNOTATION) or c.DEFAULT_QUEUE),
    }
    pcn = (pod.get("spec") or {}).get("priorityClassName")
    if pcn:
        spec["priorityClassName"] = pcn
    mode = pod_ann.get(c.NETWORK_TOPOLOGY_MODE)
    tier = pod_ann.get(c.NETWORK_TOPOLOGY_TIER)
    if mode or tier:
        nt: JSON = {"mode": mode or "hard"}
        if tier and str(tier).isdigit():
            nt["highestTierAllowed"] = int(tier)
        spec["networkTopology"] = nt
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {
            "name": plain_podgroup_name(pod),
            "namespace": pm.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": owners,
        },
        "spec": spec,
        "status": {"phase": c.PG_PENDING},
    }


def _annotate_pod(pod: Mapping[str, Any], group: str, role: str | None = None) -> PatchObject:
    ann: JSON = {c.GROUP_NAME_ANNOTATION: group}
    if role and not (meta(pod).get("annotations") or {}).get(c.TASK_SPEC):
        ann[c.TASK_SPEC] = role
    return PatchObject(
        ObjectRef.of({**pod, "kind": "Pod", "apiVersion": "v1"}), {"metadata": {"annotations": ann}}
    )


def reconcile_plain_pod(
    pod: Mapping[str, Any],
    *,
    owner_obj: Mapping[str, Any] | None,
    podgroup: Mapping[str, Any] | None,
    scheduler_names: Sequence[str] = c.DEFAULT_SCHEDULER_NAMES,
    inherit_owner_annotations: bool = True,
) -> ReconcileResult:
    """Volcano's default path for one pod (`podgroup` = the existing `podgroup-<uid>` or None)."""
    result = ReconcileResult()
    if not wants_group(pod, scheduler_names=scheduler_names):
        return result
    name = plain_podgroup_name(pod)
    want = build_plain_podgroup(pod, owner_obj, inherit_owner_annotations=inherit_owner_annotations)
    if podgroup is None:
        result.actions.append(CreateObject(want))
    elif (meta(podgroup).get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
        # Volcano refreshes the group from the workload's newest pod (owner updated/scaled).
        have = podgroup.get("spec") or {}
        keys = ("minMember", "minResources", "priorityClassName")
        patch = merge_patch(
            {k: have.get(k) for k in keys if k in have or k in want["spec"]},
            {k: want["spec"][k] for k in keys if k in want["spec"]},
        )
        if patch:
            ref = ObjectRef(c.SCHED_API, "PodGroup", str(meta(pod).get("namespace") or ""), name)
            result.actions.append(PatchObject(ref, {"spec": patch}))
    result.actions.append(_annotate_pod(pod, name))
    return result


def reconcile_adapter_pod(
    pod: Mapping[str, Any],
    *,
    adapter: WorkloadAdapter,
    gang: GangSpec,
    podgroup: Mapping[str, Any] | None,
    now: datetime,
    workload: Mapping[str, Any],
    namespace_obj: Mapping[str, Any] | None = None,
    leader_running: bool = False,
    workload_finished: bool = False,
) -> ReconcileResult:
    """A pod an adapter claimed: make sure its gang's PodGroup exists and the pod names it.

    A finished pod, or any pod of a finished workload, brings no PodGroup back: operators
    delete theirs when the job ends and the pods that stay behind must not re-create one that
    would then hold the queue's resources."""
    result = ReconcileResult()
    if podgroup is None and (workload_finished or pod_done(pod)):
        result.notes.append("finished: no PodGroup re-created")
        return result
    created = parse_time(meta(workload).get("creationTimestamp"))
    age = (now - created).total_seconds() if created else 0.0
    current = (meta(pod).get("annotations") or {}).get(c.GROUP_NAME_ANNOTATION)
    decision = decide_podgroup(
        gang,
        podgroup,
        leader_running=leader_running,
        workload_age_seconds=age,
        namespace_obj=namespace_obj,
        pods_exist=True,
        pod_group_names=[current] if current else [],
    )
    if decision.action is PodGroupAction.WAIT:
        result.requeue(max(1.0, gang.adopt_grace_seconds - age))
        result.notes.append(decision.reason)
        return result
    if decision.action is PodGroupAction.REPLACE and podgroup is not None:
        uid = meta(podgroup).get("uid")
        result.actions.append(
            DeleteObject(ObjectRef(c.SCHED_API, "PodGroup", gang.namespace, decision.name, uid))
        )
        result.requeue(1.0)  # the deletion's event also brings the pods back; this is a floor
        result.notes.append(decision.reason)
        return result
    if decision.action is PodGroupAction.CREATE and decision.body is not None:
        result.actions.append(CreateObject(decision.body))
    elif decision.action is PodGroupAction.UPDATE and decision.body is not None:
        result.actions.append(
            PatchObject(
                ObjectRef(c.SCHED_API, "PodGroup", gang.namespace, decision.name), decision.body
            )
        )
    role = adapter.role_of_pod(pod)
    if current != decision.name or (
        role and not (meta(pod).get("annotations") or {}).get(c.TASK_SPEC)
    ):
        result.actions.append(_annotate_pod(pod, decision.name, role))
    return result


def pod_done(pod: Mapping[str, Any]) -> bool:
    """Finished, or on its way out: no PodGroup is made again for it."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool(meta(pod).get("deletionTimestamp"))


def _owner_finished(owner_obj: Mapping[str, Any]) -> bool:
    kind = owner_obj.get("kind")
    status = owner_obj.get("status") or {}
    if kind == "Job" and str(owner_obj.get("apiVersion", "")).startswith("batch/"):
        return any(
            cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
            for cond in status.get("conditions") or []
        )
    return False


def reconcile_group(
    podgroup: Mapping[str, Any],
    *,
    owners: Mapping[str, Mapping[str, Any] | None],
    pods: Sequence[Mapping[str, Any]],
) -> ReconcileResult:
    """Completion and garbage collection for a PodGroup this controller created.

    `owners` maps each ownerReference uid to the owner object (None when it no longer exists);
    `pods` are the pods naming the group.
    """
    result = ReconcileResult()
    m = meta(podgroup)
    if m.get("deletionTimestamp"):
        return result
    if (m.get("annotations") or {}).get(CREATED_BY) != CREATED_BY_CONTROLLER:
        return result
    ref = ObjectRef(
        c.SCHED_API, "PodGroup", str(m.get("namespace") or ""), str(m.get("name")), m.get("uid")
    )
    refs = list(m.get("ownerReferences") or [])
    if refs and all(owners.get(str(o.get("uid"))) is None for o in refs):
        result.actions.append(DeleteObject(ref))
        return result
    for o in refs:
        obj = owners.get(str(o.get("uid")))
        if obj is None:
            continue
        if o.get("kind") in ("ReplicaSet", "StatefulSet"):
            replicas = (obj.get("spec") or {}).get("replicas")
            if replicas is not None and int(replicas) == 0:
                result.actions.append(DeleteObject(ref))
                return result
    phase = (podgroup.get("status") or {}).get("phase")
    finished_owner = any(
        _owner_finished(obj) for obj in (owners.get(str(o.get("uid"))) for o in refs) if obj
    )
    live = [p for p in pods if not meta(p).get("deletionTimestamp")]
    all_pods_done = bool(live) and all(
        (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in live
    )
    bare = any(o.get("kind") == "Pod" for o in refs)
    if phase != c.PG_COMPLETED and (finished_owner or (bare and all_pods_done)):
        result.actions.append(PatchStatus(ref, {"phase": c.PG_COMPLETED}))
    return result
