"""The batch.api.integration rules: PodGroup create/adopt/update, the pod webhook, discovery."""

from __future__ import annotations

import copy
import importlib.metadata
from typing import Any

import pytest

from batch.api import integration as api
from batch.api.integration import (
    GANG_HASH_ANNOTATION,
    GangSpec,
    OwnerRef,
    WorkloadAdapter,
    WorkloadRef,
    load_adapters,
    mutate_pod_for_gang,
    pod_requests,
)
from batch.api.mergepatch import apply_merge_patch
from batch.controllers import gang as gangrules
from batch.controllers.gang import PodGroupAction, decide_podgroup

# --------------------------------------------------------------------------- helpers


def json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The add/replace subset of RFC 6902 the webhook emits."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = doc
        for part in parts[:-1]:
            node = node[part]
        if op["op"] == "replace":
            assert parts[-1] in node
        node[parts[-1]] = op["value"]
    return doc


def make_gang(**overrides: Any) -> GangSpec:
    ref = WorkloadRef("kubeflow.org/v1", "PyTorchJob", "ns", "job", "job", "u1")
    base: dict[str, Any] = {
        "name": "job",
        "namespace": "ns",
        "min_member": 3,
        "workload": ref,
        "adapter": "pytorch",
        "min_task_member": {"master": 1, "worker": 2},
        "min_resources": {"cpu": "3", "nvidia.com/gpu": "3"},
        "queue": "research",
        "priority_class_name": "high",
        "owner": OwnerRef("kubeflow.org/v1", "PyTorchJob", "job", "u1"),
    }
    base.update(overrides)
    return GangSpec(**base)


# --------------------------------------------------------------------------- decide_podgroup


def test_create_writes_a_full_podgroup_owned_by_the_workload() -> None:
    d = decide_podgroup(make_gang(), None)
    assert d.action is PodGroupAction.CREATE
    assert d.body is not None
    assert d.body["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert d.body["kind"] == "PodGroup"
    meta = d.body["metadata"]
    assert (meta["name"], meta["namespace"]) == ("job", "ns")
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "job",
            "uid": "u1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {
        "tephra.io/workload-kind": "PyTorchJob",
        "tephra.io/workload-name": "job",
    }
    assert meta["annotations"]["tephra.io/created-by"] == "pytorch"
    assert d.body["spec"] == {
        "minMember": 3,
        "minTaskMember": {"master": 1, "worker": 2},
        "minResources": {"cpu": "3", "nvidia.com/gpu": "3"},
        "queue": "research",
        "priorityClassName": "high",
    }
    assert meta["annotations"][GANG_HASH_ANNOTATION] == gangrules.spec_fingerprint(d.body["spec"])


def test_waits_for_the_first_pod_and_for_an_announced_operator_podgroup() -> None:
    assert decide_podgroup(make_gang(), None, pods_exist=False).action is PodGroupAction.WAIT
    announced = make_gang(adopt_existing=True, adopt_grace_seconds=30.0)
    assert decide_podgroup(announced, None, workload_age_seconds=5).action is PodGroupAction.WAIT
    # The operator never made it (e.g. spark-operator without its batch scheduler enabled):
    # after the grace period Tephra makes it.
    late = decide_podgroup(announced, None, workload_age_seconds=31)
    assert late.action is PodGroupAction.CREATE


def test_operator_podgroup_is_adopted_and_never_written() -> None:
    operator_pg = {
        "metadata": {"name": "job", "namespace": "ns", "ownerReferences": [{"kind": "PyTorchJob"}]},
        "spec": {"minMember": 1, "queue": "default"},
    }
    d = decide_podgroup(make_gang(), operator_pg)
    assert d.action is PodGroupAction.ADOPT
    assert d.body is None
    assert d.name == "job"


def test_pods_naming_their_own_podgroup_are_followed() -> None:
    d = decide_podgroup(make_gang(), None, pod_group_names=["job", "ray-other-pg"])
    assert (d.action, d.name) == (PodGroupAction.ADOPT, "ray-other-pg")
    # Pods naming the gang's own group change nothing.
    assert decide_podgroup(make_gang(), None, pod_group_names=["job"]).action is (
        PodGroupAction.CREATE
    )


def test_own_podgroup_updates_then_settles() -> None:
    created = decide_podgroup(make_gang(), None).body
    assert created is not None
    assert decide_podgroup(make_gang(), created).action is PodGroupAction.NOTHING

    grown = make_gang(min_member=5, min_task_member={"master": 1, "worker": 4}, min_resources=None)
    d = decide_podgroup(grown, created)
    assert d.action is PodGroupAction.UPDATE
    assert d.body is not None
    patched = apply_merge_patch(created, d.body)
    assert patched["spec"] == {
        "minMember": 5,
        "minTaskMember": {"master": 1, "worker": 4},
        "queue": "research",
        "priorityClassName": "high",
    }
    assert decide_podgroup(grown, patched).action is PodGroupAction.NOTHING


def test_merge_patch_drops_roles_no_longer_wanted() -> None:
    created = decide_podgroup(make_gang(), None).body
    fewer = make_gang(min_member=2, min_task_member={"worker": 2})
    d = decide_podgroup(fewer, created)
    assert d.body is not None
    assert apply_merge_patch(created, d.body)["spec"]["minTaskMember"] == {"worker": 2}


def test_podgroup_taken_over_by_another_writer_is_left_alone() -> None:
    """training-operator updates an existing group to its own values: Tephra stops correcting."""
    created = decide_podgroup(make_gang(), None).body
    assert created is not None
    rewritten = copy.deepcopy(created)
    rewritten["spec"]["minMember"] = 4
    d = decide_podgroup(make_gang(min_member=6), rewritten)
    assert d.action is PodGroupAction.ADOPT
    assert d.body is None


def test_queue_of_an_existing_podgroup_is_never_changed() -> None:
    created = decide_podgroup(make_gang(), None).body
    moved = make_gang(queue="elsewhere")
    assert decide_podgroup(moved, created).action is PodGroupAction.NOTHING


def test_queue_resolution() -> None:
    ns_with_queue = {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "team"}}}
    assert gangrules.resolve_queue(make_gang(queue=None), ns_with_queue) == "team"
    assert gangrules.resolve_queue(make_gang(queue=None), None) == "default"
    assert gangrules.resolve_queue(make_gang(queue="research"), ns_with_queue) == "research"


def test_leader_staging_places_the_leader_then_the_whole_gang() -> None:
    """Spark: minResources reserves driver + executors, but only the driver is gated first."""
    ref = WorkloadRef("sparkoperator.k8s.io/v1beta2", "SparkApplication", "ns", "a", "spark-a-pg")
    gang = GangSpec(
        name="spark-a-pg",
        namespace="ns",
        min_member=3,
        workload=ref,
        adapter="spark",
        min_task_member={"spark-driver": 1, "spark-executor": 2},
        min_resources={"cpu": "3", "memory": "2688Mi"},
        leader_role="spark-driver",
    )
    created = decide_podgroup(gang, None, leader_running=False).body
    assert created is not None
    assert created["spec"]["minMember"] == 1
    assert created["spec"]["minTaskMember"] == {"spark-driver": 1}
    assert created["spec"]["minResources"] == {"cpu": "3", "memory": "2688Mi"}
    assert decide_podgroup(gang, created, leader_running=False).action is PodGroupAction.NOTHING
    d = decide_podgroup(gang, created, leader_running=True)
    assert d.action is PodGroupAction.UPDATE
    assert d.body is not None
    running = apply_merge_patch(created, d.body)
    assert running["spec"]["minMember"] == 3
    assert running["spec"]["minTaskMember"] == {"spark-driver": 1, "spark-executor": 2}
    assert decide_podgroup(gang, running, leader_running=True).action is PodGroupAction.NOTHING


def test_gangspec_rejects_inconsistent_values() -> None:
    with pytest.raises(ValueError, match="minMember"):
        make_gang(min_member=-1)
    with pytest.raises(ValueError, match="leader_role"):
        make_gang(leader_role="driver")


# --------------------------------------------------------------------------- webhook


NS_ON = {"metadata": {"name": "team-a", "labels": {"tephra.io/gang-injection": "enabled"}}}
NS_QUEUE = {
    "metadata": {"name": "team-b", "annotations": {"scheduling.volcano.sh/queue-name": "gpu"}}
}
NS_OFF = {"metadata": {"name": "team-c"}}
NS_OPTED_OUT = {
    "metadata": {
        "name": "team-d",
        "labels": {"tephra.io/gang-injection": "disabled"},
        "annotations": {"scheduling.volcano.sh/queue-name": "gpu"},
    }
}


def pytorch_pod(**meta: Any) -> dict[str, Any]:
    labels = {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mnist-worker-0", "namespace": "team-a", "labels": labels, **meta},
        "spec": {"containers": [{"name": "pytorch", "image": "x"}]},
    }


def test_webhook_injects_scheduler_group_and_role(adapters: list[WorkloadAdapter]) -> None:
    p = pytorch_pod()
    ops = mutate_pod_for_gang(p, namespace_obj=NS_ON, adapters=adapters)
    assert ops == [
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"scheduling.k8s.io/group-name": "mnist", "volcano.sh/task-spec": "worker"},
        },
    ]
    mutated = json_patch(p, ops)
    assert mutated["spec"]["schedulerName"] == "volcano"
    # The mutated pod is left alone on a second pass (idempotent).
    assert mutate_pod_for_gang(mutated, namespace_obj=NS_ON, adapters=adapters) == []


def test_webhook_escapes_annotation_keys_and_replaces_default_scheduler(
    adapters: list[WorkloadAdapter],
) -> None:
    p = pytorch_pod(annotations={"team": "a"})
    p["spec"]["schedulerName"] = "default-scheduler"
    ops = mutate_pod_for_gang(p, namespace_obj=NS_QUEUE, adapters=adapters, scheduler_name="tephra")
    assert ops == [
        {"op": "replace", "path": "/spec/schedulerName", "value": "tephra"},
        {
            "op": "add",
            "path": "/metadata/annotations/scheduling.k8s.io~1group-name",
            "value": "mnist",
        },
        {"op": "add", "path": "/metadata/annotations/volcano.sh~1task-spec", "value": "worker"},
    ]
    mutated = json_patch(p, ops)
    assert mutated["metadata"]["annotations"] == {
        "team": "a",
        "scheduling.k8s.io/group-name": "mnist",
        "volcano.sh/task-spec": "worker",
    }


@pytest.mark.parametrize(
    ("why", "pod_obj", "ns"),
    [
        ("namespace did not opt in", pytorch_pod(), NS_OFF),
        ("namespace opted out despite its queue", pytorch_pod(), NS_OPTED_OUT),
        ("no namespace object", pytorch_pod(), None),
        (
            "operator already named the group",
            pytorch_pod(annotations={"scheduling.k8s.io/group-name": "mnist"}),
            NS_ON,
        ),
        (
            "not a workload pod",
            {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {}},
            NS_ON,
        ),
    ],
)
def test_webhook_leaves_pod_alone(
    adapters: list[WorkloadAdapter], why: str, pod_obj: dict[str, Any], ns: dict[str, Any] | None
) -> None:
    assert mutate_pod_for_gang(pod_obj, namespace_obj=ns, adapters=adapters) == [], why


def test_webhook_respects_an_explicit_other_scheduler(adapters: list[WorkloadAdapter]) -> None:
    p = pytorch_pod()
    p["spec"]["schedulerName"] = "yunikorn"
    assert mutate_pod_for_gang(p, namespace_obj=NS_ON, adapters=adapters) == []


def test_webhook_ray_pod_gets_role_and_scheduler_only(adapters: list[WorkloadAdapter]) -> None:
    """A Ray pod's group name depends on its RayCluster (RayJob clusters): the controller adds
    it after creating the PodGroup; the webhook still sets what cannot be changed later."""
    p = {
        "metadata": {
            "name": "c-head-x",
            "labels": {
                "ray.io/cluster": "c",
                "ray.io/node-type": "head",
                "ray.io/group": "headgroup",
            },
        },
        "spec": {"containers": []},
    }
    ops = mutate_pod_for_gang(p, namespace_obj=NS_ON, adapters=adapters)
    assert ops == [
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"volcano.sh/task-spec": "headgroup"},
        },
    ]


def test_namespace_opt_in_rules() -> None:
    assert api.gang_injection_enabled(NS_ON)
    assert api.gang_injection_enabled(NS_QUEUE)
    assert not api.gang_injection_enabled(NS_OFF)
    assert not api.gang_injection_enabled(NS_OPTED_OUT)
    assert not api.gang_injection_enabled(None)


# --------------------------------------------------------------------------- discovery


def test_entry_points_are_installed_and_load() -> None:
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="tephra.integrations")}
    assert eps == {
        "pytorch": "integrations.pytorch:PYTORCH",
        "tensorflow": "integrations.pytorch:TENSORFLOW",
        "xgboost": "integrations.pytorch:XGBOOST",
        "paddle": "integrations.pytorch:PADDLE",
        "jax": "integrations.pytorch:JAX",
        "mpi": "integrations.mpi:MPI",
        "mpi-v1": "integrations.mpi:MPI_V1",
        "ray": "integrations.ray:RAY",
        "spark": "integrations.spark:SPARK",
    }
    adapters = load_adapters()
    assert [a.name for a in adapters] == sorted(eps)
    watched = {(k.api_version, k.kind) for a in adapters for k in a.kinds}
    assert watched == {
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v1", "TFJob"),
        ("kubeflow.org/v1", "XGBoostJob"),
        ("kubeflow.org/v1", "PaddleJob"),
        ("kubeflow.org/v1", "JAXJob"),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("kubeflow.org/v1", "MPIJob"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayService"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
        ("v1", "Pod"),
    }
    for adapter in adapters:
        assert isinstance(adapter, WorkloadAdapter)


class _ThirdParty:
    """A minimal third-party adapter, written as the docs tell (a class is accepted too)."""

    name = "acme"
    kinds = (api.WorkloadKind("acme.io/v1", "AcmeJob", "acmejobs"),)

    def gang_for_workload(self, workload: Any) -> GangSpec | None:
        return None

    def workload_ref_for_pod(self, pod: Any) -> WorkloadRef | None:
        return None

    def existing_podgroup_name(self, workload: Any) -> str | None:
        return None

    def role_of_pod(self, pod: Any) -> str | None:
        return None


BROKEN = object()


def test_load_adapters_skips_broken_plugins(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = "tephra.integrations.test"
    fake = [
        importlib.metadata.EntryPoint("acme", f"{__name__}:_ThirdParty", group),
        importlib.metadata.EntryPoint("missing", "no_such_module_xyz:THING", group),
        importlib.metadata.EntryPoint("broken", f"{__name__}:BROKEN", group),
        importlib.metadata.EntryPoint("ray", "integrations.ray:RAY", group),
    ]
    monkeypatch.setattr(api, "entry_points", lambda group: fake)
    loaded = load_adapters(group=group)
    assert [a.name for a in loaded] == ["acme", "ray"]
    assert "missing" in caplog.text and "broken" in caplog.text


# --------------------------------------------------------------------------- pod requests


def test_pod_requests_follow_kube_scheduler() -> None:
    spec = {
        "containers": [
            # requests win; the GPU only has a limit, which stands in as its request
            {
                "name": "a",
                "resources": {
                    "requests": {"cpu": "1"},
                    "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
                },
            },
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "4", "memory": "512Mi"}}},
            # a sidecar (restartPolicy Always) runs alongside the app containers
            {
                "name": "sidecar",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            },
        ],
        "overhead": {"cpu": "250m"},
    }
    # app + sidecar = 1.6 cpu / 1088Mi; big-init alone = 4 cpu / 512Mi -> max per resource
    # = 4 cpu / 1088Mi, plus overhead 250m -> 4250m.
    assert pod_requests(spec).to_list() == {
        "cpu": "4250m",
        "memory": "1088Mi",
        "nvidia.com/gpu": "1",
    }
    assert pod_requests(None).to_list() == {}


def test_bad_quantity_is_one_clear_error() -> None:
    spec = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "lots"}}}]}
    with pytest.raises(api.GangError, match=r"^container main: resources: cpu"):
        pod_requests(spec)


# --------------------------------------------------------------------------- helpers for callers


def test_apply_gang_injection_mutates_in_place(adapters: list[WorkloadAdapter]) -> None:
    p = pytorch_pod(annotations={"team": "a"})
    assert api.apply_gang_injection(p, namespace_obj=NS_ON, adapters=adapters)
    assert p["spec"]["schedulerName"] == "volcano"
    assert p["metadata"]["annotations"] == {
        "team": "a",
        "scheduling.k8s.io/group-name": "mnist",
        "volcano.sh/task-spec": "worker",
    }
    assert not api.apply_gang_injection(p, namespace_obj=NS_ON, adapters=adapters)
    assert [a.name for a in api.default_adapters()] == [a.name for a in load_adapters()]


def test_gang_pods_and_leader_running() -> None:
    from integrations.spark import SPARK

    app = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "etl", "namespace": "data", "uid": "u"},
        "spec": {"driver": {}, "executor": {"instances": 2}},
    }
    gang = SPARK.gang_for_workload(app)
    assert gang is not None

    def spark_pod(name: str, role: str, app_name: str, phase: str, ns: str = "data") -> Any:
        return {
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {
                    "spark-role": role,
                    "sparkoperator.k8s.io/app-name": app_name,
                    "spark-app-selector": f"spark-{app_name}",
                },
            },
            "status": {"phase": phase},
        }

    mine_driver = spark_pod("etl-driver", "driver", "etl", "Pending")
    other_driver = spark_pod("other-driver", "driver", "other", "Running")
    mine_exec = spark_pod("etl-exec-1", "executor", "etl", "Pending")
    annotated = spark_pod("x", "executor", "zzz", "Pending")
    annotated["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "spark-etl-pg"}
    pods = [mine_driver, other_driver, mine_exec, annotated]
    assert [p["metadata"]["name"] for p in api.gang_pods(gang, pods, SPARK)] == [
        "etl-driver",
        "etl-exec-1",
        "x",
    ]
    # Another application's running driver does not count.
    assert not api.leader_running(gang, pods, SPARK)
    mine_driver["status"]["phase"] = "Running"
    assert api.leader_running(gang, pods, SPARK)


def test_server_side_normalisation_does_not_look_like_a_takeover() -> None:
    """Admission may default the queue from the namespace and a server may reformat quantities;
    neither is another writer taking the PodGroup over."""
    created = decide_podgroup(make_gang(queue=None, min_resources={"cpu": "1500m"}), None).body
    assert created is not None
    stored = copy.deepcopy(created)
    stored["spec"]["queue"] = "from-namespace"
    stored["spec"]["minResources"] = {"cpu": "1.5"}
    d = decide_podgroup(make_gang(queue=None, min_resources={"cpu": "1500m"}), stored)
    assert d.action is PodGroupAction.NOTHING
