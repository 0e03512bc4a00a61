"""What-if: raising a queue's weight moves GPU share and waiting time its way; the ledger reader."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from batch.sim.cluster import QueueSpec, load_cluster_file
from batch.sim.errors import SimInputError
from batch.sim.traces.ledger import load_ledger, parse_since
from batch.sim.whatif import compare_queue_configs, format_whatif, parse_change
from batch.sim.workload import Workload
from tests.ledger.helpers import ledger_job, ledger_pod, queue_configs, write_ledger

from .conftest import cluster, job, workload


def _contended() -> Workload:
    # Two queues each submitting a 1-GPU, 100 s job every 3 s onto 32 GPUs: together they
    # offer 2 x 33 GPUs of load, so both keep a backlog and the weights decide the split.
    jobs = []
    for i in range(40):
        jobs.append(job(f"a{i:03d}", submit=i * 3, run=100, queue="q1"))
        jobs.append(job(f"b{i:03d}", submit=i * 3, run=100, queue="q2"))
    return workload(jobs, cluster(4, queues=[QueueSpec("q1", 1), QueueSpec("q2", 1)]))


def test_weight_change_moves_shares_and_waits_the_expected_way() -> None:
    result = compare_queue_configs(_contended(), [parse_change("queue=q2,weight=3")])
    rows = {r["queue"]: r for r in result.rows}
    q1, q2 = rows["q1"], rows["q2"]
    assert q2["weight_now"] == 1 and q2["weight_proposed"] == 3
    assert q2["share_proposed"] > q2["share_now"]
    assert q1["share_proposed"] < q1["share_now"]
    assert q2["wait_mean_proposed_s"] < q2["wait_mean_now_s"]
    assert q1["wait_mean_proposed_s"] > q1["wait_mean_now_s"]
    assert q2["verdict"] == "gains" and q1["verdict"] == "loses"
    assert q2["deserved_proposed"] > q2["deserved_now"]
    text = format_whatif(result)
    assert "q2" in text and "1->3" in text and "gains" in text


def test_parse_since() -> None:
    assert parse_since("7d") == 7 * 86_400
    assert parse_since("90m") == 5400
    with pytest.raises(SimInputError, match="--since"):
        parse_since("seven days")


def _fill_ledger(url: str, now: dt.datetime) -> None:
    rows: list[object] = []
    for i in range(6):
        submitted = now - dt.timedelta(hours=5) + dt.timedelta(minutes=i)
        started = submitted + dt.timedelta(seconds=30)
        run = ledger_job(
            f"uid-{i}",
            "q1" if i % 2 == 0 else "q2",
            submitted,
            workers=2,
            started=started,
            finished=started + dt.timedelta(seconds=600),
            name=f"job-{i}",
            phase="Completed",
            updated_at=now,
        )
        rows += [run, *(ledger_pod(run, f"pod-{i}-{k}", k, created_at=started) for k in range(2))]
    # a job still waiting in q1, one in a queue where no job started, one deleted while it
    # waited, and one outside the window
    rows.append(
        ledger_job(
            "pending", "q1", now - dt.timedelta(hours=1), workers=1, name="p", updated_at=now
        )
    )
    rows.append(
        ledger_job("stuck", "q3", now - dt.timedelta(hours=2), workers=1, name="s", updated_at=now)
    )
    estimated = ledger_job("est", "q2", now - dt.timedelta(hours=1), workers=1, name="e")
    estimated.running_estimate_s = 120.0  # spec.runningEstimate: 2m
    rows.append(estimated)
    rows.append(
        ledger_job(
            "gave-up",
            "q3",
            now - dt.timedelta(hours=3),
            workers=1,
            finished=now - dt.timedelta(hours=2),
            phase="Deleted",
            name="g",
            updated_at=now,
        )
    )
    rows.append(
        ledger_job("old", "q1", now - dt.timedelta(days=30), started=now, name="o", updated_at=now)
    )
    rows += queue_configs({"q1": 1, "q2": 2}, now - dt.timedelta(days=1))
    write_ledger(url, rows)


def test_ledger_reader_and_whatif(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
    _fill_ledger(url, now)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
        "status: {allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '2', pods: '110'}}\n"
        "---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '2', pods: '110'}}\n"
    )
    spec = load_cluster_file(nodes)
    assert spec.node_count == 2 and spec.gpu_milli_total == 4000
    w = load_ledger(url, since="1d", cluster=spec, now=now)
    assert len(w.jobs) == 9
    first = w.jobs[0]
    assert first.submit == 0 and first.run_time == 600 and first.min_available == 2
    assert first.tasks[0].replicas == 2 and first.tasks[0].gpu_milli == 1000
    assert {q.name: q.weight for q in w.cluster.queues} == {"q1": 1, "q2": 2, "q3": 1}
    result = compare_queue_configs(w, [parse_change("queue=q1,weight=4")])
    assert {r["queue"] for r in result.rows} == {"q1", "q2", "q3"}
    assert result.current.summary["completed"] == 9 == result.proposed.summary["completed"]
    with pytest.raises(SimInputError, match="--cluster"):
        load_ledger(url, since="1d", now=now)


def test_whatif_replays_the_jobs_still_waiting(tmp_path: Path) -> None:
    """The jobs that never started are replayed, not dropped, with the run time it assumes for
    them stated in the report itself: q3's only job is stuck, and the replay has it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
    _fill_ledger(url, now)
    spec = load_cluster_file(_two_gpu_nodes(tmp_path))
    w = load_ledger(url, since="1d", cluster=spec, now=now)
    waiting = {j.name: j for j in w.jobs if j.name in ("ns-p", "ns-s", "ns-e")}
    assert {n: (j.queue, j.run_time) for n, j in waiting.items()} == {
        "ns-p": ("q1", 600.0),
        "ns-s": ("q3", 600.0),
        "ns-e": ("q2", 120.0),
    }
    assert waiting["ns-p"].tasks[0].gpu_milli == 1000
    assert w.assumptions == (
        "1 never-started job replayed with run time = overall median (10m): its queue has no "
        "job that started",
        "1 never-started job replayed with run time = own runningEstimate",
        "1 never-started job replayed with run time = queue median (10m)",
        "left out 1 ended without starting (deleted while waiting)",
        "left out 1 submitted before the last 1d",
    )
    result = compare_queue_configs(w, [parse_change("queue=q3,weight=4")])
    q3 = next(r for r in result.rows if r["queue"] == "q3")
    assert q3["jobs"] == 1 and q3["wait_mean_now_s"] is not None
    text = format_whatif(result)
    for line in w.assumptions:
        assert line in text


def _two_gpu_nodes(tmp_path: Path) -> Path:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
        "status: {allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '2', pods: '110'}}\n"
    )
    return nodes


def test_whatif_without_any_started_job_says_what_it_left_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
    write_ledger(url, [ledger_job("s", "q", now - dt.timedelta(hours=1), workers=1)])
    spec = load_cluster_file(_two_gpu_nodes(tmp_path))
    w = load_ledger(url, since="1d", cluster=spec, now=now)
    assert w.jobs == ()
    assert w.assumptions == ("left out 1 never started (no job started: no run time to assume)",)
    with pytest.raises(SimInputError, match="--cluster"):
        load_ledger(url, since="1d", now=now)


def test_whatif_cli(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = dt.datetime.now(dt.UTC)
    _fill_ledger(url, now)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodeGroups:\n- {name: gpu, count: 1, cpu: '8', memory: 64Gi, gpus: 2}\n")
    args = ["whatif", "--db", url, "--since", "1d", "--cluster", str(nodes)]
    r = CliRunner().invoke(main, [*args, "--set", "queue=q1,weight=5"])
    assert r.exit_code == 0, r.output
    assert "1->5" in r.output and "overall:" in r.output
    assert "1 never-started job replayed with run time = queue median (10m)" in r.stdout
    assert "left out 1 ended without starting (deleted while waiting)" in r.stdout
    r = CliRunner().invoke(main, [*args, "--set", "queue=q1,weight=5", "--json"])
    assert r.exit_code == 0, r.output
    answer = __import__("json").loads(r.stdout)
    assert {row["queue"] for row in answer["queues"]} == {"q1", "q2", "q3"}
    assert (
        "1 never-started job replayed with run time = queue median (10m)" in answer["assumptions"]
    )
    r = CliRunner().invoke(main, [*args, "--set", "queue=nope,weight=2"])  # a new queue
    assert r.exit_code == 0, r.output
    assert "--set queue=nope: not in the ledger, added as a new queue" in r.stderr
    assert any(line.startswith("nope ") and "new->2" in line for line in r.stdout.splitlines())


def test_ledger_reader_reports_an_unreadable_database(tmp_path: Path) -> None:
    not_a_db = tmp_path / "ledger.db"
    not_a_db.write_bytes(b"this is not an SQLite database, only text\n" * 100)
    url = f"sqlite:///{not_a_db}"
    with pytest.raises(
        SimInputError, match=r"^--db sqlite:///.*: cannot read the ledger: \w+Error: "
    ):
        load_ledger(url, since="1d")  # the database is read before the cluster is asked for
