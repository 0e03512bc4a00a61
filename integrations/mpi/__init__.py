"""MPIJob: mpi-operator's kubeflow.org/v2beta1 and training-operator's kubeflow.org/v1.

Why this exists: an MPI job is one launcher (``mpirun``) plus N workers (sshd) that must all be up
for ``mpirun`` to reach its hosts — a gang of N + 1. mpi-operator makes a Volcano PodGroup named
``<job>`` only with ``--gang-scheduling=volcano``; this adapter gives every MPIJob the same gang
under the same name either way.

v2beta1 facts (mpi-operator): workers are bare pods owned by the MPIJob, the launcher is a
``batch/v1`` Job's pod; pods carry ``training.kubeflow.org/job-name`` and
``training.kubeflow.org/job-role=launcher|worker`` (no replica-type label, no task-spec
annotation). minMember = ``runPolicy.schedulingPolicy.minAvailable`` else workers + 1; queue =
``schedulingPolicy.queue`` else the MPIJob annotation ``scheduling.volcano.sh/queue-name``;
priority = ``schedulingPolicy.priorityClass`` else the launcher's, else the workers' template.

``runLauncherAsWorker: true`` puts the launcher into the hostfile; it is still one pod, so the gang
size is unchanged (workers + 1). ``launcherCreationPolicy: WaitForWorkersReady`` makes the
operator create the launcher only once the workers are ready, so the gang never requires the
launcher per role: minTaskMember is ``{worker: min(workers, minMember)}`` (with
``minAvailable`` counted against the workers, the only pods that exist at first — mpi-operator's
own PodGroup has minMember = minAvailable and no per-role minimum), and the workers lead: until
one runs the effective minMember is that worker minimum, afterwards the full minMember, which
the launcher then completes (otherwise the gang would wait for a launcher that waits for the
gang).

v1 (training-operator): ``mpiReplicaSpecs`` Launcher/Worker with the training-operator labels
(``replica-type``), the same gang rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.integration import GangError
from integrations._common import describe
from integrations._kubeflow import JOB_ROLE_LABEL, KubeflowJobAdapter, Role

__all__ = ["MPI", "MPI_V1", "MPIJobAdapter", "MPIJobV1Adapter"]


class MPIJobAdapter(KubeflowJobAdapter):
    """mpi-operator's MPIJob kubeflow.org/v2beta1."""

    def __init__(self) -> None:
        super().__init__(
            name="mpi",
            api_version="kubeflow.org/v2beta1",
            kind="MPIJob",
            plural="mpijobs",
            replica_field="mpiReplicaSpecs",
            operator_names=("mpi-operator",),
            leading_roles=("launcher",),
            role_labels=(JOB_ROLE_LABEL,),
        )

    def roles(self, workload: Mapping[str, Any]) -> list[Role]:
        roles = super().roles(workload)
        for r in roles:
            if r.role == "launcher" and r.replicas != 1:
                raise GangError(
                    f"{describe(workload)}: spec.mpiReplicaSpecs.Launcher.replicas: must be 1, "
                    f"got {r.replicas}"
                )
            if r.role not in ("launcher", "worker"):
                raise GangError(
                    f"{describe(workload)}: spec.mpiReplicaSpecs: unknown replica type "
                    f"{r.role!r} (Launcher and Worker only)"
                )
        spec = workload.get("spec") or {}
        flag = spec.get("runLauncherAsWorker")
        if flag is not None and not isinstance(flag, bool):
            raise GangError(f"{describe(workload)}: spec.runLauncherAsWorker: must be a boolean")
        return roles

    def role_minimums(
        self,
        workload: Mapping[str, Any],
        roles: list[Role],
        min_member: int,
        min_by_role: dict[str, int],
    ) -> dict[str, int]:
        if not _waits_for_workers(workload):
            return min_by_role
        # The launcher is created only once every worker is ready: a gang that required it
        # per role would wait for a pod that waits for the gang. Gate on the workers alone.
        workers = sum(r.replicas for r in roles if r.role == "worker")
        return {"worker": min(workers, min_member)} if workers else {}

    def leader_role(
        self, workload: Mapping[str, Any], min_by_role: Mapping[str, int]
    ) -> str | None:
        if _waits_for_workers(workload) and min_by_role.get("worker", 0):
            return "worker"
        return None


def _waits_for_workers(workload: Mapping[str, Any]) -> bool:
    spec = workload.get("spec") or {}
    return spec.get("launcherCreationPolicy") == "WaitForWorkersReady"


class MPIJobV1Adapter(KubeflowJobAdapter):
    """training-operator's MPIJob kubeflow.org/v1."""

    def __init__(self) -> None:
        super().__init__(
            name="mpi-v1",
            api_version="kubeflow.org/v1",
            kind="MPIJob",
            plural="mpijobs",
            replica_field="mpiReplicaSpecs",
            operator_names=("mpijob-controller",),
            leading_roles=("launcher",),
        )


MPI = MPIJobAdapter()
MPI_V1 = MPIJobV1Adapter()
