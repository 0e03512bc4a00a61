"""Queue weights act at admission (issue 17.1): two queues submit the same backlog at once and
their jobs are admitted and run in the ratio of the queues' weights.

Volcano's proportion counts a Pending PodGroup in nothing, so enqueue admitted the older queue's
backlog first until overcommit's budget ran out; Tephra's default counts pending gangs' demand
(``fairShareAtAdmission``). Volcano mode (the Helm configuration) keeps Volcano's order.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.cli.main import main
from batch.scheduler.config import HELM_DEFAULT_CONFIG
from batch.sim.cluster import QueueSpec
from batch.sim.metrics import JobRecord
from batch.sim.runner import run_policy
from tests.ledger.helpers import ledger_job, ledger_pod, queue_configs, write_ledger

from .conftest import cluster, job, policy, workload

GPUS = 16
RUN = 100.0


def _backlog(w1: int, w2: int) -> object:
    # 2 x 64 one-GPU jobs of 100 s on 16 GPUs, all submitted at 0: four waves per queue at least
    jobs = [
        job(f"{q}-{i:03d}", submit=0, run=RUN, queue=q) for q in ("q1", "q2") for i in range(64)
    ]
    return workload(jobs, cluster(GPUS // 8, queues=[QueueSpec("q1", w1), QueueSpec("q2", w2)]))


def _started_by_queue(w: object, conf: str | None = None) -> dict[str, int]:
    """Jobs of each queue that started in the first three waves (both queues still backlogged)."""
    p = policy("tephra")
    if conf is not None:
        p = replace(p, conf=conf)
    done = run_policy(w, p)  # type: ignore[arg-type]
    counts = {"q1": 0, "q2": 0}
    for r in done.result.jobs:
        if r.start is not None and r.start < 3 * RUN:
            counts[r.queue] += 1
    return counts


@pytest.mark.parametrize(("w1", "w2"), [(1, 1), (3, 1), (1, 3)])
def test_same_backlog_runs_in_the_weights_ratio(w1: int, w2: int) -> None:
    counts = _started_by_queue(_backlog(w1, w2))
    total = counts["q1"] + counts["q2"]
    assert total == 3 * GPUS, counts  # every GPU busy in every wave
    assert counts["q1"] / total == pytest.approx(w1 / (w1 + w2), abs=0.07), counts


def test_volcano_mode_admits_the_older_queue_first() -> None:
    counts = _started_by_queue(_backlog(1, 3), conf=HELM_DEFAULT_CONFIG)
    # weights 1:3, yet q1 (created first) takes more than its quarter: Volcano's semantics
    assert counts["q1"] > 3 * GPUS / 4, counts


def _backlog_ledger(url: str, now: dt.datetime) -> None:
    """Two weight-1 queues each recorded 12 one-GPU jobs of 10 min, all submitted together."""
    submitted = now - dt.timedelta(hours=5)
    rows: list[object] = []
    for i in range(24):
        started = submitted + dt.timedelta(minutes=10 * (i // 4))
        run = ledger_job(
            f"uid-{i}",
            ("q1", "q2")[i % 2],
            submitted,
            workers=1,
            started=started,
            finished=started + dt.timedelta(minutes=10),
            name=f"job-{i}",
            phase="Completed",
            updated_at=now,
        )
        rows += [run, ledger_pod(run, f"pod-{i}", created_at=started)]
    rows += queue_configs({"q1": 1, "q2": 1}, now - dt.timedelta(days=1))
    write_ledger(url, rows)


def test_whatif_cli_weight_changes_the_wait(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _backlog_ledger(url, dt.datetime.now(dt.UTC))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodeGroups:\n- {name: gpu, count: 1, cpu: '8', memory: 64Gi, gpus: 4}\n")
    args = ["whatif", "--db", url, "--since", "1d", "--cluster", str(nodes)]
    r = CliRunner().invoke(main, [*args, "--set", "queue=q2,weight=3", "-o", "json"])
    assert r.exit_code == 0, r.output
    rows = {row["queue"]: row for row in json.loads(r.stdout)["queues"]}
    q1, q2 = rows["q1"], rows["q2"]
    # the same backlog at once: a weight of 3 lets q2 run 3 of every 4 jobs while both wait
    assert q2["wait_mean_proposed_s"] < 0.8 * q2["wait_mean_now_s"], rows
    assert q1["wait_mean_proposed_s"] > q1["wait_mean_now_s"], rows
    assert q2["verdict"] == "gains" and q1["verdict"] == "loses", rows


def _longest_gpu_idle(jobs: Sequence[JobRecord], since: float) -> float:
    """One-GPU jobs only: the longest a GPU freed at or after ``since`` stayed idle before a
    job started on it (GPUs are alike, so the k-th freed one is the k-th taken)."""
    freed = sorted(r.finish for r in jobs if r.finish is not None and r.finish >= since)
    taken = sorted(r.start for r in jobs if r.start is not None and r.start >= since)
    return max(t - f for f, t in zip(freed, taken, strict=False))


ALONE = 2000.0


def _fractional_shares_after_a_lone_queue() -> list[JobRecord]:
    """docs/sim.md's reproduction: weights 1:4 on 16 GPUs (shares 3.2 and 12.8, no whole
    number of one-GPU jobs); q1 runs the cluster alone, then both queues submit 64 jobs."""
    jobs = [job(f"early-{i:02d}", submit=0, run=ALONE, queue="q1") for i in range(GPUS)]
    jobs += [
        job(f"{q}-{i:03d}", submit=ALONE - 1, run=RUN, queue=q)
        for q in ("q1", "q2")
        for i in range(4 * GPUS)
    ]
    w = workload(jobs, cluster(GPUS // 8, queues=[QueueSpec("q1", 1), QueueSpec("q2", 4)]))
    return list(run_policy(w, policy("tephra")).result.jobs)


def test_a_fractional_share_leaves_no_gpu_idle_while_work_waits() -> None:
    """Before, q2's admitted jobs beyond its share were refused the 16th GPU for q1, whose jobs
    the budget q2's admissions held kept out: one GPU idle for each 100 s wave."""
    # binding takes a session or two after a completion (the fast lifecycle); never a wave
    assert _longest_gpu_idle(_fractional_shares_after_a_lone_queue(), ALONE) <= 3.0


def test_a_fractional_share_admits_no_more_than_the_idle_room() -> None:
    """Every wave runs q1's 3 (its 3.2 rounded down) and q2's 13 (its 12.8 and the GPU left):
    borrowing admits only on idle room no admitted gang will take. Before, q2 was admitted to
    4 jobs beyond its share on GPUs q1's admitted jobs were about to take (19 admitted for 16
    GPUs), and q1's admitted jobs waited a wave for them."""
    counts = {"q1": 0, "q2": 0}
    for r in _fractional_shares_after_a_lone_queue():
        if r.start is not None and ALONE <= r.start < ALONE + 3 * RUN:
            counts[r.queue] += 1
    assert counts == {"q1": 9, "q2": 39}, counts


def test_the_fairness_metrics_read_the_scheduler_s_deserved_share() -> None:
    """q1 may hold 4 of 16 GPUs (capability), so the scheduler deserves it 4 and q2 12; the
    simulator's own flat water-filling by weight said 8 and 8, and its fairness figures showed
    a share the scheduler never decided. The kube-default baseline (one queue) keeps that
    yardstick: it publishes no share per trace queue."""
    jobs = [
        job(f"{q}-{i:03d}", submit=5.0 * i, run=RUN, queue=q)
        for q in ("q1", "q2")
        for i in range(200)
    ]
    capped = QueueSpec("q1", 1, capability={"nvidia.com/gpu": "4"})
    w = workload(jobs, cluster(GPUS // 8, queues=[capped, QueueSpec("q2", 1)]))
    shares = run_policy(w, policy("tephra")).summary["queues"]
    assert shares["q1"]["deserved_share"] == pytest.approx(0.25, abs=0.02)
    assert shares["q2"]["deserved_share"] == pytest.approx(0.75, abs=0.02)
    assert shares["q1"]["ratio"] == pytest.approx(1.0, abs=0.1)
    flat = run_policy(w, policy("kube-default")).summary["queues"]
    assert flat["q1"]["deserved_share"] == pytest.approx(0.5, abs=0.02)


def _gpu_seconds(w: object, horizon: float) -> dict[str, float]:
    """GPU-seconds each queue's jobs ran before ``horizon``."""
    done = run_policy(w, policy("tephra"))  # type: ignore[arg-type]
    used: dict[str, float] = {}
    for r in done.result.jobs:
        if r.start is not None and r.start < horizon:
            ran = min(r.start + r.run_time, horizon) - r.start
            used[r.queue] = used.get(r.queue, 0.0) + ran * r.gpus
    return used


def test_a_queue_owed_its_first_big_gang_is_not_also_lent_a_second() -> None:
    """Weights 1:2:3 on 32 GPUs, every gang 2 x 8 GPUs, backlogs that outlast the window: the
    weight-2 queue (owed 10.7 GPUs: its first gang, the nearest whole gang) must not run more
    than the weight-3 queue (owed exactly one gang). Its admitted first gang used to count as
    borrowed (bigger than the whole share), so its second was admitted on the share too, and it
    ran twice the weight-3 queue's GPU time (2/3 against 1/3)."""
    jobs = [
        job(f"{q}-{i:03d}", submit=0, run=RUN, pods=2, gpus_per_pod=8, queue=q)
        for q in ("w1", "w2", "w3")
        for i in range(30)
    ]
    queues = [QueueSpec("w1", 1), QueueSpec("w2", 2), QueueSpec("w3", 3)]
    used = _gpu_seconds(workload(jobs, cluster(4, queues=queues)), horizon=15 * RUN)
    assert used.get("w3", 0.0) >= used.get("w2", 0.0), used
