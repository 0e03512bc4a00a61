"""Run one workload under several policies and collect comparable results.

Why this exists: `tephra sim`, `tephra whatif` and the benchmark all do the same thing — replay
a workload once per policy through the real scheduler, then summarise each run the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from batch.gcpause import gc_spaced
from batch.sim.backend import SchedulerBackend
from batch.sim.engine import ProgressFn, SimResult, Simulation
from batch.sim.metrics import summarize
from batch.sim.policies import Policy
from batch.sim.workload import Workload

__all__ = ["BackendFactory", "PolicyRun", "run_policies", "run_policy"]

BackendFactory = Callable[[str], SchedulerBackend]


@dataclass(slots=True)
class PolicyRun:
    policy: Policy
    result: SimResult
    summary: dict[str, Any]
    series: dict[str, Any]


def _default_factory(conf: str) -> SchedulerBackend:
    from batch.sim.objects import EPOCH
    from batch.sim.real import RealScheduler

    return RealScheduler(conf, epoch=EPOCH)


def run_policy(
    workload: Workload,
    policy: Policy,
    *,
    backend_factory: BackendFactory | None = None,
    progress: ProgressFn | None = None,
) -> PolicyRun:
    t0 = time.perf_counter()
    backend = (backend_factory or _default_factory)(policy.conf)
    sim = Simulation(workload, backend, options=policy.options, progress=progress)
    # a replay is ~10^5 sessions of short-lived objects beside a live cluster model: at Python's
    # default thresholds the collector walked that model ~10 times a second (about 4 % of the
    # replay, docs/sim.md#speed-gc); reference counting frees nearly all of it anyway
    with gc_spaced():
        result = sim.run()
    series = result.metrics.series()
    summary = summarize(result.jobs, result.metrics, series)
    summary.update(
        {
            "policy": policy.name,
            "wall_s": time.perf_counter() - t0,
            "sessions": result.sessions,
            "session_wall_s": result.session_seconds,
            "events": result.events,
            "events_per_s": result.events / result.wall_s if result.wall_s > 0 else None,
            "end_time_s": result.end_time,
            "period_s": policy.options.period,
            "lifecycle": policy.options.lifecycle,
            "trace": workload.name,
            "capacity_scale": workload.capacity_scale,
            "time_compress": workload.time_compress,
            "nodes": workload.cluster.node_count,
            "gpus": workload.cluster.gpu_milli_total / 1000,
        }
    )
    return PolicyRun(policy, result, summary, series)


def run_policies(
    workload: Workload,
    policies: Sequence[Policy],
    *,
    backend_factory: BackendFactory | None = None,
    progress: Callable[[str], ProgressFn | None] | None = None,
) -> dict[str, PolicyRun]:
    out: dict[str, PolicyRun] = {}
    for policy in policies:
        cb = progress(policy.name) if progress is not None else None
        out[policy.name] = run_policy(
            workload, policy, backend_factory=backend_factory, progress=cb
        )
    return out
