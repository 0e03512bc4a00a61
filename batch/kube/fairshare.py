"""Each queue's fair-share figures of a session, as the value of its `tephra.io/fair-share`
annotation (`batch.api.fairshare`).

Why this exists: the deserved share is the fair-share plugin's answer of one session
(`Decisions.queue_metrics`, the figures the `volcano_queue_*` gauges export); publishing it on the
Queue lets the dashboard and the CLI show that figure instead of one of their own. Quantities are
limited to the resources the cluster has (a pod may ask for one no node offers) and leave `pods`
out; allocated is the session's `status.allocated`. A queue the plugin computed nothing for (no
jobs, or no fair-share plugin in the configuration) gets None: no annotation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from batch.api.fairshare import fair_share_value
from batch.api.resources import parse_resource_list
from batch.model.cache import ClusterCache
from batch.scheduler.framework.decisions import Decisions

__all__ = ["cluster_resources", "fair_share_annotations"]


def cluster_resources(cache: ClusterCache) -> set[str]:
    """The resources the schedulable nodes offer (pods aside)."""
    return set(cache.resources.to_dict(cache.total_allocatable()))


def _only(amounts: Mapping[str, int], names: Collection[str]) -> dict[str, int]:
    return {k: v for k, v in amounts.items() if k in names}


def _usage(weight: float | None, share: float | None) -> tuple[float, float] | None:
    return None if weight is None or share is None else (weight, share)


def fair_share_annotations(decisions: Decisions, cache: ClusterCache) -> dict[str, str | None]:
    """Queue name -> the annotation's value (None: the queue should carry none), for every
    queue of the cache."""
    have = cluster_resources(cache)
    out: dict[str, str | None] = dict.fromkeys(cache.queues)
    for name, qm in decisions.queue_metrics.items():
        if name not in out:
            continue
        allocated = (decisions.queue_status.get(name) or {}).get("allocated")
        out[name] = fair_share_value(
            deserved=_only(qm.amounts(qm.deserved), have),
            allocated=_only(parse_resource_list(allocated or {}), have),
            request=_only(qm.amounts(qm.request), have),
            session=decisions.session_uid,
            usage=_usage(qm.effective_weight, qm.usage_share),
        )
    return out
