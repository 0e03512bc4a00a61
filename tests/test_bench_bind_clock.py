"""benchmarks/e2e_real.py's run by the apiserver's clock: pods/s to the last pod's
PodScheduled transition, and how late the driver's watch saw that last bind."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    if str(REPO / "benchmarks") not in sys.path:  # it imports plain_binder beside it
        sys.path.insert(0, str(REPO / "benchmarks"))
    return load_script(REPO / "benchmarks" / "e2e_real.py", "e2e_real")


def _pod(name: str, scheduled_at: float | None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    if scheduled_at is not None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(scheduled_at))
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp})
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


class _Client:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    async def list(self, res: Any, *, namespace: str) -> dict[str, Any]:
        return {"items": self.pods}


def test_pods_per_second_and_the_watch_lag_by_the_apiservers_clock() -> None:
    bench = _bench()
    wall = time.time() - time.perf_counter()
    start = float(int(time.time()) - 100)  # a whole second: the stamps' resolution
    started = start - wall  # on the perf_counter clock, as the driver keeps it
    pods = [_pod(f"p{i}", start + 10 + i) for i in range(10)]  # the last bind: start + 19
    clock = bench.Clock(10)
    for i in range(10):  # the driver saw each 5 s after the apiserver made it
        clock.bound[f"p{i}"] = started + 10 + i + 5.5
    result = bench.Result(1, "pods", "tephra", "backlog", 10)
    asyncio.run(bench.bind_clock(_Client(pods), "ns", result, clock, started))
    assert result.api_pods_per_s == round(10 / 19.5, 1)
    assert abs(result.watch_lag_s - 5.0) <= 0.1


def test_a_pod_without_its_condition_leaves_the_figures_out() -> None:
    bench = _bench()
    clock = bench.Clock(2)
    clock.bound.update(a=1.0, b=2.0)
    result = bench.Result(1, "pods", "tephra", "backlog", 2)
    pods = [_pod("a", time.time()), _pod("b", None)]
    asyncio.run(bench.bind_clock(_Client(pods), "ns", result, clock, 0.0))
    assert result.api_pods_per_s == 0.0
    assert result.watch_lag_s == 0.0
