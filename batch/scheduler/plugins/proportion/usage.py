"""proportion's opt-in usage-decayed fair share (``usageHalfLife``,
docs/scheduler.md#usage-decayed-fair-share): a queue that used more than its weight's share of
the cluster lately gets a smaller weight now, as Slurm's fair-share factor does.

A queue's usage share ``U`` is its decayed usage (``ClusterCache.queue_usage``, read from the
ledger or kept by the simulator; batch.model.usage) over all the session's queues' decayed
usage, on the resource where that share is largest (GPUs on a GPU cluster); its weight share
``S`` is its weight over the session's queues' weights. Its effective weight is
``weight * max(2^(-usageWeight * U / S), usageMinFactor)``: a queue that used exactly its share
has its weight halved, as does every other such queue (only ratios of weights matter), one that
used nothing keeps it, and no queue's weight ever reaches 0. The effective weight is what the
water-filling reads (``QueueAttr.weight``). Evictions never take a queue below what the plain
weights give it (``kept_share``: reclaim's victims and floor, overcommit's count of what reclaim
gives back): usage steers where free room goes, it does not evict running work for a share that
moves with time (in the simulator that churn failed jobs past their retry limit), unless
``usageEvicts: true``. Without
``usageHalfLife``, or
without usage figures for that half-life (no ledger, the ledger down, nothing recorded yet), the
weights are the queues' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from batch.model.usage import QueueUsage
from batch.scheduler.framework.arguments import Arguments, ConfigError
from batch.scheduler.framework.conf import SchedulerConfig
from batch.scheduler.pluginlib.durations import parse_duration

__all__ = ["UsageDecay", "UsageFigure", "configured_decay", "usage_decay_of", "usage_figures"]


@dataclass(frozen=True, slots=True)
class UsageDecay:
    """The plugin's usage arguments: half-life (seconds), strength and floor of the factor."""

    half_life: float
    weight: float = 1.0
    min_factor: float = 0.1
    #: ``usageEvicts``: evictions follow the decayed share too (default: never below the plain
    #: weights' share)
    evicts: bool = False


@dataclass(frozen=True, slots=True)
class UsageFigure:
    """A queue's usage share, weight share, factor and effective weight in one session."""

    usage_share: float
    weight_share: float
    factor: float
    effective_weight: float
    #: the queue's own weight
    weight: float


def usage_decay_of(arguments: Arguments) -> UsageDecay | None:
    """``usageHalfLife`` (a duration, days allowed: ``7d``), ``usageWeight`` (default 1),
    ``usageMinFactor`` (default 0.1, in (0, 1]) and ``usageEvicts`` (default false); None when
    no half-life is given."""
    raw = arguments.raw.get("usageHalfLife")
    if raw is None or raw == "" or raw == 0:
        return None
    try:
        half_life = parse_duration(raw)
    except ValueError as exc:
        raise ConfigError(f"proportion: usageHalfLife {raw!r} is not a duration ({exc})") from None
    weight = arguments.get_float("usageWeight", 1.0)
    floor = arguments.get_float("usageMinFactor", 0.1)
    if half_life <= 0:
        raise ConfigError(f"proportion: usageHalfLife must be positive, got {raw!r}")
    if weight < 0:
        raise ConfigError(f"proportion: usageWeight must be >= 0, got {weight}")
    if not 0 < floor <= 1:
        raise ConfigError(f"proportion: usageMinFactor must be in (0, 1], got {floor}")
    return UsageDecay(half_life, weight, floor, arguments.get_bool("usageEvicts", False))


def configured_decay(config: SchedulerConfig) -> UsageDecay | None:
    """The proportion plugin's usage arguments in ``config`` (None: not asked for): what the
    scheduler service and the simulator keep usage figures for."""
    option = config.plugin("proportion")
    if option is None:
        return None
    return usage_decay_of(Arguments("proportion", option.arguments))


def _shares(usage: QueueUsage, queues: Mapping[str, float]) -> dict[str, float]:
    """Each queue's largest share, over the resources, of the queues' decayed usage."""
    totals: dict[str, float] = {}
    for q in queues:
        for r, amount in usage.of(q).items():
            totals[r] = totals.get(r, 0.0) + max(amount, 0.0)
    out: dict[str, float] = {}
    for q in queues:
        mine = usage.of(q)
        out[q] = max(
            (max(mine.get(r, 0.0), 0.0) / t for r, t in totals.items() if t > 0), default=0.0
        )
    return out


def usage_figures(
    weights: Mapping[str, float], usage: QueueUsage | None, decay: UsageDecay
) -> dict[str, UsageFigure]:
    """Each queue's figures for ``weights`` (queue -> its own weight, the session's queues);
    empty when ``usage`` is missing or for another half-life (plain weights)."""
    if usage is None or usage.half_life != decay.half_life:
        return {}
    total_weight = sum(weights.values())
    if total_weight <= 0:
        return {}
    shares = _shares(usage, weights)
    out: dict[str, UsageFigure] = {}
    for q, w in weights.items():
        s = w / total_weight
        u = shares[q]
        factor = 1.0 if s <= 0 else max(2.0 ** (-decay.weight * u / s), decay.min_factor)
        out[q] = UsageFigure(u, s, factor, w * factor, w)
    return out
