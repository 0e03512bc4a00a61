"""A pod's role in the ledger comes from Volcano's task-spec, else from the framework adapter
that claims the pod (``role_of_pod``): the ledger reads no framework's labels itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from batch.api.integration import WorkloadKind, WorkloadRef, default_adapters
from batch.ledger.convert import TASK_SPEC_KEY, events_from_pod
from batch.ledger.events import PodAttempt

PART_LABEL = "toy.example/part"  # the toy framework's own role label


class ToyAdapter:
    """A framework Tephra knows nothing about: its pods name their role in ``PART_LABEL``."""

    name = "toy"
    kinds: Sequence[WorkloadKind] = (WorkloadKind("toy.example/v1", "ToyJob", "toyjobs"),)

    def gang_for_workload(self, workload: Mapping[str, Any]) -> None:
        return None

    def workload_ref_for_pod(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        job = (pod["metadata"].get("labels") or {}).get("toy.example/job")
        if not job:
            return None
        return WorkloadRef("toy.example/v1", "ToyJob", "ns", job, f"toy-{job}")

    def existing_podgroup_name(self, workload: Mapping[str, Any]) -> None:
        return None

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        part = (pod["metadata"].get("labels") or {}).get(PART_LABEL)
        return str(part) if part else None


class BrokenAdapter(ToyAdapter):
    name = "broken"

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        raise RuntimeError("adapter bug")


def _pod(labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> Any:
    meta = {"name": "p", "namespace": "ns", "uid": "p-1", "labels": dict(labels)}
    return {"metadata": {**meta, "annotations": dict(annotations or {})}, "spec": {}}


def _role(pod: Any, adapters: Sequence[Any] | None) -> str | None:
    [attempt] = events_from_pod(None, pod, adapters=adapters)
    assert isinstance(attempt, PodAttempt)
    return attempt.role


def test_a_pod_of_a_new_framework_is_recorded_with_its_adapters_role() -> None:
    pod = _pod({"toy.example/job": "sort", PART_LABEL: "reducer"})
    assert _role(pod, [ToyAdapter()]) == "reducer"


def test_the_ledger_reads_no_framework_label_itself() -> None:
    kubeflow = _pod({"training.kubeflow.org/replica-type": "worker"})
    ray = _pod({"ray.io/group": "gpus"})
    assert _role(kubeflow, []) is None and _role(ray, []) is None
    assert _role(kubeflow, [ToyAdapter()]) is None  # not a pod the toy adapter claims


def test_volcano_task_spec_comes_first() -> None:
    pod = _pod({"toy.example/job": "sort", PART_LABEL: "reducer"}, {TASK_SPEC_KEY: "mapper"})
    assert _role(pod, [ToyAdapter()]) == "mapper"
    assert _role(_pod({TASK_SPEC_KEY: "ps"}), []) == "ps"  # the label, on a pod not annotated


def test_an_adapter_that_fails_leaves_the_role_unknown(caplog: pytest.LogCaptureFixture) -> None:
    pod = _pod({"toy.example/job": "sort", PART_LABEL: "reducer"})
    assert _role(pod, [BrokenAdapter()]) is None
    assert "adapter bug" in caplog.text


def test_the_default_adapters_read_kubeflow_and_ray_roles() -> None:
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt", "uid": "u"}
    kubeflow = _pod({"training.kubeflow.org/replica-type": "master"})
    kubeflow["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    ray = _pod({"ray.io/cluster": "rc", "ray.io/node-type": "worker", "ray.io/group": "gpus"})
    assert {a.name for a in default_adapters()} >= {"pytorch", "ray"}
    assert _role(kubeflow, None) == "master" and _role(ray, None) == "gpus"


def test_the_controllers_record_with_their_own_adapters() -> None:
    """The ledger hook of the controllers uses the adapters the manager was given, not only
    the installed entry points."""
    from batch.controllers.operator import ControllerManager

    recorded: list[Any] = []
    mgr = ControllerManager(None, adapters=[ToyAdapter()])
    mgr.ledger.recorder = type("Sink", (), {"record": staticmethod(recorded.extend)})()  # type: ignore[assignment]
    mgr.ledger.record("pod", "ADDED", _pod({"toy.example/job": "sort", PART_LABEL: "reducer"}))
    assert [e.role for e in recorded if isinstance(e, PodAttempt)] == ["reducer"]
