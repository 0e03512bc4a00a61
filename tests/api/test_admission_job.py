"""VCJob admission: every default of volcano-semantics.md#job-admission and every rejection rule,
CREATE and UPDATE."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from batch.api.admission import AdmissionResult, StaticLookup, admit
from batch.api.admission.job import mutate_job_spec
from batch.api.admission.types import builtin_queue

from .conftest import make_job, make_queue, make_task


def create(obj: dict[str, Any], lookup: Any = None) -> AdmissionResult:
    return admit(kind="Job", operation="CREATE", obj=obj, old=None, lookup=lookup)


def only_error(result: AdmissionResult) -> tuple[str, str]:
    assert not result.allowed
    assert len(result.errors) == 1, result.messages()
    return result.errors[0].path, result.errors[0].rule


def test_minimal_job_is_defaulted() -> None:
    job = make_job()
    result = create(job)
    assert result.allowed, result.messages()
    spec = result.object["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert spec["minAvailable"] == 2
    assert spec["tasks"][0]["minAvailable"] == 2
    assert spec["tasks"][0]["maxRetry"] == 3
    assert job == make_job(), "admit must not modify its input"
    assert jsonpatch.apply_patch(job, result.patch) == result.object


def test_defaults_keep_user_values() -> None:
    job = make_job(queue="q1", schedulerName="other", maxRetry=5, minAvailable=1)
    result = create(job)
    spec = result.object["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == (
        "q1",
        "other",
        5,
        1,
    )


def test_task_defaults() -> None:
    unnamed = make_task(replicas=3)
    del unnamed["name"]
    host = make_task("host", replicas=1)
    host["template"]["spec"]["hostNetwork"] = True
    part = make_task(
        "part",
        replicas=4,
        partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
    )
    explicit = make_task("explicit", replicas=3, minAvailable=1)
    result = create(make_job(tasks=[unnamed, host, part, explicit]))
    assert result.allowed, result.messages()
    tasks = result.object["spec"]["tasks"]
    assert tasks[0]["name"] == "default0"
    assert tasks[0]["minAvailable"] == 3
    assert tasks[1]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert tasks[2]["minAvailable"] == 2  # minPartitions * partitionSize
    assert tasks[3]["minAvailable"] == 1
    assert result.object["spec"]["minAvailable"] == 3 + 1 + 2 + 1


def test_plugin_defaults() -> None:
    master = make_task("master", replicas=1)
    result = create(make_job(tasks=[master, make_task()], plugins={"mpi": ["--master=master"]}))
    assert result.allowed, result.messages()
    assert result.object["spec"]["plugins"] == {"mpi": ["--master=master"], "svc": [], "ssh": []}
    result = create(make_job(plugins={"pytorch": []}))
    assert result.object["spec"]["plugins"] == {"pytorch": [], "svc": []}
    result = create(make_job(plugins={"env": []}))
    assert result.object["spec"]["plugins"] == {"env": []}


def test_network_topology_mode_default() -> None:
    result = create(make_job(networkTopology={"highestTierAllowed": 2}))
    assert result.object["spec"]["networkTopology"] == {"highestTierAllowed": 2, "mode": "hard"}


def _policy(**fields: Any) -> dict[str, Any]:
    return {"action": "RestartJob", **fields}


REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("no tasks", {"tasks": []}, "spec.tasks", "required"),
    (
        "duplicate task name",
        {"tasks": [make_task("a"), make_task("a")]},
        "spec.tasks[1].name",
        "unique",
    ),
    (
        "task minAvailable > replicas",
        {"minAvailable": 1, "tasks": [make_task("a"), make_task("b", replicas=1, minAvailable=2)]},
        "spec.tasks[1].minAvailable",
        "minAvailableLessEqualReplicas",
    ),
    (
        "job minAvailable > replicas",
        {"minAvailable": 3},
        "spec.minAvailable",
        "minAvailableLessEqualReplicas",
    ),
    ("minSuccess > replicas", {"minSuccess": 5}, "spec.minSuccess", "minSuccessLessEqualReplicas"),
    ("negative replicas", {"tasks": [make_task(replicas=-1)]}, "spec.tasks[0].replicas", "minimum"),
    ("negative ttl", {"ttlSecondsAfterFinished": -1}, "spec.ttlSecondsAfterFinished", "minimum"),
    ("negative maxRetry", {"maxRetry": -1}, "spec.maxRetry", "minimum"),
    ("negative minAvailable", {"minAvailable": -1}, "spec.minAvailable", "minimum"),
    (
        "negative task minAvailable",
        {"tasks": [make_task(minAvailable=-2)]},
        "spec.tasks[0].minAvailable",
        "minimum",
    ),
    ("minSuccess 0", {"minSuccess": 0}, "spec.minSuccess", "minimum"),
    ("unknown plugin", {"plugins": {"magic": []}}, "spec.plugins.magic", "plugin"),
    (
        "mpi master missing",
        {"plugins": {"mpi": ["--master", "boss"]}},
        "spec.plugins.mpi",
        "mpiMaster",
    ),
    (
        "ssh port not a number",
        {"plugins": {"ssh": ["--ssh-port=notaport"]}},
        "spec.plugins.ssh",
        "pluginArgument",
    ),
    (
        "svc flag not a bool",
        {"plugins": {"svc": ["--disable-network-policy=maybe"]}},
        "spec.plugins.svc",
        "pluginArgument",
    ),
    (
        "pytorch port out of range",
        {"plugins": {"pytorch": ["--port", "70000"], "svc": []}},
        "spec.plugins.pytorch",
        "pluginArgument",
    ),
    ("invalid task name", {"tasks": [make_task("Bad_Name")]}, "spec.tasks[0].name", "pattern"),
    (
        "pod name too long",
        {"tasks": [make_task("t" * 60)]},
        "spec.tasks[0].name",
        "podName",
    ),
    (
        "duplicate policy event",
        {"policies": [_policy(event="PodFailed"), _policy(event="PodFailed", action="AbortJob")]},
        "spec.policies[1].event",
        "unique",
    ),
    (
        "duplicate event across event and events",
        {"policies": [_policy(events=["PodEvicted"]), _policy(event="PodEvicted")]},
        "spec.policies[1].event",
        "unique",
    ),
    (
        "event and exitCode",
        {"policies": [_policy(event="PodFailed", exitCode=3)]},
        "spec.policies[0]",
        "eventXorExitCode",
    ),
    (
        "neither event nor exitCode",
        {"policies": [_policy()]},
        "spec.policies[0]",
        "eventXorExitCode",
    ),
    (
        "exitCode 0",
        {"policies": [_policy(exitCode=0)]},
        "spec.policies[0].exitCode",
        "exitCodeNonZero",
    ),
    (
        "duplicate exitCode",
        {"policies": [_policy(exitCode=2), _policy(exitCode=2)]},
        "spec.policies[1].exitCode",
        "unique",
    ),
    (
        "* with other events",
        {"policies": [_policy(event="*"), _policy(event="PodFailed")]},
        "spec.policies",
        "anyEventAlone",
    ),
    (
        "internal event",
        {"policies": [_policy(event="OutOfSync")]},
        "spec.policies[0].event",
        "event",
    ),
    ("unknown event", {"policies": [_policy(event="Nope")]}, "spec.policies[0].event", "enum"),
    (
        "unknown action",
        {"policies": [{"event": "PodFailed", "action": "Explode"}]},
        "spec.policies[0].action",
        "action",
    ),
    (
        "bad timeout",
        {"policies": [_policy(event="PodPending", timeout="ten minutes")]},
        "spec.policies[0].timeout",
        "duration",
    ),
    (
        "task-level duplicate event",
        {"tasks": [make_task(policies=[_policy(event="TaskFailed"), _policy(event="TaskFailed")])]},
        "spec.tasks[0].policies[1].event",
        "unique",
    ),
    (
        "volume without mountPath",
        {"volumes": [{"volumeClaimName": "c"}]},
        "spec.volumes[0].mountPath",
        "required",
    ),
    (
        "volume mountPath with colon",
        {"volumes": [{"mountPath": "/a:b", "volumeClaimName": "c"}]},
        "spec.volumes[0].mountPath",
        "mountPath",
    ),
    (
        "duplicate mountPath",
        {
            "volumes": [
                {"mountPath": "/data", "volumeClaimName": "c"},
                {"mountPath": "/data", "volumeClaimName": "d"},
            ]
        },
        "spec.volumes[1].mountPath",
        "unique",
    ),
    ("volume with no claim", {"volumes": [{"mountPath": "/d"}]}, "spec.volumes[0]", "volumeClaim"),
    (
        "volume with both claims",
        {
            "volumes": [
                {
                    "mountPath": "/d",
                    "volumeClaimName": "c",
                    "volumeClaim": {"resources": {"requests": {"storage": "1Gi"}}},
                }
            ]
        },
        "spec.volumes[0]",
        "volumeClaim",
    ),
    (
        "bad quantity in volume claim",
        {
            "volumes": [
                {"mountPath": "/d", "volumeClaim": {"resources": {"requests": {"storage": "1 GB"}}}}
            ]
        },
        "spec.volumes[0].volumeClaim.resources.requests.storage",
        "quantity",
    ),
    (
        "dependsOn cycle",
        {
            "tasks": [
                make_task("a", dependsOn={"name": ["b"]}),
                make_task("b", dependsOn={"name": ["a"]}),
            ]
        },
        "spec.tasks[0].dependsOn",
        "dag",
    ),
    (
        "dependsOn self",
        {"tasks": [make_task("a", dependsOn={"name": ["a"]})]},
        "spec.tasks[0].dependsOn.name[0]",
        "dag",
    ),
    (
        "dependsOn unknown task",
        {"tasks": [make_task("a", dependsOn={"name": ["zz"]})]},
        "spec.tasks[0].dependsOn.name[0]",
        "dependsOnExists",
    ),
    (
        "highestTierAllowed and highestTierName",
        {"networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "spine"}},
        "spec.networkTopology",
        "exclusive",
    ),
    (
        "bad topology mode",
        {"networkTopology": {"mode": "strict"}},
        "spec.networkTopology.mode",
        "enum",
    ),
    (
        "partition product",
        {
            "tasks": [
                make_task(replicas=5, partitionPolicy={"totalPartitions": 2, "partitionSize": 2})
            ]
        },
        "spec.tasks[0].partitionPolicy",
        "partitionPolicy",
    ),
    (
        "partition minAvailable mismatch",
        {
            "tasks": [
                make_task(
                    replicas=4,
                    minAvailable=3,
                    partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
                )
            ]
        },
        "spec.tasks[0].minAvailable",
        "partitionPolicy",
    ),
    (
        "partition size 0",
        {
            "tasks": [
                make_task(replicas=0, partitionPolicy={"totalPartitions": 1, "partitionSize": 0})
            ]
        },
        "spec.tasks[0].partitionPolicy.partitionSize",
        "minimum",
    ),
    (
        "partition tiers exclusive",
        {
            "tasks": [
                make_task(
                    replicas=2,
                    partitionPolicy={
                        "totalPartitions": 1,
                        "partitionSize": 2,
                        "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"},
                    },
                )
            ]
        },
        "spec.tasks[0].partitionPolicy.networkTopology",
        "exclusive",
    ),
    ("queue root", {"queue": "root"}, "spec.queue", "queueNotRoot"),
    ("queue name pattern", {"queue": "Bad Queue"}, "spec.queue", "pattern"),
    ("wrong type", {"minAvailable": "2"}, "spec.minAvailable", "type"),
    (
        "topology policy enum",
        {"tasks": [make_task(topologyPolicy="always")]},
        "spec.tasks[0].topologyPolicy",
        "enum",
    ),
]


def _container_job(**container: Any) -> dict[str, Any]:
    job = make_job()
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0].update(container)
    return job


@pytest.mark.parametrize(
    ("spec", "path", "rule"),
    [pytest.param(s, p, r, id=i) for i, s, p, r in REJECTIONS],
)
def test_job_rejections(spec: dict[str, Any], path: str, rule: str) -> None:
    result = create(make_job(**spec))
    assert only_error(result) == (path, rule), result.messages()
    line = str(result.errors[0])
    assert line.startswith(f"Job ml/train: {path}: {rule} (")
    assert "\n" not in line


CONTAINER_REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "bad cpu quantity",
        {"resources": {"requests": {"cpu": "1.5.0"}}},
        "spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
        "quantity",
    ),
    (
        "bad gpu quantity",
        {"resources": {"limits": {"nvidia.com/gpu": "one"}}},
        "spec.tasks[0].template.spec.containers[0].resources.limits[nvidia.com/gpu]",
        "quantity",
    ),
    (
        "negative memory",
        {"resources": {"requests": {"memory": "-1Gi"}}},
        "spec.tasks[0].template.spec.containers[0].resources.requests.memory",
        "nonNegative",
    ),
    (
        "memory above Kubernetes' int64 bound",
        {"resources": {"requests": {"memory": "16Ei"}}},
        "spec.tasks[0].template.spec.containers[0].resources.requests.memory",
        "maxQuantity",
    ),
    (
        "cpu whose milli-value overflows int64",
        {"resources": {"limits": {"cpu": "9223372036854775807"}}},
        "spec.tasks[0].template.spec.containers[0].resources.limits.cpu",
        "maxQuantity",
    ),
    (
        "half a gpu",
        {"resources": {"limits": {"nvidia.com/gpu": "0.5"}}},
        "spec.tasks[0].template.spec.containers[0].resources.limits[nvidia.com/gpu]",
        "integer",
    ),
    (
        "milli gpu",
        {"resources": {"requests": {"example.com/fpga": "100m"}}},
        "spec.tasks[0].template.spec.containers[0].resources.requests[example.com/fpga]",
        "integer",
    ),
    (
        "request above limit",
        {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}},
        "spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
        "requestsLessEqualLimits",
    ),
    (
        "host port range",
        {"ports": [{"containerPort": 80, "hostPort": 70000}]},
        "spec.tasks[0].template.spec.containers[0].ports[0].hostPort",
        "portRange",
    ),
    (
        "container name",
        {"name": "Main"},
        "spec.tasks[0].template.spec.containers[0].name",
        "dns1123Label",
    ),
]


@pytest.mark.parametrize(
    ("container", "path", "rule"),
    [pytest.param(c, p, r, id=i) for i, c, p, r in CONTAINER_REJECTIONS],
)
def test_pod_template_rejections(container: dict[str, Any], path: str, rule: str) -> None:
    assert only_error(create(_container_job(**container))) == (path, rule)


def test_template_without_containers() -> None:
    job = make_job()
    job["spec"]["tasks"][0]["template"]["spec"]["containers"] = []
    assert only_error(create(job)) == ("spec.tasks[0].template.spec.containers", "required")


def test_duplicate_container_names() -> None:
    job = make_job()
    containers = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    containers.append(copy.deepcopy(containers[0]))
    assert only_error(create(job)) == ("spec.tasks[0].template.spec.containers[1].name", "unique")


def test_topology_policy_needs_integer_cpu() -> None:
    job = make_job(tasks=[make_task(topologyPolicy="single-numa-node")])
    assert create(job).allowed
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = (
        "500m"
    )
    path, rule = only_error(create(job))
    assert rule == "integerCpu" and path.endswith("containers[0].resources.requests.cpu")


def test_job_name_rules() -> None:
    job = make_job()
    job["metadata"]["name"] = "Not_A_Label"
    assert only_error(create(job)) == ("metadata.name", "dns1123Label")
    del job["metadata"]["name"]
    assert only_error(create(job)) == ("metadata.name", "required")
    job["metadata"]["generateName"] = "train-"
    assert create(job).allowed


def test_several_errors_are_all_reported() -> None:
    result = create(make_job(minAvailable=9, plugins={"nope": []}, queue="root"))
    rules = {e.rule for e in result.errors}
    assert {"minAvailableLessEqualReplicas", "plugin", "queueNotRoot"} <= rules


def test_valid_policies_and_dependencies() -> None:
    job = make_job(
        policies=[
            {"events": ["PodFailed", "PodFailed", "PodEvicted"], "action": "RestartJob"},
            {"exitCode": 137, "action": "AbortJob"},
            {"event": "PodPending", "action": "TerminateJob", "timeout": "1h30m"},
        ],
        tasks=[make_task("a"), make_task("b", dependsOn={"name": ["a"], "iteration": "any"})],
    )
    result = create(job)
    assert result.allowed, result.messages()


# ------------------------------------------------------------------ queue checks with a lookup


def _lookup(*queues: dict[str, Any]) -> StaticLookup:
    return StaticLookup(list(queues))


def test_queue_must_exist() -> None:
    assert only_error(create(make_job(queue="ghost"), _lookup())) == ("spec.queue", "queueExists")


def test_queue_must_be_open() -> None:
    closed = make_queue("batch")
    closed["status"] = {"state": "Closed"}
    assert only_error(create(make_job(queue="batch"), _lookup(closed))) == (
        "spec.queue",
        "queueOpen",
    )


def test_queue_without_status_counts_as_open() -> None:
    assert create(make_job(queue="batch"), _lookup(make_queue("batch"))).allowed


def test_queue_must_be_leaf() -> None:
    parent = make_queue("eng")
    child = make_queue("eng-prod", parent="eng")
    lookup = _lookup(parent, child)
    assert only_error(create(make_job(queue="eng"), lookup)) == ("spec.queue", "queueLeaf")
    assert create(make_job(queue="eng-prod"), lookup).allowed


def test_default_queue_exists_in_static_lookup() -> None:
    lookup = StaticLookup([], builtin_queues=True)
    assert create(make_job(), lookup).allowed
    assert lookup.get_queue("root") == builtin_queue("root")
    empty = StaticLookup([], builtin_queues=False)
    assert only_error(create(make_job(), empty)) == ("spec.queue", "queueExists")


# ------------------------------------------------------------------------------- UPDATE rules


def _stored(job: dict[str, Any]) -> dict[str, Any]:
    result = create(job)
    assert result.allowed
    return result.object


def update(new: dict[str, Any], old: dict[str, Any]) -> AdmissionResult:
    return admit(kind="Job", operation="UPDATE", obj=new, old=old, lookup=None)


def test_update_scale_fields_may_change() -> None:
    old = _stored(make_job(tasks=[make_task("a", replicas=2), make_task("b", replicas=2)]))
    new = copy.deepcopy(old)
    new["spec"]["minAvailable"] = 6
    new["spec"]["priorityClassName"] = "high"
    new["spec"]["tasks"][0]["replicas"] = 4
    new["spec"]["tasks"][0]["minAvailable"] = 3
    new["status"] = {"state": {"phase": "Running"}}
    result = update(new, old)
    assert result.allowed, result.messages()
    assert result.patch == [], "no defaulting on UPDATE"


def test_update_other_fields_are_immutable() -> None:
    old = _stored(make_job())
    new = copy.deepcopy(old)
    new["spec"]["queue"] = "other"
    assert only_error(update(new, old)) == ("spec.queue", "immutable")
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = "nginx"
    assert only_error(update(new, old)) == ("spec.tasks[0].template", "immutable")


def test_update_tasks_cannot_be_added() -> None:
    old = _stored(make_job())
    new = copy.deepcopy(old)
    new["spec"]["tasks"].append(make_task("extra"))
    assert only_error(update(new, old)) == ("spec.tasks", "immutable")


def test_update_minavailable_bounded_by_new_replicas() -> None:
    old = _stored(make_job())
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0]["replicas"] = 1
    rules = {(e.path, e.rule) for e in update(new, old).errors}
    assert ("spec.minAvailable", "minAvailableLessEqualReplicas") in rules
    assert ("spec.tasks[0].minAvailable", "minAvailableLessEqualReplicas") in rules


def test_update_controller_may_record_pvc_name() -> None:
    old = _stored(
        make_job(
            volumes=[
                {"mountPath": "/d", "volumeClaim": {"resources": {"requests": {"storage": "1Gi"}}}}
            ]
        )
    )
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "train-pvc-abcdefghijkl"
    assert update(new, old).allowed


def test_delete_is_allowed() -> None:
    result = admit(
        kind="Job", operation="DELETE", obj=make_job(minAvailable=99), old=None, lookup=None
    )
    assert result.allowed and result.patch == []


def test_batch_v1_job_is_not_ours() -> None:
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "x"},
        "spec": {"completions": "x"},
    }
    result = admit(kind="Job", operation="CREATE", obj=obj, old=None, lookup=None)
    assert result.allowed and result.object == obj and result.patch == []


def test_update_ignores_fields_that_only_differ_by_defaults() -> None:
    old = _stored(make_job(networkTopology={"highestTierAllowed": 1}))
    new = make_job(networkTopology={"highestTierAllowed": 1})  # as the user wrote it
    new["spec"]["tasks"][0]["replicas"] = 3
    assert update(new, old).allowed, update(new, old).messages()


@pytest.mark.parametrize(
    ("field", "value", "path", "rule"),
    [
        ("tolerations", [{"key": "k", "operator": "Maybe"}], "tolerations[0].operator", "enum"),
        (
            "tolerations",
            [{"key": "k", "operator": "Exists", "value": "v"}],
            "tolerations[0].value",
            "toleration",
        ),
        (
            "tolerations",
            [{"operator": "Equal", "value": "v"}],
            "tolerations[0].operator",
            "toleration",
        ),
        ("tolerations", [{"key": "k", "effect": "Sometimes"}], "tolerations[0].effect", "enum"),
        (
            "affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "a", "operator": "Like"}]}
                        ]
                    }
                }
            },
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            "enum",
        ),
    ],
)
def test_pod_spec_scheduling_fields(field: str, value: Any, path: str, rule: str) -> None:
    job = make_job()
    job["spec"]["tasks"][0]["template"]["spec"][field] = value
    assert only_error(create(job)) == (f"spec.tasks[0].template.spec.{path}", rule)


def test_container_needs_image() -> None:
    job = _container_job()
    del job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]
    assert only_error(create(job)) == (
        "spec.tasks[0].template.spec.containers[0].image",
        "required",
    )


def test_a_job_whose_total_request_overflows_int64_is_refused() -> None:
    """Each pod fits Kubernetes' bound, but the gang's minResources would not (issue 20.2)."""
    job = _container_job(resources={"requests": {"memory": "5Ei"}})
    job["spec"]["tasks"][0]["replicas"] = 2
    assert only_error(create(job)) == ("spec.tasks", "maxQuantity")
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["minAvailable"] = 1
    assert create(job).allowed


# ---------------------------------------------- branches pinned before splitting the validators


def test_a_policy_without_an_action_is_refused() -> None:
    for action in (None, ""):
        policy = {"event": "PodFailed"} if action is None else _policy(event="PodFailed", action="")
        result = create(make_job(policies=[policy]))
        assert only_error(result) == ("spec.policies[0].action", "required")
        assert result.errors[0].message == "a policy needs an action"


def test_an_empty_mount_path_is_refused() -> None:
    result = create(make_job(volumes=[{"mountPath": "", "volumeClaimName": "c"}]))
    assert only_error(result) == ("spec.volumes[0].mountPath", "required")


def test_min_partitions_above_total_partitions() -> None:
    policy = {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 3}
    result = create(make_job(tasks=[make_task(replicas=4, partitionPolicy=policy)]))
    assert [(e.path, e.rule, e.message) for e in result.errors] == [
        (
            "spec.tasks[0].minAvailable",
            "minAvailableLessEqualReplicas",
            "task minAvailable 6 is greater than replicas 4",
        ),
        (
            "spec.tasks[0].partitionPolicy.minPartitions",
            "partitionPolicy",
            "minPartitions 3 exceeds totalPartitions 2",
        ),
        (
            "spec.minAvailable",
            "minAvailableLessEqualReplicas",
            "job minAvailable 6 is greater than total replicas 4",
        ),
    ]


def test_defaulting_skips_a_task_that_is_not_a_mapping() -> None:
    spec: dict[str, Any] = {"tasks": ["x", {"replicas": 2}]}
    mutate_job_spec(spec)
    assert spec == {
        "tasks": ["x", {"replicas": 2, "name": "default1", "minAvailable": 2, "maxRetry": 3}],
        "queue": "default",
        "schedulerName": "volcano",
        "maxRetry": 3,
        "minAvailable": 2,
    }


def test_update_skips_a_stored_task_that_is_not_a_mapping() -> None:
    old = make_job()
    old["spec"]["tasks"] = ["x"]
    assert update(make_job(), old).allowed


def test_connect_is_allowed_unchanged() -> None:
    job = make_job(minAvailable=99)
    result = admit(kind="Job", operation="CONNECT", obj=job, old=None, lookup=None)
    assert result.allowed and result.object == job and result.patch == []


def test_job_errors_come_in_section_order() -> None:
    """Tasks, dependencies, totals, job bounds, policies, plugins, volumes, then topology."""
    a = make_task("a", replicas=1, minAvailable=2, policies=[_policy(exitCode=0)])
    a["dependsOn"] = {"name": ["ghost"]}
    b = make_task("a", replicas=1, topologyPolicy="single-numa-node")
    b["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    job = make_job(
        tasks=[a, b],
        minAvailable=9,
        minSuccess=9,
        policies=[_policy(event="*"), _policy(event="PodFailed")],
        plugins={"nope": [], "mpi": ["--master=boss"]},
        volumes=[{"mountPath": "/a:b"}],
        networkTopology={"highestTierAllowed": 1, "highestTierName": "x"},
    )
    result = create(job)
    assert [(e.path, e.rule) for e in result.errors] == [
        ("spec.tasks[0].minAvailable", "minAvailableLessEqualReplicas"),
        ("spec.tasks[0].policies[0].exitCode", "exitCodeNonZero"),
        ("spec.tasks[1].name", "unique"),
        ("spec.tasks[1].template.spec.containers[0].resources.requests.cpu", "integerCpu"),
        ("spec.tasks[0].dependsOn.name[0]", "dependsOnExists"),
        ("spec.minAvailable", "minAvailableLessEqualReplicas"),
        ("spec.minSuccess", "minSuccessLessEqualReplicas"),
        ("spec.policies", "anyEventAlone"),
        ("spec.plugins.nope", "plugin"),
        ("spec.plugins.mpi", "mpiMaster"),
        ("spec.volumes[0].mountPath", "mountPath"),
        ("spec.volumes[0]", "volumeClaim"),
        ("spec.networkTopology", "exclusive"),
    ]


def test_update_errors_come_in_rule_order() -> None:
    """Scale limits, task immutability, spec immutability, then the minAvailable bounds."""
    old = _stored(make_job(tasks=[make_task("a", replicas=2)]))
    new = copy.deepcopy(old)
    task = new["spec"]["tasks"][0]
    task["replicas"], task["minAvailable"], task["maxRetry"] = 1, 2, 7
    new["spec"]["queue"], new["spec"]["minAvailable"] = "other", 5
    result = update(new, old)
    assert [(e.path, e.rule) for e in result.errors] == [
        ("spec.tasks[0].maxRetry", "immutable"),
        ("spec.queue", "immutable"),
        ("spec.tasks[0].minAvailable", "minAvailableLessEqualReplicas"),
        ("spec.minAvailable", "minAvailableLessEqualReplicas"),
    ]
