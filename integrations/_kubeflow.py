"""Shared gang derivation for Kubeflow jobs built from a map of replica specs.

Why this exists: the Kubeflow training-operator kinds (PyTorchJob, TFJob, XGBoostJob, PaddleJob,
JAXJob, MPIJob v1) and mpi-operator's MPIJob v2beta1 share one shape —
``spec.<x>ReplicaSpecs: {<ReplicaType>: {replicas, template}}`` plus
``spec.runPolicy.schedulingPolicy {minAvailable, queue, priorityClass, minResources}`` — and the
same operator conventions (pod labels ``training.kubeflow.org/*``, Volcano PodGroup named exactly
``<job>``). Each framework package configures :class:`KubeflowJobAdapter` for its kinds.

Gang rules (written to match training-operator's ``SyncPodGroup`` where it has one):
* minMember = ``schedulingPolicy.minAvailable`` if set, else the elastic minimum (PyTorch
  ``elasticPolicy.minReplicas`` workers plus the other roles), else every replica.
* minTaskMember = replicas per role (lower-cased replica type, the value training-operator puts in
  ``volcano.sh/task-spec``); with an elastic or explicit minimum the elastic role gets the
  remainder; roles with 0 pods are left out; a framework may drop roles its operator creates
  late (hook ``role_minimums``: MPIJob's launcher under ``WaitForWorkersReady``).
* minResources = ``schedulingPolicy.minResources`` if set, else the requests of the first
  minMember pods, leading roles (master/chief/launcher) first.
* queue = ``schedulingPolicy.queue``, else the job annotation ``scheduling.volcano.sh/queue-name``.
* priorityClassName = ``schedulingPolicy.priorityClass``, else the first role's pod template's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batch.api.integration import (
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    TASK_SPEC_ANNOTATION,
    GangError,
    GangSpec,
    WorkloadKind,
    WorkloadObservation,
    WorkloadRef,
    annotations_of,
    labels_of,
    owner_ref_of,
)
from batch.api.timestamps import parse_time
from integrations._common import (
    as_count,
    canonical_resource_list,
    copied_annotations,
    count_or_none,
    describe,
    is_kind,
    name_and_namespace,
    observed_requests,
    sum_members,
)

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


#: The ledger's job phase for each Kubeflow JobCondition type.
_CONDITION_PHASES = {
    "Created": "Pending",
    "Running": "Running",
    "Restarting": "Restarting",
    "Suspended": "Pending",
    "Succeeded": "Completed",
    "Failed": "Failed",
}


def _condition_phases(workload: Mapping[str, Any]) -> list[tuple[str, dt.datetime]]:
    status = workload.get("status")
    conditions = (status if isinstance(status, Mapping) else {}).get("conditions")
    out: list[tuple[str, dt.datetime]] = []
    for cond in conditions if isinstance(conditions, list) else []:
        if not isinstance(cond, Mapping) or str(cond.get("status")) != "True":
            continue
        phase = _CONDITION_PHASES.get(str(cond.get("type")))
        at = parse_time(cond.get("lastTransitionTime"))
        if phase and at:
            out.append((phase, at))
    return out


@dataclass(frozen=True, slots=True)
class Role:
    """One replica type of a job: its gang role name, pod count and pod template."""

    role: str
    replicas: int
    template: Mapping[str, Any]

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        spec = self.template.get("spec")
        return spec if isinstance(spec, Mapping) else {}


def controller_owner(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


class KubeflowJobAdapter:
    """A :class:`~batch.api.integration.WorkloadAdapter` for one Kubeflow replica-spec kind."""

    def __init__(
        self,
        *,
        name: str,
        api_version: str,
        kind: str,
        plural: str,
        replica_field: str,
        operator_names: Sequence[str],
        leading_roles: Sequence[str] = ("master", "chief", "launcher"),
        elastic_role: str | None = "worker",
        role_labels: Sequence[str] = (REPLICA_TYPE_LABEL, JOB_ROLE_LABEL),
    ) -> None:
        self._name = name
        self.api_version = api_version
        self.kind = kind
        self.replica_field = replica_field
        self.operator_names = tuple(operator_names)
        self.leading_roles = tuple(leading_roles)
        self.elastic_role = elastic_role
        self.role_labels = tuple(role_labels)
        self._kinds = (WorkloadKind(api_version, kind, plural),)

    # -- WorkloadAdapter --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def kinds(self) -> Sequence[WorkloadKind]:
        return self._kinds

    def existing_podgroup_name(self, workload: Mapping[str, Any]) -> str | None:
        if not self._kinds[0].matches(workload):
            return None
        return (workload.get("metadata") or {}).get("name")

    def gang_for_workload(self, workload: Mapping[str, Any]) -> GangSpec | None:
        if not self._kinds[0].matches(workload):
            return None
        name, namespace = name_and_namespace(workload)
        spec: Mapping[str, Any] = workload.get("spec") or {}
        if (spec.get("runPolicy") or {}).get("suspend") is True:
            return None  # a suspended job has no pods; its gang must not hold queue capacity
        roles = self.roles(workload)
        total = sum(r.replicas for r in roles)
        policy: Mapping[str, Any] = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
        base = "spec.runPolicy.schedulingPolicy"

        min_by_role = {r.role: r.replicas for r in roles}
        elastic_min = self.elastic_minimum(workload, roles)
        min_available = policy.get("minAvailable")
        if min_available is not None:
            min_member = as_count(workload, min_available, f"{base}.minAvailable", default=0)
            if min_member > total:
                raise GangError(
                    f"{describe(workload)}: {base}.minAvailable: {min_member} exceeds the "
                    f"{total} replicas of the job"
                )
            min_by_role = self._spread(roles, min_member)
        elif elastic_min is not None:
            min_by_role = elastic_min
            min_member = sum(elastic_min.values())
        else:
            min_member = total
        min_by_role = self.role_minimums(workload, roles, min_member, min_by_role)

        if policy.get("minResources") is not None:
            min_resources = canonical_resource_list(
                workload, policy["minResources"], f"{base}.minResources"
            )
        else:
            min_resources = self._min_resources(roles, min_member, min_by_role)

        queue = policy.get("queue") or annotations_of(workload).get(QUEUE_NAME_ANNOTATION) or None
        priority = policy.get("priorityClass") or None
        if priority is None:
            for r in roles:
                if r.pod_spec.get("priorityClassName"):
                    priority = str(r.pod_spec["priorityClassName"])
                    break
        meta = workload.get("metadata") or {}
        ref = WorkloadRef(self.api_version, self.kind, namespace, name, name, meta.get("uid"))
        return GangSpec(
            name=name,
            namespace=namespace,
            min_member=min_member,
            workload=ref,
            adapter=self._name,
            min_task_member={k: v for k, v in min_by_role.items() if v > 0},
            min_resources=min_resources,
            queue=str(queue) if queue else None,
            priority_class_name=priority,
            owner=owner_ref_of(workload),
            annotations=copied_annotations(workload),
            existing_podgroup_name=name,
            leader_role=self.leader_role(workload, min_by_role),
        )

    def workload_ref_for_pod(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        labels = labels_of(pod)
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        owner = controller_owner(pod)
        if (
            owner is not None
            and owner.get("kind") == self.kind
            and owner.get("apiVersion") == self.api_version
        ):
            job = str(owner.get("name"))
            return WorkloadRef(self.api_version, self.kind, namespace, job, job, owner.get("uid"))
        job_name = labels.get(JOB_NAME_LABEL)
        if job_name and labels.get(OPERATOR_NAME_LABEL) in self.operator_names:
            return WorkloadRef(self.api_version, self.kind, namespace, job_name, job_name)
        return None

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        annotations = annotations_of(pod)
        if annotations.get(TASK_SPEC_ANNOTATION) and annotations.get(GROUP_NAME_ANNOTATION):
            return str(annotations[TASK_SPEC_ANNOTATION])
        labels = labels_of(pod)
        for key in self.role_labels:
            if labels.get(key):
                return str(labels[key]).lower()
        return None

    def observe(self, workload: Mapping[str, Any]) -> WorkloadObservation | None:
        """Replicas and requests of every replica type, the scheduling policy, and the
        job's history from its ``True`` conditions (Created, Running, Restarting, ...)."""
        if not is_kind(workload, self._kinds, self.kind):
            return None
        try:
            roles = self.roles(workload)
        except GangError:
            roles = []
        spec = workload.get("spec")
        run_policy = (spec if isinstance(spec, Mapping) else {}).get("runPolicy")
        policy = (run_policy if isinstance(run_policy, Mapping) else {}).get("schedulingPolicy")
        policy = policy if isinstance(policy, Mapping) else {}
        return WorkloadObservation(
            replicas={r.role: r.replicas for r in roles},
            requests=observed_requests((r.pod_spec, r.replicas) for r in roles),
            queue=policy.get("queue") or None,
            priority_class=policy.get("priorityClass") or None,
            min_available=count_or_none(policy.get("minAvailable")),
            phases=_condition_phases(workload),
        )

    # -- hooks a framework may override -----------------------------------------------------
    def roles(self, workload: Mapping[str, Any]) -> list[Role]:
        """The job's replica types, leading roles first then by name."""
        spec: Mapping[str, Any] = workload.get("spec") or {}
        replica_specs = spec.get(self.replica_field)
        if not isinstance(replica_specs, Mapping) or not replica_specs:
            raise GangError(
                f"{describe(workload)}: spec.{self.replica_field}: required, a map of replica "
                "types to replica specs"
            )
        roles = []
        for rtype, rspec in replica_specs.items():
            path = f"spec.{self.replica_field}.{rtype}"
            if not isinstance(rspec, Mapping):
                raise GangError(f"{describe(workload)}: {path}: must be a replica spec")
            count = as_count(workload, rspec.get("replicas"), f"{path}.replicas", default=1)
            template = rspec.get("template") or {}
            roles.append(Role(str(rtype).lower(), count, template))

        def order(r: Role) -> tuple[int, str]:
            lead = self.leading_roles
            return (lead.index(r.role) if r.role in lead else len(lead), r.role)

        return sorted(roles, key=order)

    def elastic_minimum(
        self, workload: Mapping[str, Any], roles: list[Role]
    ) -> dict[str, int] | None:
        """Per-role minimum for an elastic job, or None when the job is not elastic."""
        return None

    def role_minimums(
        self,
        workload: Mapping[str, Any],
        roles: list[Role],
        min_member: int,
        min_by_role: dict[str, int],
    ) -> dict[str, int]:
        """The per-role minimums the gang uses (default: ``min_by_role`` as derived above);
        a framework whose operator creates some roles late leaves those out."""
        return min_by_role

    def leader_role(
        self, workload: Mapping[str, Any], min_by_role: Mapping[str, int]
    ) -> str | None:
        """Role whose pods must run before the others exist (None: all are created at once)."""
        return None

    # -- internals --------------------------------------------------------------------------
    def _spread(self, roles: list[Role], min_member: int) -> dict[str, int]:
        """Per-role minimum under an explicit minAvailable: leading roles in full (as far as
        they fit), the elastic role the remainder; other roles get no per-role minimum."""
        out: dict[str, int] = {}
        left = min_member
        others = [r for r in roles if r.role not in self.leading_roles]
        for r in roles:
            if r.role in self.leading_roles:
                take = min(r.replicas, left)
                out[r.role] = take
                left -= take
        if len(others) == 1:
            out[others[0].role] = min(others[0].replicas, left)
        return out

    def _min_resources(
        self, roles: list[Role], min_member: int, min_by_role: Mapping[str, int]
    ) -> dict[str, str]:
        """Requests of min_member pods: each role's minimum first, then fill in role order."""
        chosen = {r.role: min(min_by_role.get(r.role, 0), r.replicas) for r in roles}
        left = min_member - sum(chosen.values())
        for r in roles:
            if left <= 0:
                break
            extra = min(r.replicas - chosen[r.role], left)
            chosen[r.role] += extra
            left -= extra
        return sum_members([(r, chosen[r.role]) for r in roles])
