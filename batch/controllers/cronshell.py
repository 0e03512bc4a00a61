"""The CronJob controller's I/O: read a CronJob and its namespace's VCJobs, call the pure sync.

Kept apart from `operator.py` so the controller manager only routes keys: a VCJob's watch event
also wakes the CronJob that controls it (`owner_key`), as Volcano's job informer handlers do, and
the sync's `requeue_after` (the next start time) becomes an APScheduler timer there. `clock` is
the sync's notion of now; tests replace it to drive the schedule without waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.actions import ReconcileResult
from batch.controllers.cronjob import reconcile_cronjob
from batch.controllers.shell import JOBS, get_or_none, list_items, register_kind, resource_for
from batch.kube.client import KubeClient

__all__ = ["CRONJOB_KEY", "CronJobSync", "owner_key"]

#: The work-queue key kind of a CronJob: ("cronjob", namespace, name).
CRONJOB_KEY = "cronjob"

register_kind(c.BATCH_API, "CronJob", "cronjobs")
CRONJOBS = resource_for(c.BATCH_API, "CronJob")


def _now() -> datetime:
    return datetime.now(UTC)


def owner_key(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The key of the CronJob controlling a VCJob, if one does."""
    m = job.get("metadata") or {}
    for o in m.get("ownerReferences") or []:
        if (
            o.get("controller")
            and o.get("kind") == "CronJob"
            and str(o.get("apiVersion", "")).startswith(f"{c.BATCH_GROUP}/")
        ):
            return (CRONJOB_KEY, str(m.get("namespace")), str(o.get("name")))
    return None


class CronJobSync:
    """Reads what one CronJob sync needs, fresh from the API server."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock

    async def reconcile(self, client: KubeClient, ns: str, name: str) -> ReconcileResult | None:
        """The sync's result, or None when the CronJob is gone."""
        cronjob = await get_or_none(client, CRONJOBS, name, ns)
        if cronjob is None:
            return None
        cronjob.setdefault("kind", "CronJob")
        cronjob.setdefault("apiVersion", c.BATCH_API)
        jobs = await list_items(client, JOBS, namespace=ns)
        return reconcile_cronjob(cronjob, jobs, now=self.clock())
