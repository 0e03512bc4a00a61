"""Simulation metrics, with the definitions of `perf-anchors.md` §2.1.

Why this exists: to turn a replay into the numbers admins and papers compare.

* **JCT** = finish - submit (completed jobs; includes queueing and time lost to restarts).
* **Queueing delay** = first start - submit (jobs that started); total pending time is reported
  too.
* **Allocation utilization** = Σ allocated GPU·s / (total GPUs x window) over the *steady
  window*: from the first submission plus a warm-up of `WARMUP_FRACTION` of the arrival span, to
  the last submission (drain excluded). A workload whose jobs all arrive at once uses
  [first submit, end].
* **Queue fairness**: each queue's time-averaged allocated GPU share against its time-averaged
  deserved share — the deserved GPUs the scheduler's fair-share plugin published after each
  cycle (proportion's one figure: down the queue tree, capability and usage decay included),
  so the simulator shows what the scheduler decided; for a policy that publishes none per
  trace queue (the baselines schedule everything in one queue), proportion's water-filling of
  total GPUs by weight, capped by the queue's demand (GPUs of its jobs that arrived and have
  not finished), `volcano-semantics.md#proportion` on one dimension. Ratios
  x_q = allocated / deserved; Jain's index J = (Σx)² / (n·Σx²); and the max deviation
  |allocated - deserved|. The trace's queues are the yardstick for every policy, including
  baselines that schedule everything in one queue.
* **Partial-allocation waste**: GPU·s held by bound pods of jobs that had not started (their gang
  was not complete), summed per job.
* **Preemptions** = victim jobs evicted by the scheduler; **restarts** per job.

Recording is append-only on the hot path; everything else is computed once at the end with numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.sim.workload import Workload

__all__ = ["JobRecord", "MetricsRecorder", "jain_index", "summarize", "water_fill"]

WARMUP_FRACTION = 0.05
GRID_POINTS = 400


@dataclass(slots=True)
class JobRecord:
    name: str
    queue: str
    submit: float
    gpus: float
    pods: int
    run_time: float
    start: float | None = None
    finish: float | None = None
    phase: str = "Pending"
    restarts: int = 0
    evictions: int = 0
    wasted_gpu_s: float = 0.0
    first_bind: float | None = None  # when the job's first pod was bound (first attempt)

    @property
    def queue_delay(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    @property
    def gang_spread(self) -> float | None:
        """Gang start spread: first pod bound -> whole gang running (multi-pod jobs that bound a
        pod; infinite when the gang never completed)."""
        if self.pods < 2 or self.first_bind is None:
            return None
        return math.inf if self.start is None else self.start - self.first_bind

    @property
    def jct(self) -> float | None:
        if self.finish is None or self.phase != "Completed":
            return None
        return self.finish - self.submit


def water_fill(total: float, weights: Sequence[float], demands: Sequence[float]) -> list[float]:
    """Deserved amounts: `total` split by weight, each capped by its demand, excess re-split."""
    deserved = [0.0] * len(weights)
    active = [i for i, d in enumerate(demands) if d > 0]
    remaining = float(total)
    while active and remaining > 1e-9:
        w = sum(weights[i] for i in active)
        if w <= 0:
            break
        met: list[int] = []
        given = 0.0
        for i in active:
            add = remaining * weights[i] / w
            room = demands[i] - deserved[i]
            if add >= room:
                add = room
                met.append(i)
            deserved[i] += add
            given += add
        remaining -= given
        if not met:
            break
        active = [i for i in active if i not in met]
    return deserved


def jain_index(values: Sequence[float]) -> float | None:
    xs = [v for v in values if not math.isnan(v)]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


@dataclass(slots=True)
class MetricsRecorder:
    """Append-only logs of allocation and demand changes, per queue."""

    workload: Workload
    queue_names: list[str]
    samples: int = GRID_POINTS
    preemptions: int = 0
    alloc_t: list[float] = field(default_factory=list)
    alloc_q: list[int] = field(default_factory=list)
    alloc_d: list[int] = field(default_factory=list)
    demand_t: list[float] = field(default_factory=list)
    demand_q: list[int] = field(default_factory=list)
    demand_d: list[int] = field(default_factory=list)
    #: the scheduler's published deserved GPUs per queue, as changes (``deserved_now``)
    deserved_t: list[float] = field(default_factory=list)
    deserved_q: list[int] = field(default_factory=list)
    deserved_d: list[int] = field(default_factory=list)
    _deserved: dict[int, int] = field(default_factory=dict)
    end: float = 0.0
    _now: float = 0.0

    def advance(self, now: float) -> None:
        self._now = now

    def gpu_change(self, now: float, queue_idx: int, delta_milli: int) -> None:
        if delta_milli:
            self.alloc_t.append(now)
            self.alloc_q.append(queue_idx)
            self.alloc_d.append(delta_milli)

    def job_arrived(self, queue_idx: int, gpu_milli: int) -> None:
        self.demand_t.append(self._now)
        self.demand_q.append(queue_idx)
        self.demand_d.append(gpu_milli)

    def job_left(self, queue_idx: int, gpu_milli: int) -> None:
        self.demand_t.append(self._now)
        self.demand_q.append(queue_idx)
        self.demand_d.append(-gpu_milli)

    def deserved_now(self, now: float, queue_idx: int, milli: int) -> None:
        """The scheduler's deserved GPUs (milli) for a queue from ``now`` on."""
        delta = milli - self._deserved.get(queue_idx, 0)
        if delta:
            self._deserved[queue_idx] = milli
            self.deserved_t.append(now)
            self.deserved_q.append(queue_idx)
            self.deserved_d.append(delta)

    def close(self, end: float) -> None:
        self.end = end

    # -- post-processing ----------------------------------------------------------------------

    def window(self) -> tuple[float, float]:
        jobs = self.workload.jobs
        if not jobs:
            return 0.0, max(self.end, 1.0)
        first, last = jobs[0].submit, jobs[-1].submit
        span = last - first
        if span <= 0:
            return first, max(self.end, first + 1.0)
        return first + WARMUP_FRACTION * span, last

    def _step_values(
        self,
        times: list[float],
        queues: list[int],
        deltas: list[int],
        grid: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        """Per-queue value (GPUs) of a step function at each grid time: shape (Q, len(grid))."""
        nq = len(self.queue_names)
        out = np.zeros((nq, grid.size))
        if not times:
            return out
        t = np.asarray(times)
        q = np.asarray(queues, dtype=np.int64)
        d = np.asarray(deltas, dtype=np.float64) / 1000.0
        for i in range(nq):
            mask = q == i
            if not mask.any():
                continue
            ti = t[mask]
            ci = np.cumsum(d[mask])
            pos = np.searchsorted(ti, grid, side="right") - 1
            vals = np.where(pos >= 0, ci[np.maximum(pos, 0)], 0.0)
            out[i] = vals
        return out

    def utilization(self) -> float:
        total = self.workload.cluster.gpu_milli_total / 1000.0
        w0, w1 = self.window()
        if total <= 0 or w1 <= w0 or not self.alloc_t:
            return 0.0
        t = np.asarray(self.alloc_t)
        v = np.cumsum(np.asarray(self.alloc_d, dtype=np.float64) / 1000.0)
        # v[k] holds on [t[k], t[k+1]); the last value holds until the end.
        t_next = np.append(t[1:], max(self.end, t[-1]))
        lo = np.clip(t, w0, w1)
        hi = np.clip(t_next, w0, w1)
        area = float(np.sum(v * (hi - lo)))
        return area / (total * (w1 - w0))

    def series(self) -> dict[str, Any]:
        """Grid over [0, end] of utilization and per-queue allocated/deserved shares."""
        total = self.workload.cluster.gpu_milli_total / 1000.0
        end = max(self.end, 1.0)
        grid = np.linspace(0.0, end, self.samples)
        alloc = self._step_values(self.alloc_t, self.alloc_q, self.alloc_d, grid)
        demand = self._step_values(self.demand_t, self.demand_q, self.demand_d, grid)
        weights = [1.0] * len(self.queue_names)
        declared = {q.name: q.weight for q in self.workload.cluster.queues}
        for i, name in enumerate(self.queue_names):
            weights[i] = float(declared.get(name, 1))
        if self.deserved_t:
            deserved = self._step_values(self.deserved_t, self.deserved_q, self.deserved_d, grid)
        else:
            deserved = np.zeros_like(demand)
            for k in range(grid.size):
                deserved[:, k] = water_fill(total, weights, list(demand[:, k]))
        return {
            "t": grid,
            "total_gpus": total,
            "utilization": alloc.sum(axis=0) / total if total else np.zeros_like(grid),
            "alloc": alloc,
            "deserved": deserved,
            "demand": demand,
        }

    def fairness(self, series: dict[str, Any]) -> dict[str, Any]:
        w0, w1 = self.window()
        grid = series["t"]
        mask = (grid >= w0) & (grid <= w1)
        if not mask.any():
            mask = np.ones_like(grid, dtype=bool)
        total = series["total_gpus"] or 1.0
        per_queue: dict[str, dict[str, float | None]] = {}
        ratios: list[float] = []
        deviation = 0.0
        for i, name in enumerate(self.queue_names):
            a = float(series["alloc"][i][mask].mean()) / total
            d = float(series["deserved"][i][mask].mean()) / total
            ratio = a / d if d > 1e-12 else None
            if ratio is not None:
                ratios.append(ratio)
            if d > 1e-12 or a > 1e-12:
                deviation = max(deviation, abs(a - d))
            per_queue[name] = {"allocated_share": a, "deserved_share": d, "ratio": ratio}
        return {"queues": per_queue, "jain_index": jain_index(ratios), "max_deviation": deviation}


def _pct(values: npt.NDArray[np.float64], q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _mean(values: npt.NDArray[np.float64]) -> float | None:
    return float(values.mean()) if values.size else None


def summarize(
    records: Sequence[JobRecord], metrics: MetricsRecorder, series: dict[str, Any]
) -> dict[str, Any]:
    """The per-policy summary object of `summary.json` (without run bookkeeping)."""
    jct = np.asarray([r.jct for r in records if r.jct is not None], dtype=np.float64)
    delay = np.asarray(
        [r.queue_delay for r in records if r.queue_delay is not None], dtype=np.float64
    )
    spread = np.asarray(
        [r.gang_spread for r in records if r.gang_spread is not None], dtype=np.float64
    )
    started = spread[np.isfinite(spread)]
    fair = metrics.fairness(series)
    by_queue: dict[str, dict[str, Any]] = {}
    for name in metrics.queue_names:
        rs = [r for r in records if r.queue == name]
        if not rs:
            continue
        d = np.asarray([r.queue_delay for r in rs if r.queue_delay is not None], dtype=np.float64)
        j = np.asarray([r.jct for r in rs if r.jct is not None], dtype=np.float64)
        by_queue[name] = {
            "jobs": len(rs),
            "completed": int(j.size),
            "queue_delay_mean_s": _mean(d),
            "queue_delay_p99_s": _pct(d, 99),
            "jct_mean_s": _mean(j),
            **fair["queues"].get(name, {}),
        }
    return {
        "jobs": len(records),
        "completed": sum(1 for r in records if r.phase == "Completed"),
        "failed": sum(1 for r in records if r.phase == "Failed"),
        "unfinished": sum(1 for r in records if r.finish is None),
        "never_started": sum(1 for r in records if r.start is None),
        "jct_mean_s": _mean(jct),
        "jct_p50_s": _pct(jct, 50),
        "jct_p99_s": _pct(jct, 99),
        "queue_delay_mean_s": _mean(delay),
        "queue_delay_p50_s": _pct(delay, 50),
        "queue_delay_p99_s": _pct(delay, 99),
        "utilization": metrics.utilization(),
        "utilization_window_s": list(metrics.window()),
        "wasted_gpu_hours": sum(r.wasted_gpu_s for r in records) / 3600.0,
        "gang_spread_mean_s": _mean(started),
        "gang_spread_p99_s": _pct(started, 99),
        "gangs_never_whole": int(spread.size - started.size),
        "preemptions": metrics.preemptions,
        "restarts": sum(r.restarts for r in records),
        "jain_index": fair["jain_index"],
        "max_share_deviation": fair["max_deviation"],
        "makespan_s": (
            max((r.finish for r in records if r.finish is not None), default=0.0)
            - min((r.submit for r in records), default=0.0)
        ),
        "queues": by_queue,
    }
