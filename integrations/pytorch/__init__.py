"""Kubeflow training-operator jobs (kubeflow.org/v1): PyTorchJob, and the kinds of the same shape.

Why this exists: training-operator creates one pod per replica of ``spec.pytorchReplicaSpecs``
(Master + Worker) and, only when started with ``--gang-scheduler-name=volcano``, a PodGroup named
``<job>``. These adapters give every such job its gang in Tephra whether or not the operator was
configured for Volcano, under the same PodGroup name, so the two never make duplicates.

PyTorch elastic jobs (``spec.elasticPolicy``): the gang needs only ``elasticPolicy.minReplicas``
workers (default: all of them) plus the other roles — torchrun can start with the minimum and
grow. (training-operator itself ignores elasticPolicy for its PodGroup; Tephra uses it.)

TFJob (``tfReplicaSpecs``: Chief/PS/Worker/Evaluator), XGBoostJob (``xgbReplicaSpecs``), PaddleJob
(``paddleReplicaSpecs``) and JAXJob (``jaxReplicaSpecs``) share the shape and the pod labels, so
they are the same adapter with other field names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.integration import GangError
from integrations._common import as_count, describe
from integrations._kubeflow import KubeflowJobAdapter, Role

__all__ = ["JAX", "PADDLE", "PYTORCH", "TENSORFLOW", "XGBOOST", "PyTorchJobAdapter"]

API_VERSION = "kubeflow.org/v1"


class PyTorchJobAdapter(KubeflowJobAdapter):
    """PyTorchJob: Master + Worker, with ``elasticPolicy.minReplicas`` as the worker floor."""

    def __init__(self) -> None:
        super().__init__(
            name="pytorch",
            api_version=API_VERSION,
            kind="PyTorchJob",
            plural="pytorchjobs",
            replica_field="pytorchReplicaSpecs",
            operator_names=("pytorchjob-controller",),
        )

    def elastic_minimum(
        self, workload: Mapping[str, Any], roles: list[Role]
    ) -> dict[str, int] | None:
        elastic = (workload.get("spec") or {}).get("elasticPolicy")
        if not isinstance(elastic, Mapping):
            return None
        out = {r.role: r.replicas for r in roles}
        workers = out.get("worker", 0)
        floor = as_count(
            workload, elastic.get("minReplicas"), "spec.elasticPolicy.minReplicas", default=workers
        )
        if floor > workers:
            raise GangError(
                f"{describe(workload)}: spec.elasticPolicy.minReplicas: {floor} exceeds the "
                f"{workers} Worker replicas"
            )
        out["worker"] = floor
        return out


PYTORCH = PyTorchJobAdapter()

TENSORFLOW = KubeflowJobAdapter(
    name="tensorflow",
    api_version=API_VERSION,
    kind="TFJob",
    plural="tfjobs",
    replica_field="tfReplicaSpecs",
    operator_names=("tfjob-controller",),
)

XGBOOST = KubeflowJobAdapter(
    name="xgboost",
    api_version=API_VERSION,
    kind="XGBoostJob",
    plural="xgboostjobs",
    replica_field="xgbReplicaSpecs",
    operator_names=("xgboostjob-controller",),
)

PADDLE = KubeflowJobAdapter(
    name="paddle",
    api_version=API_VERSION,
    kind="PaddleJob",
    plural="paddlejobs",
    replica_field="paddleReplicaSpecs",
    operator_names=("paddlejob-controller",),
)

JAX = KubeflowJobAdapter(
    name="jax",
    api_version=API_VERSION,
    kind="JAXJob",
    plural="jaxjobs",
    replica_field="jaxReplicaSpecs",
    operator_names=("jaxjob-controller",),
)
