"""The opt-in job orders of issue 17.2, through the simulator: ``tiresias`` (least attained GPU
service first, preempting jobs of a higher service level) and ``sjf`` (shortest runningEstimate
first, with aging); their arguments are validated like Volcano's."""

from __future__ import annotations

import pytest

from batch.scheduler.config import ConfigError, load_config
from batch.sim.policies import SJF_CONF, TIRESIAS_CONF, policies_for
from batch.sim.runner import run_policy
from batch.sim.workload import SimJob
from tests.sim.conftest import cluster, job, workload


def _run(name: str, jobs: list[SimJob], gpus: int = 8) -> dict[str, tuple[float, float]]:
    w = workload(jobs, cluster(1, gpus=gpus))
    compare = [] if name == "tephra" else [name]
    p = {x.name: x for x in policies_for(conf=None, compare=compare, lifecycle="fast")}[name]
    done = run_policy(w, p)
    out = {}
    for r in done.result.jobs:
        assert r.start is not None and r.finish is not None, r
        out[r.name] = (r.start, r.finish)
    return out


def test_tiresias_lets_short_jobs_preempt_a_long_one() -> None:
    # an 8-GPU job runs alone for 4,000 s (8.9 GPU-hours: past the 1 h quantum), then ten
    # one-GPU 600 s jobs arrive on the full node
    jobs = [job("long", submit=0, run=20_000, gpus_per_pod=8)]
    jobs += [job(f"s{i}", submit=4_000, run=600) for i in range(10)]
    # tiresias.lostWorkRatio lets them evict its 4,000 s run after waiting 40 s; a CPU-only job
    # makes the simulator run a session at 4,100 s (it skips idle time between events)
    jobs += [job("tick", submit=4_100, run=10, gpus_per_pod=0)]
    fifo = _run("fifo", jobs)
    tiresias = _run("tiresias", jobs)
    assert min(fifo[f"s{i}"][0] for i in range(10)) >= 20_000  # they wait for the long job
    assert max(tiresias[f"s{i}"][1] for i in range(10)) < 6_000  # they preempted it
    assert tiresias["long"][1] > fifo["long"][1]  # it restarted, from scratch


def test_sjf_runs_the_shortest_estimate_first() -> None:
    jobs = [job("filler", submit=0, run=50)]
    jobs += [job(n, submit=1, run=r) for n, r in (("long", 1000), ("mid", 100), ("short", 10))]
    fifo = _run("fifo", jobs, gpus=1)
    sjf = _run("sjf", jobs, gpus=1)
    assert fifo["long"][0] < fifo["mid"][0] < fifo["short"][0]
    assert sjf["short"][0] < sjf["mid"][0] < sjf["long"][0]


def test_sjf_aging_lets_a_long_wait_win() -> None:
    # with agingFactor 100 a second of waiting outweighs 100 s of estimate: "long", submitted
    # 20 s earlier, goes before "short" although its estimate is 1,000 s longer
    jobs = [job("filler", submit=0, run=50), job("long", submit=1, run=1000)]
    jobs += [job("short", submit=21, run=10)]
    w = workload(jobs, cluster(1, gpus=1))
    (p,) = [
        x for x in policies_for(conf=None, compare=["sjf"], lifecycle="fast") if x.name == "sjf"
    ]
    from dataclasses import replace

    aged = replace(
        p, conf=SJF_CONF.replace("name: sjf", "name: sjf\n    arguments: {sjf.agingFactor: 100}")
    )
    times = {r.name: r.start for r in run_policy(w, aged).result.jobs}
    plain = {r.name: r.start for r in run_policy(w, p).result.jobs}
    assert plain["short"] < plain["long"]  # type: ignore[operator]
    assert times["long"] < times["short"]  # type: ignore[operator]


def test_the_policies_load_and_bad_arguments_are_refused() -> None:
    load_config(TIRESIAS_CONF)
    load_config(SJF_CONF)
    bad = [
        ("tiresias", "tiresias.quantum: soon"),
        ("tiresias", "tiresias.factor: 1"),
        ("tiresias", "tiresias.levels: 0"),
        ("tiresias", "tiresias.what: 1"),
        ("sjf", "sjf.agingFactor: -1"),
        ("sjf", "sjf.defaultRunningEstimate: later"),
        ("sjf", "sjf.nope: 1"),
    ]
    for plugin, arg in bad:
        conf = (
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n'
            f"  - name: {plugin}\n    arguments: {{{arg}}}\n"
        )
        with pytest.raises(ConfigError, match=plugin):
            load_config(conf)


def test_tiresias_counts_service_and_evictions_across_sessions() -> None:
    import numpy as np

    from batch.model.info import JobInfo
    from batch.scheduler.plugins.tiresias import Service

    job = JobInfo("ns/a", "ns", "a", dims=4)
    s = Service()
    s.advance({"ns/a": job}, 3, now=0.0)
    job.allocated = np.array([1, 0, 0, 2000])  # 2 GPUs
    s.advance({"ns/a": job}, 3, now=100.0)
    s.advance({"ns/a": job}, 3, now=200.0)
    assert s.units["ns/a"] == 400.0  # 2 GPUs held at each of two sessions 100 s apart
    job.allocated = np.zeros(4, dtype=np.int64)
    s.advance({"ns/a": job}, 3, now=300.0)
    assert s.evicted["ns/a"] == 1 and s.units["ns/a"] == 400.0  # kept across the restart
    s.advance({}, 3, now=300.0 + 7200)
    assert "ns/a" not in s.units  # gone for over an hour: forgotten
