"""What-if: raising a queue's weight moves GPU share and waiting time its way; the ledger reader."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from batch.ledger.db import make_engine
from batch.ledger.migrate import upgrade
from batch.ledger.models import Job, PodAttempt, QueueConfig
from batch.sim.cluster import QueueSpec, load_cluster_file
from batch.sim.errors import SimInputError
from batch.sim.traces.ledger import load_ledger, parse_since
from batch.sim.whatif import compare_queue_configs, format_whatif, parse_change
from batch.sim.workload import Workload

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
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        for i in range(6):
            queue = "q1" if i % 2 == 0 else "q2"
            submitted = now - dt.timedelta(hours=5) + dt.timedelta(minutes=i)
            started = submitted + dt.timedelta(seconds=30)
            s.add(
                Job(
                    uid=f"uid-{i}",
                    namespace="ns",
                    name=f"job-{i}",
                    kind="VCJob",
                    queue=queue,
                    requested_cpu_milli=2000,
                    requested_gpu_milli=2000,
                    replicas={"worker": 2},
                    min_available=2,
                    submitted_at=submitted,
                    first_started_at=started,
                    finished_at=started + dt.timedelta(seconds=600),
                    phase="Completed",
                    final_phase="Completed",
                    updated_at=now,
                )
            )
            for k in range(2):
                s.add(
                    PodAttempt(
                        pod_uid=f"pod-{i}-{k}",
                        namespace="ns",
                        name=f"job-{i}-worker-{k}",
                        job_uid=f"uid-{i}",
                        role="worker",
                        queue=queue,
                        cpu_milli=1000,
                        gpu_milli=1000,
                        created_at=started,
                    )
                )
        # a job that never started (unknown run time) and one outside the window
        s.add(
            Job(
                uid="pending",
                namespace="ns",
                name="p",
                kind="VCJob",
                queue="q1",
                submitted_at=now - dt.timedelta(hours=1),
                updated_at=now,
            )
        )
        s.add(
            Job(
                uid="old",
                namespace="ns",
                name="o",
                kind="VCJob",
                queue="q1",
                submitted_at=now - dt.timedelta(days=30),
                first_started_at=now,
                updated_at=now,
            )
        )
        for q, w in (("q1", 1), ("q2", 2)):
            s.add(
                QueueConfig(
                    queue=q,
                    valid_from=now - dt.timedelta(days=1),
                    config_hash=q,
                    weight=w,
                    reclaimable=True,
                )
            )
        s.commit()
    engine.dispose()


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
    assert len(w.jobs) == 6
    first = w.jobs[0]
    assert first.submit == 0 and first.run_time == 600 and first.min_available == 2
    assert first.tasks[0].replicas == 2 and first.tasks[0].gpu_milli == 1000
    assert {q.name: q.weight for q in w.cluster.queues} == {"q1": 1, "q2": 2}
    assert any("never started" in n for n in w.notes)
    result = compare_queue_configs(w, [parse_change("queue=q1,weight=4")])
    assert {r["queue"] for r in result.rows} == {"q1", "q2"}
    assert result.current.summary["completed"] == 6 == result.proposed.summary["completed"]
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
    r = CliRunner().invoke(main, [*args, "--set", "queue=q1,weight=5", "--json"])
    assert r.exit_code == 0, r.output
    assert {row["queue"] for row in __import__("json").loads(r.stdout)["queues"]} == {"q1", "q2"}
    r = CliRunner().invoke(main, [*args, "--set", "queue=nope,weight=2"])  # a new queue
    assert r.exit_code == 0, r.output
    assert "--set queue=nope: not in the ledger, added as a new queue" in r.stderr
    assert any(line.startswith("nope ") and "new->2" in line for line in r.stdout.splitlines())
