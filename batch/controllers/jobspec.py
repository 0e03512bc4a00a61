"""What a VCJob asks for: its tasks, its PodGroup (with minResources) and its pods.

Pure builders used by the job reconciler (`volcano-semantics.md#job-podgroup-and-pods`): the
PodGroup `<job>-<uid>` with
minMember, minTaskMember, minResources (Volcano's calcPGMinResources ordering), queue,
priorityClassName, networkTopology and subGroupPolicy; pods `<job>-<task>-<index>` with Volcano's
annotations and labels; PVC names for `volumes[].volumeClaim`, and the pod volume names that
mount them (`tephra-pvc-<hash of the claim>`: a valid DNS-1123 label, never a template's volume).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batch.api.defaults import (
    default_job_min_available,
    default_task_min_available,
    max_retry,
    task_name,
    unset_or_zero,
)
from batch.controllers import constants as c
from batch.controllers.quantities import ResourceSum, pod_request_lists, quota_keys

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task of a job with its defaults applied."""

    name: str
    index: int
    replicas: int
    min_available: int
    max_retry: int
    template: Mapping[str, Any]
    policies: list[Mapping[str, Any]]
    depends_on: Mapping[str, Any] | None
    partition: Mapping[str, Any] | None
    topology_policy: str | None


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def tasks_of(job: Mapping[str, Any]) -> list[TaskView]:
    """The job's tasks with webhook defaults applied (name `default<i>`, minAvailable, maxRetry)."""
    out = []
    for i, t in enumerate((job.get("spec") or {}).get("tasks") or []):
        replicas = int(t.get("replicas") or 0)
        part = t.get("partitionPolicy")
        if t.get("minAvailable") is not None:
            min_av = int(t["minAvailable"])
        else:
            default = default_task_min_available(t)
            min_av = replicas if default is None else default
        out.append(
            TaskView(
                name=task_name(t, i),
                index=i,
                replicas=replicas,
                min_available=min_av,
                max_retry=int(max_retry(t.get("maxRetry"))),
                template=t.get("template") or {},
                policies=list(t.get("policies") or []),
                depends_on=t.get("dependsOn"),
                partition=part,
                topology_policy=t.get("topologyPolicy"),
            )
        )
    return out


def job_min_available(job: Mapping[str, Any], tasks: Sequence[TaskView] | None = None) -> int:
    """spec.minAvailable, else the webhook default from the tasks (`tasks`: `tasks_of(job)`
    when the caller has parsed them already)."""
    spec = job.get("spec") or {}
    if not unset_or_zero(spec.get("minAvailable")):
        return int(spec["minAvailable"])
    views = tasks_of(job) if tasks is None else tasks
    return default_job_min_available(t.min_available for t in views)


def podgroup_name(job: Mapping[str, Any]) -> str:
    m = meta(job)
    return f"{m.get('name')}-{m.get('uid')}"


def pod_name(job_name: str, task: str, index: int) -> str:
    return f"{job_name}-{task}-{index}"


def owner_ref(obj: Mapping[str, Any], *, controller: bool = True) -> JSON:
    m = meta(obj)
    return {
        "apiVersion": obj.get("apiVersion", c.BATCH_API),
        "kind": obj.get("kind", "Job"),
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def owned_by_job(obj: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether the job controls ``obj``: an ownerReference with the job's uid and
    ``controller: true`` (a name match, or a plain owner, is not enough)."""
    uid = meta(job).get("uid")
    return bool(uid) and any(
        ref.get("uid") == uid and ref.get("controller") is True
        for ref in meta(obj).get("ownerReferences") or []
    )


def _task_priority(task: TaskView, priority_values: Mapping[str, int]) -> int:
    spec = task.template.get("spec") or {}
    return int(priority_values.get(str(spec.get("priorityClassName") or ""), 0))


def min_resources(
    job: Mapping[str, Any],
    *,
    priority_values: Mapping[str, int] | None = None,
    tasks: Sequence[TaskView] | None = None,
) -> dict[str, str]:
    """Volcano's calcPGMinResources: the requests of the first minAvailable pods, by priority."""
    pv = priority_values or {}
    views = tasks_of(job) if tasks is None else tasks
    job_min = job_min_available(job, views)
    tasks = sorted(views, key=lambda t: -_task_priority(t, pv))
    counts: dict[str, int] = {}
    if job_min < sum(t.min_available for t in tasks):
        remaining = job_min
        for t in tasks:
            take = min(t.replicas, remaining)
            counts[t.name] = take
            remaining -= take
    else:
        taken = 0
        for t in tasks:
            take = min(t.min_available, max(0, job_min - taken))
            counts[t.name] = take
            taken += take
        for t in tasks:
            if taken >= job_min:
                break
            spare = t.replicas - t.min_available
            take = min(spare, job_min - taken)
            counts[t.name] = counts.get(t.name, 0) + take
            taken += take
    total = ResourceSum()
    for t in tasks:
        n = counts.get(t.name, 0)
        if n <= 0:
            continue
        requests, limits = pod_request_lists(t.template.get("spec") or {})
        for key, value in quota_keys(requests, limits):
            total.add({key: value}, times=n)
    return total.to_list()


def podgroup_spec(
    job: Mapping[str, Any],
    *,
    priority_values: Mapping[str, int] | None = None,
    tasks: Sequence[TaskView] | None = None,
) -> JSON:
    spec = job.get("spec") or {}
    tasks = tasks_of(job) if tasks is None else tasks
    out: JSON = {
        "minMember": job_min_available(job, tasks),
        "minTaskMember": {t.name: t.min_available for t in tasks},
        "queue": spec.get("queue") or c.DEFAULT_QUEUE,
        "minResources": min_resources(job, priority_values=priority_values, tasks=tasks),
    }
    if spec.get("priorityClassName"):
        out["priorityClassName"] = spec["priorityClassName"]
    if spec.get("networkTopology"):
        out["networkTopology"] = copy.deepcopy(spec["networkTopology"])
    subgroups = []
    for t in tasks:
        if not t.partition:
            continue
        sg: JSON = {
            "name": t.name,
            "subGroupSize": int(t.partition.get("partitionSize") or 1),
            "minSubGroups": int(t.partition.get("minPartitions") or 0),
            "labelSelector": {"matchLabels": {c.TASK_SPEC: t.name}},
            "matchLabelKeys": [c.PARTITION_ID],
        }
        if t.partition.get("networkTopology"):
            sg["networkTopology"] = copy.deepcopy(t.partition["networkTopology"])
        subgroups.append(sg)
    if subgroups:
        out["subGroupPolicy"] = subgroups
    return out


def build_podgroup(
    job: Mapping[str, Any],
    *,
    version: int,
    priority_values: Mapping[str, int] | None = None,
    tasks: Sequence[TaskView] | None = None,
) -> JSON:
    m = meta(job)
    annotations = {**dict(m.get("annotations") or {}), c.PODGROUP_JOB_VERSION: str(version)}
    estimate = (job.get("spec") or {}).get("runningEstimate")
    if estimate:
        annotations[c.PODGROUP_RUNNING_ESTIMATE] = str(estimate)
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(job),
            "namespace": m.get("namespace"),
            "labels": dict(m.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [owner_ref(job)],
        },
        "spec": podgroup_spec(job, priority_values=priority_values, tasks=tasks),
        "status": {"phase": c.PG_PENDING},
    }


def pvc_name(job: Mapping[str, Any], volume_index: int) -> str:
    """`<job>-pvc-<12 chars>`: Volcano's shape, but derived from the job uid so a restarted
    controller never creates a second claim."""
    m = meta(job)
    digest = hashlib.sha256(f"{m.get('uid')}/{volume_index}".encode()).hexdigest()
    return f"{m.get('name')}-pvc-{digest[:12]}"


def job_volumes(job: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any] | None]]:
    """(claim name, mountPath, claim spec to create or None) for every `spec.volumes` entry."""
    out = []
    for i, v in enumerate((job.get("spec") or {}).get("volumes") or []):
        claim = v.get("volumeClaimName") or ""
        spec = v.get("volumeClaim")
        if not claim:
            claim = pvc_name(job, i)
        out.append((str(claim), str(v.get("mountPath") or ""), spec))
    return out


def claim_volume_name(claim: str, taken: Collection[str] = ()) -> str:
    """The pod volume of a job volume: `tephra-pvc-<10 hex of the claim name>`.

    PVC names are DNS-1123 subdomains (dots, up to 253 characters) but pod volume names must be
    DNS-1123 labels, so the claim name itself cannot be used; the same claim always gets the same
    name, and a template volume that happens to hold it (`taken`) is stepped around.
    """
    for salt in range(len(taken) + 1):
        text = claim if salt == 0 else f"{claim}#{salt}"
        name = f"tephra-pvc-{hashlib.sha256(text.encode()).hexdigest()[:10]}"
        if name not in taken:
            return name
    raise AssertionError("unreachable: more candidates than taken names")


def build_pvc(job: Mapping[str, Any], name: str, spec: Mapping[str, Any]) -> JSON:
    m = meta(job)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": m.get("namespace"),
            "ownerReferences": [owner_ref(job)],
        },
        "spec": copy.deepcopy(dict(spec)),
    }


def build_pod(
    job: Mapping[str, Any], task: TaskView, index: int, *, version: int, retry_count: int
) -> JSON:
    """The pod `<job>-<task>-<index>` (plugins then mutate it)."""
    m = meta(job)
    spec = job.get("spec") or {}
    job_name = str(m.get("name"))
    ns = m.get("namespace")
    tmpl_meta = task.template.get("metadata") or {}
    pod_spec: JSON = copy.deepcopy(dict(task.template.get("spec") or {}))
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.get("schedulerName") or c.DEFAULT_SCHEDULER_NAMES[0]
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    vols = job_volumes(job)
    if vols:
        volumes = pod_spec.setdefault("volumes", [])
        taken = {str(v.get("name")) for v in volumes}
        for claim, mount, _s in vols:
            vname = claim_volume_name(claim, taken)
            if not any(v.get("name") == vname for v in volumes):
                volumes.append({"name": vname, "persistentVolumeClaim": {"claimName": claim}})
            for ctr in pod_spec.get("containers") or []:
                mounts = ctr.setdefault("volumeMounts", [])
                if not any(vm.get("mountPath") == mount for vm in mounts):
                    mounts.append({"name": vname, "mountPath": mount})
    queue = spec.get("queue") or c.DEFAULT_QUEUE
    annotations: JSON = dict(tmpl_meta.get("annotations") or {})
    job_ann = m.get("annotations") or {}
    for key in c.COPIED_JOB_ANNOTATIONS:
        if key in job_ann:
            annotations[key] = job_ann[key]
    annotations.update(
        {
            c.TASK_INDEX: str(index),
            c.TASK_SPEC: task.name,
            c.GROUP_NAME_ANNOTATION: podgroup_name(job),
            c.JOB_NAME: job_name,
            c.QUEUE_NAME: queue,
            c.JOB_VERSION: str(version),
            c.TEMPLATE_UID: f"{job_name}-{task.name}",
            c.JOB_RETRY_COUNT: str(retry_count),
        }
    )
    if task.topology_policy and task.topology_policy != "none":
        annotations[c.NUMA_POLICY] = task.topology_policy
    labels: JSON = dict(tmpl_meta.get("labels") or {})
    job_labels = m.get("labels") or {}
    for key in c.COPIED_JOB_LABELS:
        if key in job_labels:
            labels[key] = job_labels[key]
    labels.update(
        {
            c.TASK_INDEX: str(index),
            c.JOB_NAME: job_name,
            c.TASK_SPEC: task.name,
            c.JOB_NAMESPACE: str(ns),
            c.QUEUE_NAME: queue,
        }
    )
    if task.partition:
        size = int(task.partition.get("partitionSize") or 1)
        labels[c.PARTITION_ID] = str(index // max(1, size))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job_name, task.name, index),
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_ref(job)],
        },
        "spec": pod_spec,
    }
