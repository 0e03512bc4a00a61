"""Hashed decisions of the scheduling cycle and the simulator: the old-vs-new check for
refactoring the scheduler framework.

Seeded scenarios (the cycle benchmarks' synthetic clusters at small scale under each shipped
configuration and a gang-eviction one; short Philly replays under each simulator policy) run
through the real session; every session's binds, pipelines, evictions, PodGroup and queue
statuses and pending reasons are hashed into one digest per scenario. Time budgets are set to 0
so that no decision depends on the clock. A refactor that claims "behaviour unchanged" must
reproduce the recorded digests (tests/scheduler/data/). Regenerate only for an intended
behaviour change: `python -m tests.scheduler.replay --write`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from batch.scheduler import (
    BUILTIN_DEFAULT_CONFIG,
    HELM_DEFAULT_CONFIG,
    TEPHRA_DEFAULT_CONFIG,
    Decisions,
    Scheduler,
    apply_decisions,
    load_config,
)

GOLDEN = Path(__file__).with_name("data") / "decisions_replay.json"
NOW = 1_800_000_000.0


def _no_budget(text: str) -> str:
    return text.replace("timeBudgetSeconds: 0.4", "timeBudgetSeconds: 0")


TEPHRA = _no_budget(TEPHRA_DEFAULT_CONFIG)
GANG_EVICTION = TEPHRA.replace(
    'actions: "enqueue, allocate, preempt, reclaim, gangreclaim, backfill"',
    'actions: "enqueue, allocate, backfill, gangreclaim, gangpreempt"',
)
CONFIGS = {
    "builtin": BUILTIN_DEFAULT_CONFIG,
    "helm": HELM_DEFAULT_CONFIG,
    "tephra": TEPHRA,
    "gang-eviction": GANG_EVICTION,
}


def _canon(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted(((str(k), _canon(v)) for k, v in value.items()), key=lambda kv: kv[0])
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int | str | bool) or value is None:
        return value
    return repr(value)


def decisions_record(d: Decisions) -> Any:
    """Everything a session decided, in a canonical, hashable form (no timings, no uid)."""
    return _canon(
        {
            "binds": [(b.namespace, b.name, b.node, b.job_id) for b in d.binds],
            "pipelines": [(p.namespace, p.name, p.node, p.job_id) for p in d.pipelines],
            "evictions": [
                (e.namespace, e.name, e.reason, e.job_id, e.beneficiary) for e in d.evictions
            ],
            "podgroups": {f"{k[0]}/{k[1]}": v for k, v in d.podgroup_status.items()},
            "queues": d.queue_status,
            "pending": {
                k: (r.kind, r.message, r.short_by, r.shortfall, r.details)
                for k, r in d.pending_reasons.items()
            },
            "events": [
                (e.kind, e.namespace, e.name, e.type, e.reason, e.message) for e in d.events
            ],
            "metrics": {
                q: (m.amounts(m.deserved), m.amounts(m.request), m.share, m.overused)
                for q, m in d.queue_metrics.items()
            },
        }
    )


def _digest(records: list[Any]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r, sort_keys=True, default=repr).encode())
        h.update(b"\n")
    return h.hexdigest()


def _cycles(cache: Any, conf: str, rounds: int) -> str:
    """`rounds` sessions through `Scheduler.run_once`; between them the decisions are applied
    and the evicted pods are gone (so pipelined pods can bind)."""
    sched = Scheduler(cache, load_config(conf))
    records = []
    for r in range(rounds):
        d = sched.run_once(NOW + r)
        records.append(decisions_record(d))
        apply_decisions(cache, d)
        for e in d.evictions:
            meta = {"namespace": e.namespace, "name": e.name, "uid": e.uid}
            cache.apply("Pod", "DELETED", {"metadata": meta})
    return _digest(records)


def cycle_scenarios() -> Iterator[tuple[str, Callable[[], str]]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    # the benchmarks are scripts, not a package
    bench_cycle = importlib.import_module("cycle")
    bench_preempt = importlib.import_module("cycle_preempt")

    for conf_name, conf in CONFIGS.items():
        for gang in (1, 8):
            for seed in (1, 2):

                def run(conf: str = conf, gang: int = gang, seed: int = seed) -> str:
                    cache = bench_cycle.build(48, 240, gang, busy=0.6, seed=seed)
                    return _cycles(cache, conf, 3)

                yield f"cycle/{conf_name}/gang{gang}/seed{seed}", run

        for size in ((40, 20, 16), (60, 30, 20)):

            def run_preempt(conf: str = conf, size: tuple[int, int, int] = size) -> str:
                return _cycles(bench_preempt.build(*size), conf, 3)

            yield f"cycle-preempt/{conf_name}/{size[0]}n", run_preempt


def sim_scenarios() -> Iterator[tuple[str, Callable[[], str]]]:
    from batch.sim.backend import CycleOutcome
    from batch.sim.objects import EPOCH
    from batch.sim.policies import policies_for
    from batch.sim.real import RealScheduler
    from batch.sim.runner import run_policy
    from batch.sim.traces import load_trace

    class Recording(RealScheduler):
        records: list[Any]

        def cycle(self, now: float) -> Any:
            d = self.scheduler.run_once(self.epoch + now)
            self.records.append(decisions_record(d))
            return CycleOutcome(
                binds=[(b.namespace, b.name, b.node) for b in d.binds],
                evictions=[(e.namespace, e.name, e.reason) for e in d.evictions],
                podgroup_phases=self._phase_changes(d),
                deserved={
                    q: m.amounts(m.deserved).get("nvidia.com/gpu", 0)
                    for q, m in d.queue_metrics.items()
                },
            )

    names = ["tephra", "kube-default", "fifo", "tiresias", "sjf"]
    for lifecycle in ("fast", "volcano"):
        for scale in (0.05, 0.2):
            policies = {
                p.name: p
                for p in policies_for(
                    conf=TEPHRA, compare=names[1:], period=30.0, lifecycle=lifecycle
                )
            }
            for name in names:
                if lifecycle == "volcano" and name != "tephra":
                    continue

                def run(name: str = name, scale: float = scale, pol: Any = policies) -> str:
                    workload = load_trace("philly", limit=120).transformed(
                        capacity_scale=scale, time_compress=1.0
                    )
                    backends: list[Recording] = []

                    def backend(conf: str) -> Recording:
                        b = Recording(conf, epoch=EPOCH)
                        b.records = []
                        backends.append(b)
                        return b

                    # every policy without a wall-clock budget: the baselines derived from
                    # Tephra's conf carry its 0.4 s, which decided differently on a loaded CI
                    policy = replace(pol[name], conf=_no_budget(pol[name].conf))
                    run_policy(workload, policy, backend_factory=backend)
                    return _digest(backends[0].records)

                yield f"sim/{lifecycle}/{name}/scale{scale}", run


def digests() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, run in [*cycle_scenarios(), *sim_scenarios()]:
        out[name] = run()
    return out


def main(argv: list[str]) -> int:
    now = digests()
    if "--write" in argv:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(now)} digests to {GOLDEN}")
        return 0
    recorded = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k))
    print(f"{len(now)} scenarios, {len(changed)} changed: {changed[:10]}")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
