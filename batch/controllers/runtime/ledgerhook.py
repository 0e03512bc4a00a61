"""The ledger hook: object changes handed to the recorder, and the start's reconcile.

Recording never raises and never stops the controllers. At start, jobs and pods the ledger
holds open but the API no longer has get a final transition; when the ledger cannot be read
then, the reconcile is tried again (with backoff) once the recorder has caught up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from batch.controllers.runtime.keys import Keys
from batch.controllers.runtime.settings import Settings
from batch.controllers.shell import JOBS, PODS, get_or_none, list_items
from batch.kube.client import KubeClient, Resource
from batch.kube.informer import Reflector, ReflectorSet

log = logging.getLogger(__name__)

#: first and longest wait before the start's ledger reconcile is tried again (seconds)
LEDGER_RETRY_SECONDS = (1.0, 30.0)


class LedgerHook:
    """Hands the controllers' view of objects to the ledger ``recorder`` (None: no ledger)."""

    def __init__(
        self, settings: Settings, keys: Keys, client: Callable[[], KubeClient], recorder: Any
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.client = client
        self.recorder = recorder
        self._last_seen: dict[str, dict[str, Any]] = {}
        self._job_owners: Any = None  # batch.ledger.owners.JobOwners, made on first record

    def record(self, kind: str, etype: str, body: Mapping[str, Any]) -> None:
        """Hand the object change to the ledger recorder (idempotent facts; never raises)."""
        if self.recorder is None:
            return
        try:
            from batch.ledger import events_from_queue
            from batch.ledger.owners import JobOwners

            uid = str((body.get("metadata") or {}).get("uid") or "")
            old = self._last_seen.get(uid)
            new: dict[str, Any] | None = None if etype == "DELETED" else dict(body)
            if new is None:
                self._last_seen.pop(uid, None)
            else:
                self._last_seen[uid] = new
            adapters = self.settings.adapters  # the manager's, not the entry points' (tests inject)
            if self._job_owners is None:
                self._job_owners = JobOwners(adapters, self.observed_kinds)
            if kind == "job":
                events = self._job_owners.job_events(old, new)
            elif kind == "pod":
                events = self._job_owners.pod_events(old, new)
            elif kind == "podgroup":
                events = self._job_owners.podgroup_events(old, new)
            else:
                events = events_from_queue(old, new)
            if events:
                self.recorder.record(events)
        except Exception:
            log.exception("ledger: recording a %s change failed", kind)

    @property
    def observed_kinds(self) -> frozenset[tuple[str, str]]:
        """(apiVersion, kind) of the framework workloads the ledger follows themselves (their
        adapter observes them): their PodGroups' phases do not stand in for theirs."""
        return frozenset((r.api_version, r.kind) for r in self._workload_resources())

    def _workload_resources(self) -> list[Resource]:
        from batch.api.integration import ObservingAdapter, WorkloadKind

        out: dict[tuple[str, str], Resource] = {}
        for adapter in self.settings.adapters:
            if not isinstance(adapter, ObservingAdapter):
                continue
            kinds: Sequence[WorkloadKind] = getattr(adapter, "kinds", ())
            for k in kinds:
                if "/" in k.api_version and k.label_selector is None:
                    out[(k.api_version, k.kind)] = Resource(k.api_version, k.plural, k.kind)
        return list(out.values())

    def workload_reflectors(self) -> ReflectorSet | None:
        """With a ledger, watch every framework workload kind an adapter observes, so the
        ledger records their own phases, finish and deletion (a kind not installed is
        watched once it is)."""
        if self.recorder is None:
            return None

        def sink(_: str, etype: str, obj: dict[str, Any]) -> None:
            self.record("job", etype, obj)

        return ReflectorSet([Reflector(self.client(), r, sink) for r in self._workload_resources()])

    async def reconcile_at_start(self, jobs: list[dict[str, Any]]) -> None:
        """Reconcile the ledger with the jobs listed at start (later when it cannot be read)."""
        if self.recorder is None:
            return
        try:
            if not await self.reconcile(jobs):
                log.info("ledger: reconciling with the API once the ledger can be read")
                self.reconcile_later(LEDGER_RETRY_SECONDS[0])
        except Exception:  # the ledger never stops the controller
            log.exception("ledger: reconciling with the API failed")

    def reconcile_later(self, seconds: float) -> None:
        self.keys.call_later(
            self.reconcile_again, seconds, args=[seconds], job_id="ledger-reconcile"
        )

    async def reconcile_again(self, waited: float) -> None:
        """The start's reconcile, which the ledger could not take (down, or its schema not
        checked yet): once the recorder has written everything that waited (so a job that
        finished meanwhile is not taken for lost), list again and reconcile; else later."""
        flush = getattr(self.recorder, "flush", None)
        try:
            caught_up = flush is not None and await asyncio.to_thread(flush, 10.0)
            if caught_up and await self.reconcile(await list_items(self.client(), JOBS)):
                return
        except Exception:  # the ledger never stops the controller
            log.exception("ledger: reconciling with the API failed")
        low, high = LEDGER_RETRY_SECONDS
        self.reconcile_later(min(max(waited, low) * 2, high))

    async def reconcile(self, jobs: list[dict[str, Any]]) -> bool:
        """Jobs and pods the ledger holds open but the API no longer has get a final `Deleted`
        transition with reason `Lost` (they went while no controller recorded them); each is
        looked up once more first, so one created since the list is never taken for lost.
        False when the ledger cannot be read now."""
        client = self.client()
        lister = getattr(self.recorder, "lost_candidates", None)
        if lister is None:
            return True
        pods = await list_items(client, PODS)
        candidates = await asyncio.to_thread(
            lister,
            live_jobs={str(j["metadata"].get("uid")) for j in jobs},
            live_pods={str(p["metadata"].get("uid")) for p in pods},
        )
        if candidates is None:
            return False
        gone = []
        for event in candidates:
            is_job = getattr(event, "TYPE", "") == "JobPhaseChanged"
            uid = event.job_uid if is_job else event.pod_uid
            found = await get_or_none(client, JOBS if is_job else PODS, event.name, event.namespace)
            if found is None or str(found["metadata"].get("uid")) != uid:
                gone.append(event)
        if gone:
            log.info("ledger: %d jobs and pods are gone since they were recorded", len(gone))
            self.recorder.record(gone)
        return True
