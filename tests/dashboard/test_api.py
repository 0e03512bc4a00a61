"""The dashboard's JSON API against a live sandbox and its SQLite ledger, over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from batch.api.owners import WORKLOAD_KIND_LABEL, WORKLOAD_NAME_LABEL
from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.kube.config import load_access
from tests.waiting import wait_for

from .conftest import SCHED, Live, gpu_job

pytestmark = pytest.mark.xdist_group("dashboard")

GPU = "nvidia.com/gpu"


def _queue(live: Live, name: str) -> dict[str, Any]:
    rows = live.api("/queues")["queues"]
    found = [q for q in rows if q["name"] == name]
    assert found, [q["name"] for q in rows]
    return dict(found[0])


def test_overview_counts_the_nodes_and_their_gpus(live: Live) -> None:
    model = wait_for(lambda: (m := live.api("/overview"))["nodes"] == 2 and m, what="2 nodes")
    assert model["ready"] == 2
    assert model["gpus"]["total"] == 8
    assert model["capacity"]["cpu"]["text"] == "32"
    assert {r["name"] for r in model["node_rows"]} == {"node-0", "node-1"}
    status = live.api("/status")
    assert status["synced"] is True and status["objects"]["Node"] == 2, status


def _operator_gang(name: str) -> dict[str, Any]:
    """A PyTorchJob's gang as Tephra's PodGroup controller makes it (labelled with its workload;
    an owner reference to a PyTorchJob this sandbox lacks would be garbage-collected at once,
    as on a real cluster)."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {WORKLOAD_KIND_LABEL: "PyTorchJob", WORKLOAD_NAME_LABEL: name},
        },
        "spec": {"minMember": 2, "queue": "default", "minResources": {"nvidia.com/gpu": "64"}},
    }


def test_queues_form_a_tree_with_weight_shares(live: Live) -> None:
    wait_for(lambda: len(live.api("/queues")["queues"]) >= 4, what="queues root, default, a, b")
    rows = live.api("/queues")["queues"]
    assert rows[0]["name"] == "root" and rows[0]["depth"] == 0
    team_a = _queue(live, "team-a")
    # weights under root: default 1, team-a 2, team-b 1
    assert (team_a["depth"], team_a["weight"], team_a["share"]) == (1, 2, 0.5)
    assert team_a["deserved"][GPU]["text"] == "4"
    # no job of team-a has met a scheduling session yet: no figures of the scheduler
    assert team_a["deserved_source"] == "not computed by the scheduler yet: weight share"


def test_a_running_job_holds_gpus_and_a_waiting_one_says_why(live: Live) -> None:
    live.submit(gpu_job("hold", replicas=2, gpus=4, run=8, queue="team-a"))
    wait_for(
        lambda: live.api("/overview")["gpus"]["allocated"] == 8,
        what="8 GPUs allocated",
        timeout=90,
        explain=lambda: live.api("/overview")["gpus"],
    )
    wait_for(lambda: _queue(live, "team-a")["allocated"][GPU]["text"] == "8", what="team-a holds 8")
    live.submit(gpu_job("waits", replicas=1, gpus=4, run=1, queue="team-b"))

    def why() -> list[str]:
        return list(live.job("waits").get("why") or [])

    lines = wait_for(lambda: any("queue position" in w for w in why()) and why(), what="why")
    assert lines[0].startswith("Job default/waits waits"), lines  # the blocker, in a sentence
    assert lines[1] == "Job default/waits: phase Pending, queue team-b"
    assert "  queue position: 1 of 1 waiting in queue team-b" in lines, lines
    assert _queue(live, "team-b")["pending"][GPU]["text"] == "4"
    jobs = live.api("/jobs?queue=team-b")
    assert [j["name"] for j in jobs["jobs"]] == ["waits"]
    # once "hold" ends, "waits" runs and completes; the ledger has both
    wait_for(lambda: live.job("waits").get("phase") == "Completed", timeout=120)
    detail = live.api("/jobs/default/hold")
    assert [p["node"] for p in detail["pods"]] != ["", ""]
    assert {"Pending", "Running", "Completed"} <= {h["phase"] for h in detail["history"]}


def test_history_reads_the_ledger(live: Live) -> None:
    def waits() -> dict[str, Any]:
        model = live.api("/history")
        assert model["ledger"], model
        return {r["queue"]: r for r in model["wait_times"]}

    live.submit(gpu_job("short", replicas=1, gpus=1, run=0.5, queue="team-b"))
    rows = wait_for(lambda: "team-b" in waits() and waits(), what="team-b in the ledger")
    assert rows["team-b"]["jobs"] >= 1
    usage = live.api("/history")["usage"]
    assert all(set(r) >= {"day", "queue", "gpu_hours"} for r in usage)


def test_the_dashboard_is_read_only(live: Live) -> None:
    import urllib.error
    import urllib.request

    for method in ("POST", "PUT", "DELETE", "PATCH"):
        req = urllib.request.Request(live.url + "/api/jobs", data=b"{}", method=method)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 405, method
        assert "GET" in err.value.headers["Allow"]


def test_a_token_is_checked_on_every_request(live: Live, tmp_path: Path) -> None:
    dash = Dashboard(load_access(live.sb.kubeconfig_path), History(None), token="s3cret")
    server = DashboardThread(dash).start()
    try:
        other = Live(live.sb, server.url, live.db_url, live.co)
        for path in ("/", "/api/overview", "/api/stream", "/jobs/default/hold"):
            assert other.get(path)[0] == 401, path
        assert other.get("/api/overview", Authorization="Bearer wrong")[0] == 401
        status, body = other.get("/api/overview", Authorization="Bearer s3cret")
        assert status == 200 and json.loads(body)["nodes"] == 2
        from .test_security import call

        link = call(server.url + "/?token=s3cret")  # sets the cookie, redirects to "/"
        assert link.status == 303 and link.headers["Location"] == "/"
        cookie = link.headers["Set-Cookie"].split(";")[0]
        assert other.get("/queues", Cookie=cookie)[0] == 200
        assert "No ledger history" in other.get("/history", Cookie=cookie)[1].decode()
    finally:
        server.stop()


def test_the_history_page_says_the_ledger_has_no_schema(tmp_path: Path) -> None:
    from batch.ledger.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    model = History(engine).read()
    engine.dispose()
    assert model["ledger"] is False
    assert model["error"] == (
        "the ledger has no schema yet (no such table: report_wait_times); run `tephra db upgrade`"
    )


def test_the_command_refuses_an_empty_token_file(tmp_path: Path) -> None:
    from batch.cli.main import main

    empty = tmp_path / "token"
    empty.write_text("\n")
    out = CliRunner().invoke(main, ["dashboard", "--token-file", str(empty)])
    assert out.exit_code == 1
    assert out.output.strip().endswith("the token file is empty"), out.output


def test_the_demo_serves_the_dashboard_beside_its_sandbox(live: Live) -> None:
    import urllib.request

    from batch.cli.demo import _dashboard

    with _dashboard(live.sb.kubeconfig_path, live.db_url, 0) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        with urllib.request.urlopen(url + "api/overview", timeout=30) as resp:
            assert json.loads(resp.read())["nodes"] == 2


def test_operator_gangs_are_listed_and_filters_are_checked(live: Live) -> None:
    live.sb.apply(_operator_gang("bert"))
    try:
        _check_operator_gang(live)
    finally:
        live.co.delete_namespaced_custom_object(*SCHED, "default", "podgroups", "bert")


def _check_operator_gang(live: Live) -> None:
    rows = wait_for(
        lambda: (m := live.api("/jobs?kind=pytorchjob"))["jobs"] and m["jobs"],
        what="the PyTorchJob's gang in the jobs list",
    )
    assert [(r["name"], r["kind"], r["gpus"]) for r in rows] == [("bert", "PyTorchJob", 64)]
    assert rows[0]["link"] == "/podgroups/default/bert"
    page = live.api("/podgroups/default/bert")
    assert page["row"]["queue"] == "default"
    status, body = live.get("/jobs?text=bert")
    assert status == 400
    assert body.decode().startswith("unknown query parameter text: the job list takes name,")
    assert live.get("/api/jobs?sort=bogus")[0] == 400
    nodes = live.api("/nodes")
    assert [(r["name"], r["nodes"], r["gpus"]) for r in nodes["racks"]] == [
        ("rack-0", 1, 4),
        ("rack-1", 1, 4),
    ]
