"""Decayed queue usage: what each queue used recently, older use counting for less.

Why this exists: the proportion plugin's opt-in usage-decayed fair share
(``usageHalfLife``, docs/scheduler.md#usage-decayed-fair-share) lowers the weight of a queue
that used more than its share lately. The scheduler core does no I/O, so what a queue used
reaches it as plain data on the cache (``ClusterCache.queue_usage``): in production the
scheduler service reads it from the ledger (batch.ledger.usage), in the simulator it is kept
from the simulated run itself (``UsageAccumulator``). Both use the same definition: a pod
holding ``a`` of a resource from ``s`` to ``e`` adds ``a`` times the integral of
``2^(-(now - t) / halfLife)`` over ``[s, e]`` (resource-seconds, each second weighted by its
age), ``run_usage`` below.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["REFRESH_SECONDS", "QueueUsage", "UsageAccumulator", "decay", "run_usage"]

LN2 = math.log(2.0)
#: how often the scheduler service (from the ledger) and the simulator (from its own run)
#: refresh the cache's usage figures, in seconds
REFRESH_SECONDS = 60.0


def decay(age: float, half_life: float) -> float:
    """The weight of a second ``age`` seconds old: ``2^(-age / half_life)`` (1 for the future)."""
    return 1.0 if age <= 0 else 2.0 ** (-age / half_life)


def run_usage(amount: float, start: float, end: float, now: float, half_life: float) -> float:
    """``amount`` held from ``start`` to ``end`` (epoch seconds, ``end`` capped at ``now``), in
    decayed resource-seconds at ``now``: ``amount * H/ln2 * (2^(-(now-end)/H) -
    2^(-(now-start)/H))``."""
    end = min(end, now)
    if end <= start or amount == 0:
        return 0.0
    k = half_life / LN2
    return amount * k * (decay(now - end, half_life) - decay(now - start, half_life))


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """Each queue's decayed usage at ``at`` (epoch seconds) for one half-life (seconds):
    queue -> resource name -> decayed resource-seconds (internal amounts: milli-GPUs, milli-cpu).
    """

    half_life: float
    at: float
    amounts: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def of(self, queue: str) -> Mapping[str, float]:
        return self.amounts.get(queue, {})


class UsageAccumulator:
    """Decayed usage kept from holdings that are constant between calls (the simulator, which
    calls before the events of each moment): ``advance(now, held)`` decays what was kept to
    ``now`` and adds what ``held`` (what each queue held since the previous call) used."""

    __slots__ = ("_at", "_kept", "half_life")

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self._at: float | None = None
        self._kept: dict[str, dict[str, float]] = {}

    def advance(self, now: float, held: Mapping[str, Mapping[str, float]]) -> None:
        last = self._at
        if last is not None and now <= last:
            return
        self._at = now
        if last is None:
            return
        f = decay(now - last, self.half_life)
        for usage in self._kept.values():
            for r in usage:
                usage[r] *= f
        for queue, amounts in held.items():
            usage = self._kept.setdefault(queue, {})
            for r, amount in amounts.items():
                usage[r] = usage.get(r, 0.0) + run_usage(amount, last, now, now, self.half_life)

    def snapshot(self) -> QueueUsage:
        kept = {q: dict(a) for q, a in self._kept.items()}
        return QueueUsage(self.half_life, self._at or 0.0, kept)
