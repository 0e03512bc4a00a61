"""KubeRay (ray.io/v1): RayCluster, and the RayClusters that RayJob and RayService create.

Why this exists: a Ray cluster is a head pod plus worker groups; workers that start without the
head (or a training job whose workers trickle in) waste GPUs. KubeRay makes a Volcano PodGroup
only when started with ``--batch-scheduler=volcano``; this adapter gives every cluster its gang
under KubeRay's own PodGroup name either way.

Gang (as KubeRay's volcano plugin computes it, ``batchscheduler/volcano``):
* members: the head (1 pod) plus, per worker group that is not suspended,
  ``replicas * numOfHosts`` pods — or ``minReplicas * numOfHosts`` with
  ``enableInTreeAutoscaling`` (the autoscaler may grow the cluster beyond the gang later).
  ``replicas`` is clamped into ``[minReplicas, maxReplicas]`` and defaults to ``minReplicas``.
* minTaskMember: per ``ray.io/group`` value (``headgroup`` for the head, else ``groupName``),
  which KubeRay writes into ``volcano.sh/task-spec``.
* minResources: the requests of those pods; with in-tree autoscaling the head also carries the
  autoscaler sidecar (``autoscalerOptions.resources``, default 500m CPU / 512Mi), which the
  head pod really requests.
* queue: the CR label ``volcano.sh/queue-name`` (else the annotation
  ``scheduling.volcano.sh/queue-name``); priority: the label ``ray.io/priority-class-name``
  (else the head template's priorityClassName). Other schedulers' queue labels
  (``kai.scheduler/queue``, ``yunikorn.apache.org/queue``) are not Volcano queues and are ignored.
* PodGroup name: ``ray-<cluster>-pg``; for a cluster a RayJob made (label
  ``ray.io/originated-from-crd: RayJob``) ``ray-<rayjob>-pg``, KubeRay's name for the RayJob's
  group (the submitter pod is not a member). RayService clusters are ordinary clusters (each one
  of an upgrade gets its own gang).

RayJob and RayService reach the scheduler through the RayClusters KubeRay creates from
``spec.rayClusterSpec`` / ``spec.rayClusterConfig`` (copying the owner's labels). Both are
listed in ``kinds`` all the same, so the controller watches them for the ledger
(:meth:`observe`): KubeRay leaves a finished RayJob's PodGroup behind, never completed (KubeRay
#4473), and a RayService is a job of its own. A cluster either of them created is ``part_of``
its owner's job: the ledger keeps one row per job, the owner's.
:meth:`RayAdapter.gang_for_workload` also accepts a RayJob (its gang does not depend on the
generated cluster name), and :func:`cluster_for` builds the RayCluster KubeRay would create, for
tests and for explaining a RayJob/RayService before it runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from batch.api.integration import (
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    TASK_SPEC_ANNOTATION,
    GangError,
    GangSpec,
    OwnerRef,
    WorkloadKind,
    WorkloadObservation,
    WorkloadRef,
    annotations_of,
    labels_of,
    owner_ref_of,
    pod_requests,
)
from batch.api.resources import Resource
from batch.api.timestamps import parse_time
from integrations._common import (
    as_count,
    copied_annotations,
    describe,
    is_kind,
    name_and_namespace,
)

__all__ = ["RAY", "RayAdapter", "cluster_for"]

API_VERSION = "ray.io/v1"
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
QUEUE_LABEL = "volcano.sh/queue-name"
PRIORITY_LABEL = "ray.io/priority-class-name"
HEAD_GROUP = "headgroup"
_INT32_MAX = 2**31 - 1
_DEFAULT_AUTOSCALER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}


#: The ledger's job phase for each RayJob ``jobDeploymentStatus``.
_JOB_PHASES = {
    "New": "Pending",
    "Initializing": "Pending",
    "Waiting": "Pending",
    "Running": "Running",
    "Retrying": "Restarting",
    "Suspending": "Terminating",
    "Suspended": "Terminated",
    "Complete": "Completed",
    "Failed": "Failed",
}


def podgroup_name(cluster_or_owner: str) -> str:
    return f"ray-{cluster_or_owner}-pg"


def cluster_for(owner: Mapping[str, Any], cluster_name: str) -> dict[str, Any]:
    """The RayCluster KubeRay creates for a RayJob or RayService ``owner``.

    Spec from ``spec.rayClusterSpec`` (RayJob) or ``spec.rayClusterConfig`` (RayService); labels
    copied from the owner plus ``ray.io/originated-from-crd`` / ``-cr-name``; a controller
    ownerReference to the owner when it has a uid.
    """
    kind = owner.get("kind")
    field = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}.get(str(kind))
    if field is None:
        raise GangError(f"{describe(owner)}: not a RayJob or RayService")
    name, namespace = name_and_namespace(owner)
    spec = (owner.get("spec") or {}).get(field)
    if not isinstance(spec, Mapping):
        raise GangError(f"{describe(owner)}: spec.{field}: required")
    labels = {**labels_of(owner), ORIGIN_CRD_LABEL: str(kind), ORIGIN_NAME_LABEL: name}
    metadata: dict[str, Any] = {"name": cluster_name, "namespace": namespace, "labels": labels}
    ref = owner_ref_of(owner)
    if ref is not None:
        metadata["ownerReferences"] = [ref.to_dict()]
    return {"apiVersion": API_VERSION, "kind": "RayCluster", "metadata": metadata, "spec": spec}


def _with_autoscaler(head_pod_spec: Mapping[str, Any], options: Any) -> dict[str, Any]:
    resources = _DEFAULT_AUTOSCALER_RESOURCES
    if isinstance(options, Mapping) and isinstance(options.get("resources"), Mapping):
        resources = options["resources"]
    containers = [
        *head_pod_spec.get("containers", []),
        {"name": "autoscaler", "resources": resources},
    ]
    return {**head_pod_spec, "containers": containers}


# RayCluster.status.state (KubeRay v1.5: ready, failed, suspended; "unhealthy" is deprecated)
_CLUSTER_PHASES = {"ready": "Running", "failed": "Failed", "suspended": "Terminated"}


def _cluster_phase(status: Mapping[str, Any]) -> tuple[str | None, dt.datetime | None]:
    """A RayCluster's phase and since when: the time KubeRay recorded for its state, else the
    status's last update."""
    state = str(status.get("state") or "")
    times = status.get("stateTransitionTimes")
    at = times.get(state) if isinstance(times, Mapping) else None
    return _CLUSTER_PHASES.get(state), parse_time(at) or parse_time(status.get("lastUpdateTime"))


def _job_phase(workload: Mapping[str, Any]) -> tuple[str | None, dt.datetime | None]:
    """A RayJob's phase and since when. KubeRay v1.5 keeps no time per deployment status:
    ``status.startTime`` is when it initialised the RayJob (before its cluster was scheduled),
    ``endTime`` when it finished. A started RayJob runs since Ray's own job start when KubeRay
    copied it (``rayJobInfo.startTime``), else since KubeRay's last status write — the one that
    set the phase, when the ledger sees the change as it happens (a later write in the same
    phase only moves the phase's time; the ledger keeps the earliest start)."""
    status = workload.get("status")
    status = status if isinstance(status, Mapping) else {}
    phase = _JOB_PHASES.get(str(status.get("jobDeploymentStatus") or ""))
    at: dt.datetime | None = None
    if phase in ("Completed", "Failed", "Terminated"):
        at = parse_time(status.get("endTime"))
    elif phase in ("Running", "Restarting", "Terminating"):
        info = status.get("rayJobInfo")
        ray_start = info.get("startTime") if isinstance(info, Mapping) else None
        if phase == "Running":
            at = parse_time(ray_start)
        at = at or _status_written(workload)
    return phase, at or parse_time(status.get("startTime"))


def _service_phase(workload: Mapping[str, Any]) -> tuple[str | None, dt.datetime | None]:
    """A RayService's phase and since when. It never completes: it serves until deleted, or
    fails when its ``Ready`` condition turns False with reason ``InitializingTimeout`` (the
    ``ray.io/initializing-timeout`` annotation; KubeRay then deletes its clusters). It runs
    since the first of its clusters became ready (the gang's wait ended; KubeRay copies each
    cluster's status into the RayService's) or since ``Ready`` turned True, whichever is
    earlier; before that it is Pending since it was created."""
    status = workload.get("status")
    status = status if isinstance(status, Mapping) else {}
    ready = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        {},
    )
    ready_at = parse_time(ready.get("lastTransitionTime"))
    if ready.get("status") == "False" and ready.get("reason") == "InitializingTimeout":
        return "Failed", ready_at
    starts = [ready_at] if ready.get("status") == "True" else []
    for side in ("activeServiceStatus", "pendingServiceStatus"):
        part = status.get(side)
        cluster = part.get("rayClusterStatus") if isinstance(part, Mapping) else None
        if isinstance(cluster, Mapping):
            phase, at = _cluster_phase(cluster)
            starts.append(at if phase == "Running" else None)
    found = [t for t in starts if t is not None]
    if found:
        return "Running", min(found)
    return "Pending", parse_time((workload.get("metadata") or {}).get("creationTimestamp"))


def _part_of(cluster: Mapping[str, Any]) -> OwnerRef | None:
    """The RayJob or RayService that created ``cluster`` (its controller ownerReference)."""
    for ref in (cluster.get("metadata") or {}).get("ownerReferences") or []:
        if (
            isinstance(ref, Mapping)
            and ref.get("controller")
            and ref.get("kind") in ("RayJob", "RayService")
            and str(ref.get("apiVersion") or "").startswith("ray.io/")
            and ref.get("uid")
        ):
            return OwnerRef(API_VERSION, str(ref["kind"]), str(ref.get("name") or ""), ref["uid"])
    return None


def _status_written(workload: Mapping[str, Any]) -> dt.datetime | None:
    """When the object's status was last written (its ``status`` managedFields entries)."""
    entries = (workload.get("metadata") or {}).get("managedFields")
    if not isinstance(entries, list):
        return None
    times = [
        parse_time(e.get("time"))
        for e in entries
        if isinstance(e, Mapping) and e.get("subresource") == "status"
    ]
    found = [t for t in times if t is not None]
    return max(found) if found else None


class RayAdapter:
    """The KubeRay :class:`~batch.api.integration.WorkloadAdapter`."""

    # RayJob and RayService are listed so the controller watches them for the ledger; their
    # gangs are still made from the pods of the RayClusters KubeRay creates (they map to
    # those clusters).
    _kinds = (
        WorkloadKind(API_VERSION, "RayCluster", "rayclusters"),
        WorkloadKind(API_VERSION, "RayJob", "rayjobs"),
        WorkloadKind(API_VERSION, "RayService", "rayservices"),
    )

    @property
    def name(self) -> str:
        return "ray"

    @property
    def kinds(self) -> Sequence[WorkloadKind]:
        return self._kinds

    def existing_podgroup_name(self, workload: Mapping[str, Any]) -> str | None:
        if workload.get("apiVersion") != API_VERSION:
            return None
        kind = workload.get("kind")
        name = (workload.get("metadata") or {}).get("name")
        if not name:
            return None
        if kind == "RayCluster":
            labels = labels_of(workload)
            if labels.get(ORIGIN_CRD_LABEL) == "RayJob" and labels.get(ORIGIN_NAME_LABEL):
                return podgroup_name(labels[ORIGIN_NAME_LABEL])
            return podgroup_name(name)
        if kind == "RayJob":
            return podgroup_name(name)
        return None

    def gang_for_workload(self, workload: Mapping[str, Any]) -> GangSpec | None:
        if workload.get("apiVersion") != API_VERSION:
            return None
        kind = workload.get("kind")
        if kind == "RayJob":
            spec = workload.get("spec") or {}
            if spec.get("clusterSelector"):
                return None  # runs on an existing cluster: that cluster's gang covers it
            if spec.get("suspend") is True:
                return None
            name, _ = name_and_namespace(workload)
            return self._gang(cluster_for(workload, f"{name}-xxxxx"), owner=workload)
        if kind == "RayCluster":
            spec = workload.get("spec") or {}
            if spec.get("suspend") is True:
                return None  # a suspended cluster has no pods
            return self._gang(workload, owner=workload)
        return None

    def workload_ref_for_pod(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        labels = labels_of(pod)
        cluster = labels.get(CLUSTER_LABEL)
        if not cluster or labels.get(NODE_TYPE_LABEL) not in ("head", "worker"):
            return None  # not a Ray node (e.g. a RayJob's submitter pod)
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        uid = None
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == "RayCluster":
                uid = ref.get("uid")
        gang: str | None = None
        if labels.get(ORIGIN_CRD_LABEL) == "RayJob" and labels.get(ORIGIN_NAME_LABEL):
            gang = podgroup_name(labels[ORIGIN_NAME_LABEL])
        elif labels.get(ORIGIN_CRD_LABEL):
            gang = podgroup_name(cluster)
        # Without the origin labels the pod may belong to a RayJob's cluster, whose group is
        # named after the RayJob: leave the name to gang_for_workload(RayCluster).
        return WorkloadRef(API_VERSION, "RayCluster", namespace, cluster, gang, uid)

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        annotations = annotations_of(pod)
        if annotations.get(TASK_SPEC_ANNOTATION) and annotations.get(GROUP_NAME_ANNOTATION):
            return str(annotations[TASK_SPEC_ANNOTATION])
        labels = labels_of(pod)
        if labels.get(GROUP_LABEL):
            return str(labels[GROUP_LABEL])
        if labels.get(NODE_TYPE_LABEL) == "head":
            return HEAD_GROUP
        return None

    def observe(self, workload: Mapping[str, Any]) -> WorkloadObservation | None:
        """A RayJob, RayService or RayCluster for the ledger: the pods of its gang, counted as
        the gang counts them, and its current phase: a RayJob's ``jobDeploymentStatus``, a
        RayService's (:func:`_service_phase`), a RayCluster's ``state`` (the controller watches
        RayClusters, so without it their rows never start). A RayCluster a RayJob or RayService
        created is ``part_of`` it: the owner's row is the job, the cluster gets none."""
        part_of = None
        if is_kind(workload, self._kinds, "RayCluster"):
            status = workload.get("status")
            phase, at = _cluster_phase(status if isinstance(status, Mapping) else {})
            part_of = _part_of(workload)
        elif is_kind(workload, self._kinds, "RayJob"):
            phase, at = _job_phase(workload)
        elif is_kind(workload, self._kinds, "RayService"):
            phase, at = _service_phase(workload)
        else:
            return None
        phases = [(phase, at)] if phase and at else []
        gang = self._observed_gang({**workload, "apiVersion": API_VERSION})
        if gang is None:
            return WorkloadObservation(phases=phases, part_of=part_of)
        return WorkloadObservation(
            replicas=dict(gang.min_task_member),
            requests=Resource.from_list(gang.min_resources),
            queue=gang.queue,
            priority_class=gang.priority_class_name,
            phases=phases,
            part_of=part_of,
        )

    def _observed_gang(self, workload: Mapping[str, Any]) -> GangSpec | None:
        """The gang the ledger describes ``workload`` by: a RayService's is that of the cluster
        KubeRay creates from ``rayClusterConfig`` (it has no gang of its own to schedule)."""
        try:
            if workload.get("kind") == "RayService":
                name, _ = name_and_namespace(workload)
                cluster = cluster_for(workload, f"{name}-raycluster-xxxxx")
                return self._gang(cluster, owner=cluster)
            return self.gang_for_workload(workload)
        except GangError:
            return None

    # -- internals --------------------------------------------------------------------------
    def _gang(self, cluster: Mapping[str, Any], *, owner: Mapping[str, Any]) -> GangSpec:
        cluster_name, namespace = name_and_namespace(cluster)
        spec: Mapping[str, Any] = cluster.get("spec") or {}
        head = spec.get("headGroupSpec")
        if not isinstance(head, Mapping):
            raise GangError(f"{describe(cluster)}: spec.headGroupSpec: required")
        head_pod = (head.get("template") or {}).get("spec") or {}
        autoscaling = spec.get("enableInTreeAutoscaling") is True
        if autoscaling:
            head_pod = _with_autoscaler(head_pod, spec.get("autoscalerOptions"))
        total = pod_requests(head_pod)
        min_task: dict[str, int] = {HEAD_GROUP: 1}
        members = 1
        groups = spec.get("workerGroupSpecs") or []
        if not isinstance(groups, list):
            raise GangError(f"{describe(cluster)}: spec.workerGroupSpecs: must be a list")
        for i, group in enumerate(groups):
            path = f"spec.workerGroupSpecs[{i}]"
            if not isinstance(group, Mapping):
                raise GangError(f"{describe(cluster)}: {path}: must be a worker group spec")
            if group.get("suspend") is True:
                continue
            gname = group.get("groupName")
            if not gname:
                raise GangError(f"{describe(cluster)}: {path}.groupName: required")
            lo = as_count(cluster, group.get("minReplicas"), f"{path}.minReplicas", default=0)
            hi = as_count(
                cluster, group.get("maxReplicas"), f"{path}.maxReplicas", default=_INT32_MAX
            )
            if lo > hi:
                raise GangError(
                    f"{describe(cluster)}: {path}.minReplicas: {lo} exceeds maxReplicas {hi}"
                )
            replicas = as_count(cluster, group.get("replicas"), f"{path}.replicas", default=lo)
            hosts = as_count(cluster, group.get("numOfHosts"), f"{path}.numOfHosts", default=1)
            count = (lo if autoscaling else min(max(replicas, lo), hi)) * max(hosts, 1)
            if count == 0:
                continue
            min_task[str(gname)] = min_task.get(str(gname), 0) + count
            members += count
            pod_spec = (group.get("template") or {}).get("spec") or {}
            total = total.add(pod_requests(pod_spec).scale(count))

        labels = labels_of(cluster)
        queue = labels.get(QUEUE_LABEL) or annotations_of(cluster).get(QUEUE_NAME_ANNOTATION)
        priority = labels.get(PRIORITY_LABEL) or head_pod.get("priorityClassName") or None
        owner_name, _ = name_and_namespace(owner)
        if owner.get("kind") == "RayJob":
            pg = podgroup_name(owner_name)
        else:
            pg = self.existing_podgroup_name(cluster) or podgroup_name(cluster_name)
        ref_obj = owner if owner.get("kind") == "RayJob" else cluster
        ref_name, _ = name_and_namespace(ref_obj)
        ref = WorkloadRef(
            API_VERSION,
            str(ref_obj.get("kind")),
            namespace,
            ref_name,
            pg,
            (ref_obj.get("metadata") or {}).get("uid"),
        )
        return GangSpec(
            name=pg,
            namespace=namespace,
            min_member=members,
            workload=ref,
            adapter=self.name,
            min_task_member=min_task,
            min_resources=Resource(total).to_list(),
            queue=str(queue) if queue else None,
            priority_class_name=str(priority) if priority else None,
            owner=owner_ref_of(ref_obj),
            annotations=copied_annotations(ref_obj),
            existing_podgroup_name=pg,
        )


RAY = RayAdapter()
