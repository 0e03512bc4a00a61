"""tiresias's starvation limit and its service counting across evictions (issue 17.3), through
the simulator and on the plugin's kept state; and the validation of their arguments."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from batch.model.info import JobInfo
from batch.scheduler.config import ConfigError, load_config
from batch.scheduler.plugins.tiresias import Service
from batch.sim.policies import TIRESIAS_CONF, policies_for
from batch.sim.runner import run_policy
from batch.sim.workload import SimJob
from tests.sim.conftest import cluster, job, workload


def _finish(arguments: str) -> dict[str, float]:
    # "long" (8 GPUs) reaches the last level (10 GPU-hours) after 4,500 s; "big" arrives at
    # 5,000 s in level 0, preempts it and runs for 50,000 s; a CPU-only job arriving at 16,000 s
    # makes the simulator run a session then (it skips idle time between events)
    jobs = [job("long", submit=0, run=10_000, gpus_per_pod=8)]
    jobs += [job("big", submit=5_000, run=50_000, gpus_per_pod=8)]
    jobs += [job("tick", submit=16_000, run=10, gpus_per_pod=0)]
    p = policies_for(conf=None, compare=["tiresias"], lifecycle="fast")[1]
    conf = TIRESIAS_CONF.replace(
        "  - name: tiresias\n", f"  - name: tiresias\n    arguments: {{{arguments}}}\n", 1
    )
    done = run_policy(workload(jobs, cluster(1, gpus=8)), replace(p, conf=conf))
    out = {}
    for r in done.result.jobs:
        assert r.finish is not None, r
        out[r.name] = r.finish
    return out


def test_a_starving_job_is_promoted_and_preempts_back() -> None:
    plain = _finish("tiresias.starveLimit: 0, tiresias.lostWorkRatio: 0")
    starved = _finish("tiresias.starveLimit: 2, tiresias.lostWorkRatio: 0")
    # without the limit "long" waits for "big" (both end in the last level)
    assert plain["long"] > 55_000
    # with it "long", which ran 5,000 s, is promoted after waiting 10,000 s, is in level 0
    # again and preempts "big" (now in the last level) at the next session, 16,000 s
    assert 26_000 < starved["long"] < 27_000
    assert starved["big"] > plain["big"]


def _held(job: JobInfo, gpus: int) -> None:
    job.allocated = np.array([1, 0, 0, gpus * 1000])


def test_promotion_waits_for_the_limit_times_the_latest_run() -> None:
    job = JobInfo("ns/a", "ns", "a", dims=4)
    s = Service()
    s.advance({"ns/a": job}, 3, now=0.0)
    _held(job, 2)
    s.advance({"ns/a": job}, 3, now=100.0)
    s.advance({"ns/a": job}, 3, now=300.0)  # ran 300 s (counted from the first session)
    _held(job, 0)
    s.advance({"ns/a": job}, 3, now=400.0)  # evicted at 400 s
    assert s.units["ns/a"] == 600.0 and s.ran["ns/a"] == 300.0
    assert s.promote_starving(2.0, now=1000.0) == []  # waited 600 s: not more than 2 x 300
    assert s.promote_starving(2.0, now=1001.0) == ["ns/a"]
    assert s.units["ns/a"] == 0.0  # the highest level again
    s.advance({"ns/a": job}, 3, now=5000.0)
    assert s.promote_starving(2.0, now=5000.0) == []  # once per wait
    _held(job, 1)
    s.advance({"ns/a": job}, 3, now=5010.0)  # bound at 5,000 s: a new run
    assert s.ran["ns/a"] == 10.0 and "ns/a" not in s.stopped


def test_reset_on_eviction_starts_service_again() -> None:
    job = JobInfo("ns/a", "ns", "a", dims=4)
    s = Service()
    s.advance({"ns/a": job}, 3, now=0.0)
    _held(job, 1)
    s.advance({"ns/a": job}, 3, now=100.0, reset=True)
    _held(job, 0)
    s.advance({"ns/a": job}, 3, now=200.0, reset=True)
    assert s.units["ns/a"] == 0.0 and s.evicted["ns/a"] == 1


@pytest.mark.parametrize(
    "arg",
    [
        "tiresias.starveLimit: -1",
        "tiresias.starveLimit: .nan",
        "tiresias.starveLimit: .inf",
        "tiresias.starveLimit: soon",
        "tiresias.maxEvictions: -1",
        "tiresias.resetOnEviction: maybe",
        "tiresias.lostWorkRatio: .nan",
        "tiresias.lostWorkRatio: -2",
        "tiresias.preemptorLevels: 0",
        "tiresias.preemptorLevels: 3",
    ],
)
def test_bad_arguments_are_refused(arg: str) -> None:
    conf = (
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: tiresias\n'
        f"    arguments: {{{arg}}}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"tiresias\.(starveLimit|maxEvictions|resetOnEviction|lostWorkRatio|preemptorLevels)",
    ):
        load_config(conf)


def test_good_arguments_load() -> None:
    load_config(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: tiresias\n'
        "    arguments: {tiresias.starveLimit: 1.5, tiresias.resetOnEviction: true}\n"
    )


def _runs(jobs: list[SimJob], arguments: str, nodes: int = 1) -> dict[str, tuple[float, float]]:
    p = policies_for(conf=None, compare=["tiresias"], lifecycle="fast")[1]
    conf = TIRESIAS_CONF.replace(
        "  - name: tiresias\n", f"  - name: tiresias\n    arguments: {{{arguments}}}\n", 1
    )
    done = run_policy(workload(jobs, cluster(nodes, gpus=8)), replace(p, conf=conf))
    out = {}
    for r in done.result.jobs:
        assert r.start is not None and r.finish is not None, r
        out[r.name] = (r.start, r.finish)
    return out


def test_preemptor_levels_keeps_a_level_one_job_from_preempting() -> None:
    # thresholds 1 and 100 GPU-hours, one 8-GPU node: "c" (level 0) evicts "a" (level 1 after
    # 1,000 s); "c" reaches the last level at 46,000 s; a CPU-only job makes a session at 50,000 s
    jobs = [
        job("a", submit=0, run=200_000, gpus_per_pod=8),
        job("c", submit=1_000, run=100_000, gpus_per_pod=8),
        job("tick", submit=50_000, run=10, gpus_per_pod=0),
    ]
    common = "tiresias.factor: 100, tiresias.lostWorkRatio: 0"
    every = _runs(jobs, f"{common}, tiresias.preemptorLevels: 2")
    first = _runs(jobs, f"{common}, tiresias.preemptorLevels: 1")
    assert every["a"][1] < 251_000 < every["c"][1]  # "a", in level 1, evicted "c" at 50,000 s
    assert first["c"][1] < 102_000 < first["a"][1]  # only level 0 preempts: "a" waits for "c"


def test_lost_work_ratio_makes_short_jobs_wait_before_evicting_a_long_run() -> None:
    # the 8-GPU job has run 4,000 s when ten one-GPU jobs arrive; with a ratio of 3 they may
    # evict it once 3 x their wait exceeds its run (after 2,000 s), with a ratio of 100 after
    # 41 s. No event comes in between: the simulator runs idle cycles at doubling gaps while
    # jobs wait and the decisions may change with time alone, so each starts soon after.
    jobs = [job("long", submit=0, run=20_000, gpus_per_pod=8)]
    jobs += [job(f"s{i}", submit=4_000, run=600) for i in range(10)]
    eager = _runs(jobs, "tiresias.lostWorkRatio: 100")
    patient = _runs(jobs, "tiresias.lostWorkRatio: 3")
    shorts = [f"s{i}" for i in range(10)]
    assert 4_041 <= min(eager[s][0] for s in shorts) < 4_200  # 8 at once, 2 when the first end
    assert 6_000 <= min(patient[s][0] for s in shorts) < 6_000 + 2_100
    assert max(patient[s][1] for s in shorts) < 20_000  # they did evict it, once they had waited
