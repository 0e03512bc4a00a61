"""Usage-decayed fair share in the simulator (proportion's ``usageHalfLife``): the simulator
keeps each queue's decayed usage from its own run (no ledger), so a queue that held the whole
cluster alone gets less than an equal-weight queue once both want it; without the argument the
two split evenly."""

from __future__ import annotations

from dataclasses import replace

import pytest

from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.sim.cluster import QueueSpec
from batch.sim.objects import EPOCH
from batch.sim.real import RealScheduler
from batch.sim.runner import run_policy

from .conftest import cluster, job, policy, workload

GPUS = 40  # shares of 1/5 and 4/5 are whole GPUs
ALONE = 2000.0
RUN = 100.0
DECAYED = TEPHRA_DEFAULT_CONFIG.replace(
    "fairShare: true", "fairShare: true\n      usageHalfLife: 1h"
)


def _busy_then_shared() -> object:
    """q1 holds all 40 GPUs alone for 2000 s; then both queues submit 160 one-GPU jobs."""
    jobs = [job(f"early-{i:02d}", submit=0, run=ALONE, queue="q1") for i in range(GPUS)]
    jobs += [
        job(f"{q}-{i:03d}", submit=ALONE - 1, run=RUN, queue=q)
        for q in ("q1", "q2")
        for i in range(4 * GPUS)
    ]
    return workload(jobs, cluster(GPUS // 8, queues=[QueueSpec("q1", 1), QueueSpec("q2", 1)]))


def _share_of_q1(conf: str) -> float:
    done = run_policy(_busy_then_shared(), replace(policy("tephra"), conf=conf))  # type: ignore[arg-type]
    counts = {"q1": 0, "q2": 0}
    for r in done.result.jobs:
        if r.name.startswith("early"):
            continue
        if r.start is not None and r.start < ALONE + 3 * RUN:
            counts[r.queue] += 1
    total = counts["q1"] + counts["q2"]
    assert total == 3 * GPUS, counts  # every GPU busy in every wave
    return counts["q1"] / total


def test_plain_weights_split_evenly() -> None:
    assert _share_of_q1(TEPHRA_DEFAULT_CONFIG) == pytest.approx(0.5, abs=0.07)


def test_the_queue_that_used_the_cluster_alone_gets_less() -> None:
    # q1's usage share is 1 (weight share 1/2): factor 1/4, effective weights 1/4 : 1
    assert _share_of_q1(DECAYED) == pytest.approx(0.2, abs=0.07)


def test_the_simulator_hands_its_usage_to_the_cache() -> None:
    backend = RealScheduler(DECAYED, epoch=EPOCH)
    assert backend.usage is not None and backend.usage.half_life == 3600.0
    backend.cycle(0.0)
    assert backend.cache.queue_usage is not None
    assert RealScheduler(TEPHRA_DEFAULT_CONFIG, epoch=EPOCH).usage is None
