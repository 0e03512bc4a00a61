"""Property tests: admission never raises on arbitrary input; its patch reproduces its output."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.api.admission import AssumeAllQueues, StaticLookup, admit

from .conftest import make_job, make_queue, make_task

KEYS = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "generateName",
    "namespace",
    "annotations",
    "spec",
    "status",
    "tasks",
    "replicas",
    "minAvailable",
    "maxRetry",
    "queue",
    "template",
    "containers",
    "initContainers",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "nvidia.com/gpu",
    "policies",
    "event",
    "events",
    "exitCode",
    "action",
    "timeout",
    "plugins",
    "mpi",
    "svc",
    "volumes",
    "mountPath",
    "volumeClaim",
    "volumeClaimName",
    "dependsOn",
    "iteration",
    "partitionPolicy",
    "totalPartitions",
    "partitionSize",
    "minPartitions",
    "networkTopology",
    "mode",
    "highestTierAllowed",
    "highestTierName",
    "weight",
    "capability",
    "deserved",
    "guarantee",
    "resource",
    "parent",
    "reclaimable",
    "minMember",
    "minTaskMember",
    "minResources",
    "subGroupPolicy",
    "target",
    "members",
    "selector",
    "exactMatch",
    "regexMatch",
    "labelMatch",
    "pattern",
    "type",
    "tier",
    "schedule",
    "jobTemplate",
    "timeZone",
    "hostNetwork",
    "ports",
    "hostPort",
    "topologyPolicy",
    "volcano.sh/jdb-min-available",
    "volcano.sh/hierarchy",
    "volcano.sh/hierarchy-weights",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "",
            "*",
            "0",
            "1",
            "2",
            "-1",
            "1Gi",
            "500m",
            "x",
            "PodFailed",
            "RestartJob",
            "Job",
            "Queue",
            "root",
            "default",
            "Open",
            "hard",
            "a",
            "0 * * * *",
            "50%",
            "node-[0-",
            "batch.volcano.sh/v1alpha1",
            "Node",
        ]
    ),
    st.text(max_size=8),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), children, max_size=5
        ),
    ),
    max_leaves=30,
)
KINDS = st.sampled_from(["Job", "Queue", "PodGroup", "Pod", "Command", "HyperNode", "CronJob"])
OPS = st.sampled_from(["CREATE", "UPDATE", "DELETE"])


def _lookup(choice: int, queues: list[Any]) -> Any:
    if choice == 0:
        return None
    if choice == 1:
        return AssumeAllQueues()
    return StaticLookup(
        [q for q in queues if isinstance(q, dict)], [q for q in queues if isinstance(q, dict)]
    )


def _check(kind: str, op: str, obj: Any, old: Any, lookup: Any) -> None:
    before = copy.deepcopy(obj)
    result = admit(kind=kind, operation=op, obj=obj, old=old, lookup=lookup)
    assert obj == before, "admit must not modify its input"
    assert all(e.rule != "internal" for e in result.errors), result.messages()
    assert result.allowed == (not result.errors)
    for line in result.messages():
        assert "\n" not in line
    # The patch goes from the object under admission to the result: on DELETE with no object
    # (an AdmissionReview DELETE carries only oldObject) that is `old`.
    admitted = old if op == "DELETE" and not obj and isinstance(old, dict) else obj
    if isinstance(admitted, dict):
        assert jsonpatch.apply_patch(admitted, result.patch) == result.object


_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    kind=KINDS,
    op=OPS,
    obj=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6),
    old=st.one_of(st.none(), JSON),
    choice=st.integers(0, 2),
    queues=st.lists(JSON, max_size=3),
)
def test_admit_never_raises_on_random_objects(
    kind: str, op: str, obj: dict[str, Any], old: Any, choice: int, queues: list[Any]
) -> None:
    _check(kind, op, obj, old, _lookup(choice, queues))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


BASE_JOB = make_job(
    tasks=[
        make_task("a", partitionPolicy={"totalPartitions": 1, "partitionSize": 2}),
        make_task(
            "b",
            dependsOn={"name": ["a"]},
            policies=[{"event": "PodFailed", "action": "RestartTask"}],
        ),
    ],
    policies=[{"exitCode": 3, "action": "AbortJob"}],
    plugins={"mpi": ["--master=a"]},
    volumes=[{"mountPath": "/d", "volumeClaimName": "c"}],
    networkTopology={"mode": "soft", "highestTierAllowed": 2},
)
BASE_QUEUE = make_queue(
    "q",
    weight=2,
    capability={"cpu": "4"},
    deserved={"cpu": "2"},
    guarantee={"resource": {"cpu": "1"}},
)


@_SETTINGS
@given(data=st.data(), op=OPS, value=JSON, choice=st.integers(0, 2))
def test_admit_never_raises_on_mutated_valid_objects(
    data: st.DataObject, op: str, value: Any, choice: int
) -> None:
    kind, base = data.draw(st.sampled_from([("Job", BASE_JOB), ("Queue", BASE_QUEUE)]))
    assert admit(kind=kind, operation="CREATE", obj=base, old=None, lookup=None).allowed
    path = data.draw(st.sampled_from(_paths(base)[1:]))
    obj = _replace(base, path, value)
    old = base if op == "UPDATE" else None
    _check(kind, op, obj, old, _lookup(choice, [BASE_QUEUE]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=JSON, kind=KINDS)
def test_admit_never_raises_on_non_objects(obj: Any, kind: str) -> None:
    result = admit(kind=kind, operation="CREATE", obj=obj, old=None, lookup=None)
    assert all(e.rule != "internal" for e in result.errors), result.messages()


def test_defaulting_is_idempotent() -> None:
    first = admit(kind="Job", operation="CREATE", obj=BASE_JOB, old=None, lookup=None)
    second = admit(kind="Job", operation="CREATE", obj=first.object, old=None, lookup=None)
    assert first.allowed and second.allowed
    assert second.patch == [] and second.object == first.object
