"""The CronJob controller's I/O: read a CronJob and its namespace's VCJobs, call the pure sync.

Kept apart from `operator.py` so the controller manager only routes keys: a VCJob's watch event
also wakes the CronJob that controls it (`owner_key`), as Volcano's job informer handlers do, and
the sync's `requeue_after` (the next start time) becomes an APScheduler timer there. `clock` is
the sync's notion of now; tests replace it to drive the schedule without waiting for it.
A Job the API server refuses (its template passes CronJob admission, but e.g. its queue is
closed) is told on the CronJob as a Warning event, once per distinct refusal, while the sync is
retried with backoff (issue 30: such refusals were retried silently).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.cronjob import reconcile_cronjob
from batch.controllers.effects import CreateObject, EmitEvent, ObjectRef, ReconcileResult
from batch.controllers.shell import (
    JOBS,
    ApplyError,
    get_or_none,
    list_items,
    register_kind,
    resource_for,
)
from batch.kube.client import ApiError, KubeClient

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


#: API answers that refuse the Job itself (invalid, refused by admission or quota, forbidden):
#: retrying the same template does not help until the template or what it refers to changes.
REFUSALS = frozenset({400, 403, 422})


class CronJobSync:
    """Reads what one CronJob sync needs, fresh from the API server."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        self._told: dict[tuple[str, str, str], str] = {}

    def refusal_event(self, exc: ApplyError) -> EmitEvent | None:
        """The Warning event (`FailedCreate`, as Kubernetes' CronJob controller) telling the
        owner of a CronJob that the API server refused the Job made from its template; None for
        any other failure, or when the same refusal was already told (the sync is retried with
        backoff: one event per distinct refusal, not one per retry)."""
        cause = exc.__cause__
        if not isinstance(exc.action, CreateObject) or not isinstance(cause, ApiError):
            return None
        job = exc.action.body.get("metadata") or {}
        owner = owner_key({"metadata": job})
        if cause.status not in REFUSALS or owner is None:
            return None
        why = str(cause.body.get("message") or cause)
        if self._told.get(owner) == why:
            return None
        self._told[owner] = why
        ref = next(o for o in job.get("ownerReferences") or [] if o.get("controller"))
        cronjob = {**ref, "metadata": {"namespace": owner[1], **ref}}
        message = f"Error creating job {job.get('name')}: {why}; retried with backoff until fixed"
        return EmitEvent(ObjectRef.of(cronjob), "FailedCreate", message, type="Warning")

    def created(self, key: tuple[str, str, str]) -> None:
        """A sync of the CronJob was applied: a later refusal is told again."""
        self._told.pop(key, None)

    async def reconcile(self, client: KubeClient, ns: str, name: str) -> ReconcileResult | None:
        """The sync's result, or None when the CronJob is gone."""
        cronjob = await get_or_none(client, CRONJOBS, name, ns)
        if cronjob is None:
            return None
        cronjob.setdefault("kind", "CronJob")
        cronjob.setdefault("apiVersion", c.BATCH_API)
        jobs = await list_items(client, JOBS, namespace=ns)
        return reconcile_cronjob(cronjob, jobs, now=self.clock())
