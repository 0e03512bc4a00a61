"""The jobs list shows every gang whatever made it, with the columns an operator sorts and
filters by (issue 31, item 4); the nodes page groups nodes by rack; charts have round ticks."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from batch.dashboard import racks
from batch.dashboard.charts import bars, nice_ticks
from batch.dashboard.gangs import JobQuery, QueryError, gang_rows, jobs, podgroup_detail
from batch.dashboard.pages import job_page, jobs_page, nodes_page, overview_page
from batch.dashboard.state import LiveState
from batch.dashboard.views import job_detail, overview
from batch.sandbox.nodes import make_nodes

NOW = 1_800_000_000.0


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


T0, T1 = _iso(NOW - 3600), _iso(NOW - 1800)


def _pg(
    name: str, owner: tuple[str, str, str] | None, *, phase: str = "Pending", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": f"pg-{name}",
        "creationTimestamp": T0,
    }
    if owner is not None:
        api, kind, oname = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": api,
                "kind": kind,
                "name": oname,
                "uid": f"u-{oname}",
                "controller": True,
            }
        ]
    return {
        "metadata": meta,
        "spec": {"minMember": 2, "queue": "team-a", **spec},
        "status": {"phase": phase},
    }


def _pod(name: str, group: str, node: str, phase: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": name,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": phase},
    }


OWNERS = {
    "torch": ("kubeflow.org/v1", "PyTorchJob", "torch"),
    "mpi": ("kubeflow.org/v2beta1", "MPIJob", "mpi"),
    "ray-raycl-pg": ("ray.io/v1", "RayCluster", "raycl"),
    "spark-etl-pg": ("sparkoperator.k8s.io/v1beta2", "SparkApplication", "etl"),
    "podgroup-web": ("apps/v1", "ReplicaSet", "web-5d8f"),
    "podgroup-solo": ("v1", "Pod", "solo"),
}


def _state() -> LiveState:
    state = LiveState()
    for node in make_nodes(count=2, gpus=8):
        state.sink("Node", "ADDED", node)
    state.sink("PriorityClass", "ADDED", {"metadata": {"name": "high", "uid": "pc"}, "value": 1000})
    for name, owner in OWNERS.items():
        state.sink("PodGroup", "ADDED", _pg(name, owner))
    torch = _pg(
        "torch",
        OWNERS["torch"],
        minResources={"nvidia.com/gpu": "16"},
        priorityClassName="high",
    )
    torch["metadata"]["annotations"] = {"tephra.io/submitter": "alice"}
    torch["status"]["conditions"] = [
        {
            "type": "Unschedulable",
            "status": "True",
            "lastTransitionTime": T1,
            "reason": "NotEnoughResources",
            "message": "2/2 tasks in gang unschedulable: 0/2 nodes are available",
        }
    ]
    state.sink("PodGroup", "MODIFIED", torch)
    mpi = _pg("mpi", OWNERS["mpi"], phase="Running", minResources={"nvidia.com/gpu": "4"})
    mpi["status"]["conditions"] = [
        {"type": "Scheduled", "status": "True", "lastTransitionTime": T1}
    ]
    state.sink("PodGroup", "MODIFIED", mpi)
    state.sink("Pod", "ADDED", _pod("mpi-0", "mpi", "node-0", "Running", 2))
    state.sink("Pod", "ADDED", _pod("mpi-1", "mpi", "node-1", "Running", 2))
    # a VCJob with its PodGroup, and one whose PodGroup is not there yet
    for name in ("train", "fresh"):
        job = {
            "metadata": {
                "name": name,
                "namespace": "ml",
                "uid": f"u-{name}",
                "creationTimestamp": T1,
            },
            "spec": {"queue": "team-b", "minAvailable": 1, "tasks": []},
            "status": {"state": {"phase": "Pending"}},
        }
        if name == "train":
            job["status"] = {
                "state": {"phase": "Running"},
                "conditions": [
                    {"status": "Pending", "lastTransitionTime": T1},
                    {"status": "Running", "lastTransitionTime": _iso(NOW - 600)},
                ],
            }
        state.sink("Job", "ADDED", job)
    state.sink(
        "PodGroup",
        "ADDED",
        _pg("train-u-train", ("batch.volcano.sh/v1alpha1", "Job", "train"), queue="team-b"),
    )
    return state


def _rows(state: LiveState, **query: str) -> list[dict[str, Any]]:
    return list(jobs(gang_rows(state), JobQuery.parse(query), NOW)["jobs"])


def test_every_gang_is_listed_with_its_owner() -> None:
    rows = {r["name"]: r for r in _rows(_state())}
    kinds = {name: r["kind"] for name, r in rows.items()}
    assert kinds == {
        "torch": "PyTorchJob",
        "mpi": "MPIJob",
        "raycl": "RayCluster",
        "etl": "SparkApplication",
        "web-5d8f": "ReplicaSet",
        "solo": "Pod",
        "train": "Job",
        "fresh": "Job",
    }
    assert rows["train"]["link"] == "/jobs/ml/train"  # VCJobs keep their job page
    assert rows["fresh"]["link"] == "/jobs/ml/fresh"  # listed before its PodGroup exists
    assert rows["torch"]["link"] == "/podgroups/ml/torch"
    assert rows["etl"]["podgroup"] == "spark-etl-pg"


def test_a_row_says_gpus_priority_submitter_wait_and_the_schedulers_reason() -> None:
    rows = {r["name"]: r for r in _rows(_state())}
    torch, mpi = rows["torch"], rows["mpi"]
    assert (torch["gpus"], torch["gpus_held"]) == (16, 0)
    assert (torch["priority"], torch["priority_value"], torch["submitter"]) == (
        "high",
        1000,
        "alice",
    )
    assert torch["reason"].startswith("NotEnoughResources: 2/2 tasks in gang unschedulable")
    assert torch["wait_s"] == 3600.0  # still waiting: since it was made
    assert (mpi["gpus"], mpi["gpus_held"], mpi["running"]) == (4, 4, 2)
    assert mpi["wait_s"] == 1800.0  # waited until its Scheduled condition
    assert mpi["reason"] == ""
    assert rows["train"]["wait_s"] == 1200.0  # a VCJob: until its first Running condition


def test_filters_are_exact_and_ignore_case() -> None:
    state = _state()
    assert {r["name"] for r in _rows(state, queue="TEAM-B")} == {"train", "fresh"}
    assert _rows(state, queue="team") == []  # not a substring
    assert [r["name"] for r in _rows(state, kind="pytorchjob")] == ["torch"]
    assert [r["name"] for r in _rows(state, submitter="Alice")] == ["torch"]
    assert {r["name"] for r in _rows(state, phase="running")} == {"mpi", "train"}
    assert {r["name"] for r in _rows(state, name="R")} == {"torch", "raycl", "train", "fresh"}
    assert len(_rows(state, token="secret")) == 8  # the token check's, not a filter


def test_unknown_parameters_and_columns_are_refused() -> None:
    with pytest.raises(QueryError, match="unknown query parameter text, zzz: the job list takes"):
        JobQuery.parse({"zzz": "1", "text": "a"})
    with pytest.raises(QueryError, match="cannot sort by 'size'"):
        JobQuery.parse({"sort": "size"})


def test_columns_sort_both_ways() -> None:
    state = _state()
    assert [r["name"] for r in _rows(state, sort="-gpus")][:2] == ["torch", "mpi"]
    assert [r["name"] for r in _rows(state, sort="gpus")][-2:] == ["mpi", "torch"]
    by_priority = [r["name"] for r in _rows(state, sort="-priority")]
    assert by_priority[0] == "torch"
    newest = [r["name"] for r in _rows(state)]  # default: age, newest first
    assert set(newest[:2]) == {"train", "fresh"}


def test_the_jobs_page_links_sorts_and_shows_ages() -> None:
    state = _state()
    query = JobQuery.parse({"queue": "team-a", "sort": "gpus"})
    html = jobs_page(jobs(gang_rows(state), query, NOW), query)
    # the heading of the sorted column reverses it, keeping the filter
    assert '<a href="/jobs?queue=team-a&amp;sort=-gpus" data-sort="gpus">GPUs asked ▲</a>' in html
    assert '<a href="/jobs?queue=team-a&amp;sort=name" data-sort="name">' in html
    assert f'<time datetime="{T0}" title="{T0}">1h ago</time>' in html
    assert "1h so far" in html  # torch still waits
    assert not re.search(r">\d{4}-\d\d-\d\dT", html)  # no raw ISO timestamp shown


def test_the_job_page_shows_ages_with_the_exact_time_in_the_title() -> None:
    """Phase history and events say how long ago (as the jobs list does), not raw ISO times."""
    state = _state()
    event = {
        "metadata": {"name": "train.1", "namespace": "ml", "uid": "ev-1"},
        "involvedObject": {"kind": "Job", "name": "train", "namespace": "ml"},
        "type": "Normal",
        "reason": "Started",
        "message": "all pods running",
        "lastTimestamp": _iso(NOW - 120),
    }
    state.sink("Event", "ADDED", event)
    model = job_detail(state, "ml", "train")
    assert model is not None
    html = job_page(model, now=NOW)
    assert f'<td>Pending</td><td><time datetime="{T1}" title="{T1}">30m ago</time></td>' in html
    ten = _iso(NOW - 600)
    assert f'<td>Running</td><td><time datetime="{ten}" title="{ten}">10m ago</time></td>' in html
    two = _iso(NOW - 120)
    assert f'<td><time datetime="{two}" title="{two}">2m ago</time></td><td>Normal</td>' in html
    assert not re.search(r">\d{4}-\d\d-\d\dT", html)  # no raw ISO timestamp shown


def test_the_podgroup_page_model() -> None:
    model = podgroup_detail(_state(), "ml", "mpi")
    assert model is not None
    assert [p["node"] for p in model["pods"]] == ["node-0", "node-1"]
    assert model["row"]["kind"] == "MPIJob"
    assert podgroup_detail(_state(), "ml", "nope") is None


def _hypernode(name: str, tier: int, *members: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name},
        "spec": {"tier": tier, "members": list(members)},
    }


def test_nodes_are_grouped_by_hypernode() -> None:
    state = LiveState()
    for node in make_nodes(count=5, gpus=8):
        state.sink("Node", "ADDED", node)
    cordoned = make_nodes(count=5, gpus=8)[4]
    cordoned["spec"]["unschedulable"] = True
    state.sink("Node", "MODIFIED", cordoned)
    exact = {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}}
    regex = {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[23]"}}}
    state.sink("HyperNode", "ADDED", _hypernode("rack-a", 1, exact))
    state.sink("HyperNode", "ADDED", _hypernode("rack-b", 1, regex))
    spine = {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "rack-.*"}}}
    state.sink("HyperNode", "ADDED", _hypernode("spine", 2, spine))
    state.sink("Pod", "ADDED", _pod("p", "g", "node-2", "Running", 3))
    model = racks.nodes(state)
    by_rack = {r["name"]: [n["name"] for n in r["node_rows"]] for r in model["racks"]}
    assert by_rack == {"rack-a": ["node-0"], "rack-b": ["node-2", "node-3"],
                       racks.NO_RACK: ["node-1", "node-4"]}  # fmt: skip
    rack_b = model["racks"][1]
    assert (rack_b["gpus_used"], rack_b["gpus"], rack_b["pods"]) == (3, 16, 1)
    assert model["racks"][2]["cordoned"] == 1
    html = nodes_page(model)
    assert '<h2 id="rack-rack-b" class=rack>rack-b <small>2 nodes, GPUs 3 / 16 used, 1 pods' in html
    assert '<span class="state cordoned">cordoned</span>' in html
    page = overview_page(overview(state))
    assert '<a href="/nodes#rack-rack-b">rack-b</a>' in page
    assert "<rect" not in page  # no more squares with hover text
    # the racks are computed again when a HyperNode changes (and kept while none does)
    moved = _hypernode(
        "rack-a", 1, exact, {"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}
    )
    moved["metadata"]["resourceVersion"] = "2"
    state.sink("HyperNode", "MODIFIED", moved)
    assert [n["name"] for n in racks.nodes(state)["racks"][0]["node_rows"]] == ["node-0", "node-1"]


def test_without_hypernodes_the_rack_label_places_nodes() -> None:
    state = LiveState()
    for node in make_nodes(count=4, gpus=8, racks=2):
        state.sink("Node", "ADDED", node)
    names = [r["name"] for r in racks.nodes(state)["racks"]]
    assert names == ["rack-0", "rack-1"]


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (2.52, [0, 1, 2, 3]),
        (2.0, [0, 0.5, 1, 1.5, 2]),
        (0.629, [0, 0.2, 0.4, 0.6, 0.8]),
        (7, [0, 2, 4, 6, 8]),
        (0, [0, 0.25, 0.5, 0.75, 1]),
        (12_345, [0, 5000, 10_000, 15_000]),
    ],
)
def test_ticks_are_round(top: float, ticks: list[float]) -> None:
    assert nice_ticks(top) == ticks


def test_a_chart_says_its_unit_and_labels_round_ticks() -> None:
    svg = bars("GPUs per queue", ["a", "b"], {"allocated": [0.629, 1.26]}, "GPUs")
    labels = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)
    assert labels == ["0.0", "0.5", "1.0", "1.5"]
    assert re.search(r'<text class="unit"[^>]*>GPUs</text>', svg)
