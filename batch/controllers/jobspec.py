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
from typing import Any

from batch.api.jobview import JobView, PartitionView, TaskView, job_view
from batch.api.views import as_mapping
from batch.controllers import constants as c
from batch.controllers.quantities import ResourceSum, pod_request_lists, quota_keys

JSON = dict[str, Any]


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def tasks_of(job: Mapping[str, Any]) -> list[TaskView]:
    """The job's tasks with webhook defaults applied (name `default<i>`, minAvailable, maxRetry):
    those of its view (`batch.api.jobview.job_view`)."""
    return list(job_view(job).tasks)


def _view(job: Mapping[str, Any] | JobView) -> JobView:
    return job if isinstance(job, JobView) else job_view(job)


def podgroup_name(job: Mapping[str, Any] | JobView) -> str:
    view = _view(job)
    return f"{view.name}-{view.uid}"


def pod_name(job_name: str, task: str, index: int) -> str:
    return f"{job_name}-{task}-{index}"


def owner_ref(job: JobView, *, controller: bool = True) -> JSON:
    """The job's ownerReference on what it creates (its PodGroup, pods, PVCs, plugin objects)."""
    return {
        "apiVersion": job.api_version or c.BATCH_API,
        "kind": job.kind or "Job",
        "name": job.name,
        "uid": job.uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def owned_by_job(obj: Mapping[str, Any], job: Mapping[str, Any] | JobView) -> bool:
    """Whether the job controls ``obj``: an ownerReference with the job's uid and
    ``controller: true`` (a name match, or a plain owner, is not enough)."""
    uid = _view(job).uid
    return bool(uid) and any(
        ref.get("uid") == uid and ref.get("controller") is True
        for ref in meta(obj).get("ownerReferences") or []
    )


def _task_priority(task: TaskView, priority_values: Mapping[str, int]) -> int:
    return int(priority_values.get(str(task.pod_spec.get("priorityClassName") or ""), 0))


def _pods_to_count(job: JobView, tasks: Sequence[TaskView]) -> dict[str, int]:
    """How many pods of each task (``tasks`` in priority order) make the job's minAvailable."""
    job_min = job.min_available
    counts: dict[str, int] = {}
    if job_min < sum(t.min_available for t in tasks):
        remaining = job_min
        for t in tasks:
            take = min(t.replicas, remaining)
            counts[t.name] = take
            remaining -= take
        return counts
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
    return counts


def min_resources(
    job: JobView, *, priority_values: Mapping[str, int] | None = None
) -> dict[str, str]:
    """Volcano's calcPGMinResources: the requests of the first minAvailable pods, by priority."""
    pv = priority_values or {}
    tasks = sorted(job.tasks, key=lambda t: -_task_priority(t, pv))
    counts = _pods_to_count(job, tasks)
    total = ResourceSum()
    for t in tasks:
        n = counts.get(t.name, 0)
        if n <= 0:
            continue
        requests, limits = pod_request_lists(t.pod_spec)
        for key, value in quota_keys(requests, limits):
            total.add({key: value}, times=n)
    return total.to_list()


def _subgroup(t: TaskView, partition: PartitionView) -> JSON:
    sg: JSON = {
        "name": t.name,
        "subGroupSize": partition.size,
        "minSubGroups": partition.min_partitions,
        "labelSelector": {"matchLabels": {c.TASK_SPEC: t.name}},
        "matchLabelKeys": [c.PARTITION_ID],
    }
    if partition.network_topology:
        sg["networkTopology"] = copy.deepcopy(partition.network_topology)
    return sg


def podgroup_spec(job: JobView, *, priority_values: Mapping[str, int] | None = None) -> JSON:
    out: JSON = {
        "minMember": job.min_available,
        "minTaskMember": {t.name: t.min_available for t in job.tasks},
        "queue": job.queue or c.DEFAULT_QUEUE,
        "minResources": min_resources(job, priority_values=priority_values),
    }
    if job.priority_class_name:
        out["priorityClassName"] = job.priority_class_name
    if job.network_topology:
        out["networkTopology"] = copy.deepcopy(job.network_topology)
    subgroups = [_subgroup(t, t.partition) for t in job.tasks if t.partition]
    if subgroups:
        out["subGroupPolicy"] = subgroups
    return out


def build_podgroup(
    job: JobView, *, version: int, priority_values: Mapping[str, int] | None = None
) -> JSON:
    annotations = {**dict(job.annotations), c.PODGROUP_JOB_VERSION: str(version)}
    if job.running_estimate:
        annotations[c.PODGROUP_RUNNING_ESTIMATE] = job.running_estimate
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(job),
            "namespace": job.namespace,
            "labels": dict(job.labels),
            "annotations": annotations,
            "ownerReferences": [owner_ref(job)],
        },
        "spec": podgroup_spec(job, priority_values=priority_values),
        "status": {"phase": c.PG_PENDING},
    }


def pvc_name(job: JobView, volume_index: int) -> str:
    """`<job>-pvc-<12 chars>`: Volcano's shape, but derived from the job uid so a restarted
    controller never creates a second claim."""
    digest = hashlib.sha256(f"{job.uid}/{volume_index}".encode()).hexdigest()
    return f"{job.name}-pvc-{digest[:12]}"


def job_volumes(
    job: Mapping[str, Any] | JobView,
) -> list[tuple[str, str, Mapping[str, Any] | None]]:
    """(claim name, mountPath, claim spec to create or None) for every `spec.volumes` entry."""
    view = _view(job)
    out = []
    for i, v in enumerate(view.volumes):
        claim = v.get("volumeClaimName") or ""
        spec = v.get("volumeClaim")
        if not claim:
            claim = pvc_name(view, i)
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


def build_pvc(job: JobView, name: str, spec: Mapping[str, Any]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "ownerReferences": [owner_ref(job)],
        },
        "spec": copy.deepcopy(dict(spec)),
    }


def _mount_volumes(job: JobView, pod_spec: JSON) -> None:
    """Add the job's volumes to ``pod_spec`` and mount them in each of its containers."""
    vols = job_volumes(job)
    if not vols:
        return
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


def _pod_annotations(job: JobView, task: TaskView, index: int, *, version: int, retry: int) -> JSON:
    annotations: JSON = dict(
        as_mapping(as_mapping(task.template.get("metadata")).get("annotations"))
    )
    for key in c.COPIED_JOB_ANNOTATIONS:
        if key in job.annotations:
            annotations[key] = job.annotations[key]
    annotations.update(
        {
            c.TASK_INDEX: str(index),
            c.TASK_SPEC: task.name,
            c.GROUP_NAME_ANNOTATION: podgroup_name(job),
            c.JOB_NAME: job.name,
            c.QUEUE_NAME: job.queue_or_default,
            c.JOB_VERSION: str(version),
            c.TEMPLATE_UID: f"{job.name}-{task.name}",
            c.JOB_RETRY_COUNT: str(retry),
        }
    )
    if task.topology_policy and task.topology_policy != "none":
        annotations[c.NUMA_POLICY] = task.topology_policy
    return annotations


def _pod_labels(job: JobView, task: TaskView, index: int) -> JSON:
    labels: JSON = dict(as_mapping(as_mapping(task.template.get("metadata")).get("labels")))
    for key in c.COPIED_JOB_LABELS:
        if key in job.labels:
            labels[key] = job.labels[key]
    labels.update(
        {
            c.TASK_INDEX: str(index),
            c.JOB_NAME: job.name,
            c.TASK_SPEC: task.name,
            c.JOB_NAMESPACE: job.namespace,
            c.QUEUE_NAME: job.queue_or_default,
        }
    )
    if task.partition:
        labels[c.PARTITION_ID] = str(index // max(1, task.partition.size))
    return labels


def build_pod(job: JobView, task: TaskView, index: int, *, version: int, retry_count: int) -> JSON:
    """The pod `<job>-<task>-<index>` (plugins then mutate it)."""
    pod_spec: JSON = copy.deepcopy(dict(task.pod_spec))
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = job.scheduler_name or c.DEFAULT_SCHEDULER_NAMES[0]
    if not pod_spec.get("priorityClassName") and job.priority_class_name:
        pod_spec["priorityClassName"] = job.priority_class_name
    _mount_volumes(job, pod_spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job.name, task.name, index),
            "namespace": job.namespace,
            "labels": _pod_labels(job, task, index),
            "annotations": _pod_annotations(job, task, index, version=version, retry=retry_count),
            "ownerReferences": [owner_ref(job)],
        },
        "spec": pod_spec,
    }
