"""Status writer: PodGroup and Queue status, and events — written only when they change.

Why this exists: Volcano rewrites every queue's and PodGroup's status at every session close
(its issue #3852), which at one session per second loads the API server with writes that change
nothing. Tephra remembers what the API server last told it (from the watch) and sends a merge
patch of the changed fields only (a key that left a map, say a resource no longer allocated,
is sent as null so that the server drops it); conditions are compared without their timestamps so an
unchanged "Unschedulable" condition is not rewritten every second. Repeated events are
suppressed for a while instead of being posted every session. The scheduler's fair-share
figures of a queue (`batch.api.fairshare`) go the same way, onto the Queue's metadata: written
when the figures changed, not when only the session that computed them is newer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from batch.api.events import event_body, identity, object_reference
from batch.api.fairshare import FAIR_SHARE_ANNOTATION, same_figures
from batch.api.mergepatch import apply_merge_patch, merge_patch
from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.protobuf import ProtobufCreates
from batch.kube.statuspath import status_paths

__all__ = ["EventSpec", "StatusWriter", "status_patch"]

log = logging.getLogger(__name__)
#: Volcano's message of the event on a PodGroup whose gang is ready (scheduling.PodGroupReady)
POD_GROUP_READY = "pod group is ready"
_VOLATILE_CONDITION_KEYS = ("lastTransitionTime", "transitionID", "lastProbeTime")


def _norm_conditions(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    out = []
    for cond in value:
        if isinstance(cond, Mapping):
            out.append({k: v for k, v in cond.items() if k not in _VOLATILE_CONDITION_KEYS})
        else:
            out.append(cond)
    return sorted(out, key=lambda c: str(c.get("type", "")) if isinstance(c, dict) else "")


def _same(key: str, current: Any, desired: Any) -> bool:
    if key == "conditions":
        return bool(_norm_conditions(current) == _norm_conditions(desired))
    if isinstance(current, Mapping) and isinstance(desired, Mapping):
        return dict(current) == dict(desired)
    return bool(current == desired)


def status_patch(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `desired` that differ from `current` (empty when nothing changed).

    Fields `desired` does not name are left alone (another writer owns them); inside a map
    field, a key that left it is patched to null, or the server would keep its old value.
    """
    current = current or {}
    return {
        k: _field_patch(current.get(k), v)
        for k, v in desired.items()
        if not _same(k, current.get(k), v)
    }


def _field_patch(have: Any, want: Any) -> Any:
    if isinstance(have, Mapping) and isinstance(want, Mapping):
        return merge_patch(dict(have), dict(want))
    return want


@dataclass(frozen=True, slots=True)
class EventSpec:
    """An event to post about an object."""

    kind: str
    namespace: str
    name: str
    reason: str
    message: str
    type: str = "Normal"
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""


_API_VERSIONS = {
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "Pod": "v1",
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusWriter:
    """Knows the last observed status of PodGroups and Queues; writes only differences."""

    def __init__(
        self,
        client: KubeClient,
        *,
        concurrency: int = 32,
        component: str = "tephra-scheduler",
        event_interval: float = 60.0,
        on_failed: Callable[[str], None] | None = None,
        protobuf: ProtobufCreates | None = None,
    ) -> None:
        self.client = client
        #: whether events go as protobuf (shared with the binder: a 415 turns both to JSON)
        self.protobuf = protobuf or ProtobufCreates(False)
        self.concurrency = concurrency
        self.component = component
        self.event_interval = event_interval
        self.podgroups: dict[tuple[str, str], dict[str, Any]] = {}
        #: PodGroup -> (uid, resourceVersion) as last observed, to name it in events
        self.podgroup_ids: dict[tuple[str, str], tuple[str, str]] = {}
        self.queues: dict[str, dict[str, Any]] = {}
        #: queue -> the value of its fair-share annotation (None: it has none)
        self.fair_shares: dict[str, str | None] = {}
        self._recent_events: OrderedDict[tuple[str, str, str, str, str], float] = OrderedDict()
        self.writes = 0
        #: status writes that failed (not counting objects deleted meanwhile); the caller
        #: should offer the same statuses again even when its decisions did not change
        self.failed_writes = 0
        #: told the kind of each failed status write (the scheduler counts them in a metric)
        self.on_failed = on_failed
        #: when set, the writes allowed on the wire at once now (at most `concurrency`)
        self.limit: Callable[[], int] | None = None
        #: when set, takes the events a write gives rise to (a PodGroup's "pod group is
        #: ready") instead of the write posting them itself before its slot is free
        self.on_event: Callable[[EventSpec], None] | None = None

    # -- fed by the watch -----------------------------------------------------------------
    def observe(self, kind: str, etype: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind == "PodGroup":
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if etype == "DELETED":
                self.podgroups.pop(key, None)
                self.podgroup_ids.pop(key, None)
            else:
                self.podgroups[key] = dict(obj.get("status") or {})
                self.podgroup_ids[key] = identity(obj)
        elif kind == "Queue":
            name = str(meta.get("name", ""))
            if etype == "DELETED":
                self.queues.pop(name, None)
                self.fair_shares.pop(name, None)
            else:
                self.queues[name] = dict(obj.get("status") or {})
                self.fair_shares[name] = (meta.get("annotations") or {}).get(FAIR_SHARE_ANNOTATION)

    # -- writes ---------------------------------------------------------------------------
    async def _patch_status(
        self, kind: str, name: str, namespace: str | None, patch: dict[str, Any]
    ) -> bool:
        """One write, through `/status` or through the object as the kind takes it
        (`batch.kube.statuspath`); False when it failed or the object is gone."""
        try:
            written = await status_paths(self.client).patch(
                RESOURCES[kind], name, patch, namespace=namespace
            )
        except Exception as exc:
            self._failed(kind, name, exc)
            return False
        if written is None:
            return False  # deleted meanwhile: its DELETED event forgets it
        self.writes += 1
        return True

    async def _send(
        self, kind: str, name: str, namespace: str | None, body: dict[str, Any]
    ) -> bool:
        """Merge-patch the object itself (metadata: the fair-share annotation); False when it
        did not take."""
        try:
            await self.client.patch(RESOURCES[kind], name, body, namespace=namespace)
        except ApiError as exc:
            if exc.status != 404:
                self._failed(kind, name, exc)
            return False
        except Exception as exc:
            self._failed(kind, name, exc)
            return False
        self.writes += 1
        return True

    def _failed(self, kind: str, name: str, exc: Exception) -> None:
        self.failed_writes += 1
        if self.on_failed is not None:
            self.on_failed(kind)
        what = exc if isinstance(exc, ApiError) else repr(exc)
        log.warning("status write of %s %s failed: %s", kind, name, what)

    async def _write(
        self,
        known: dict[Any, dict[str, Any]],
        key: Any,
        kind: str,
        name: str,
        namespace: str | None,
        patch: dict[str, Any],
    ) -> bool:
        """Patch, and only once the server took it count the status as written: a failed write
        must stay a difference, or it would never be made again."""
        ok = await self._patch_status(kind, name, namespace, patch)
        if ok and key in known:
            known[key] = apply_merge_patch(known[key], patch)
        return ok

    async def _run(self, jobs: list[Any], limit: Callable[[], int] | None = None) -> int:
        """Await the writes `jobs` (coroutines answering True when made), at most
        `in_flight()` (or `limit()`) at once, asked again before each write: a long round slows
        down while binds wait for the wire and speeds up once they do not; the number of
        writes made."""
        todo = deque(jobs)
        made = 0
        in_flight = self.in_flight if limit is None else limit

        async def worker(i: int) -> None:
            nonlocal made
            while todo:
                if i >= in_flight():
                    await asyncio.sleep(0.1)
                    continue
                if await todo.popleft():
                    made += 1

        try:
            await asyncio.gather(*(worker(i) for i in range(min(self.concurrency, len(todo)))))
        finally:
            for job in todo:
                job.close()  # a round cancelled at stop leaves no unawaited write
        return made

    def in_flight(self) -> int:
        """Writes allowed on the wire at once now (`concurrency`, or fewer as `limit` says)."""
        limit = self.limit
        return self.concurrency if limit is None else max(1, min(self.concurrency, limit()))

    async def write_podgroups(
        self,
        desired: Mapping[tuple[str, str], Mapping[str, Any]],
        latest: Callable[[tuple[str, str]], Mapping[str, Any] | None] | None = None,
    ) -> int:
        """Patch PodGroup statuses that changed; returns the number of writes made.

        `latest(key)`, asked as each PodGroup's turn comes, may answer a newer status to write
        instead (one offered since the writes began): a round that waits for the wire writes
        each PodGroup once, with what is newest then, not an old status and the new one next."""
        jobs = [
            self._write_latest(ns, name, status, latest)
            for (ns, name), status in desired.items()
            if (ns, name) in self.podgroups  # else deleted meanwhile, or not yet seen
        ]
        return await self._run(jobs)

    async def _write_latest(
        self,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
        latest: Callable[[tuple[str, str]], Mapping[str, Any] | None] | None,
    ) -> bool:
        key = (namespace, name)
        status = (latest(key) if latest is not None else None) or status
        known = self.podgroups.get(key)
        if known is None:
            return False  # deleted meanwhile
        patch = status_patch(known, status)
        return bool(patch) and await self._write_podgroup(namespace, name, patch)

    async def _write_podgroup(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """Patch one PodGroup's status; when its gang became ready (phase Running), post
        Volcano's Normal event `Scheduled` "pod group is ready" (its RecordJobStatusEvent)."""
        key = (namespace, name)
        was = self.podgroups[key].get("phase")
        ok = await self._write(self.podgroups, key, "PodGroup", name, namespace, patch)
        if ok and patch.get("phase") == "Running" and was != "Running":
            uid, version = self.podgroup_ids.get(key, ("", ""))
            ready = EventSpec(
                kind="PodGroup",
                namespace=namespace,
                name=name,
                reason="Scheduled",
                message=POD_GROUP_READY,
                uid=uid,
                resource_version=version,
            )
            if self.on_event is not None:
                self.on_event(ready)
            else:
                await self.emit_events([ready])
        return ok

    async def write_queues(self, desired: Mapping[str, Mapping[str, Any]]) -> int:
        """Patch Queue statuses that changed; returns the number of writes made."""
        jobs = []
        for name, status in desired.items():
            if name not in self.queues:
                continue
            patch = status_patch(self.queues[name], status)
            if patch:
                jobs.append(self._write(self.queues, name, "Queue", name, None, patch))
        return await self._run(jobs)

    async def write_fair_shares(self, desired: Mapping[str, str | None]) -> int:
        """Set (or, for None, remove) the fair-share annotation of queues whose figures
        changed; returns the number of writes made."""
        jobs = [
            self._annotate(name, value)
            for name, value in desired.items()
            if name in self.fair_shares and not same_figures(self.fair_shares[name], value)
        ]
        return await self._run(jobs)

    async def _annotate(self, name: str, value: str | None) -> bool:
        """A merge patch of the Queue's metadata (the object itself, not its status: it works
        with or without a status subresource)."""
        patch = {"metadata": {"annotations": {FAIR_SHARE_ANNOTATION: value}}}
        ok = await self._send("Queue", name, None, patch)
        if ok and name in self.fair_shares:
            self.fair_shares[name] = value
        return ok

    async def patch_pod_statuses(self, patches: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        """Merge-patch `status` of pods: (namespace, name, status fields)."""
        return await self._run(
            [self._patch_status("Pod", name, ns, patch) for ns, name, patch in patches]
        )

    async def patch_pod_conditions(self, patches: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        """Strategic-merge-patch pods' `status.conditions` (namespace, name, status fields): the
        conditions merge by type, so the others a pod has are kept."""
        return await self._run([self._pod_conditions(ns, name, p) for ns, name, p in patches])

    async def _pod_conditions(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        try:
            await self.client.patch(
                RESOURCES["Pod"],
                name,
                {"status": patch},
                namespace=namespace,
                sub="status",
                patch_type="strategic",
            )
        except ApiError as exc:
            if exc.status != 404:  # a pod deleted meanwhile has nothing to say
                self._failed("Pod", name, exc)
            return False
        except Exception as exc:
            self._failed("Pod", name, exc)
            return False
        self.writes += 1
        return True

    async def emit_events(
        self, events: Sequence[EventSpec], limit: Callable[[], int] | None = None
    ) -> int:
        """Post events, suppressing an identical one posted within `event_interval`, at most
        `limit()` at once (default: `in_flight()`)."""
        now = time.monotonic()
        jobs = [self._post_event(ev) for ev in events if self._fresh(ev, now)]
        return await self._run(jobs, limit)

    async def post_event(self, ev: EventSpec) -> bool:
        """Post one event unless an identical one was posted within `event_interval`."""
        return self._fresh(ev, time.monotonic()) and await self._post_event(ev)

    def _fresh(self, ev: EventSpec, now: float) -> bool:
        """Whether `ev` is not a repeat of one posted within `event_interval`; it counts as
        posted from now on."""
        recent = self._recent_events
        # Oldest first (a key is inserted only when absent): drop the expired ones from the
        # front, not by rebuilding the map (once per PodGroup ready event, that was quadratic;
        # an OrderedDict, as a dict's first key is found by skipping the deleted ones).
        while recent:
            posted = next(iter(recent.values()))
            if now - posted < self.event_interval:
                break
            recent.popitem(last=False)
        key = (ev.kind, ev.namespace, ev.name, ev.reason, ev.message)
        if key in recent:
            return False
        recent[key] = now
        return True

    def event_body(self, ev: EventSpec) -> dict[str, Any]:
        """The Event `ev` is posted as, stamped now."""
        involved = object_reference(
            api_version=ev.api_version or _API_VERSIONS.get(ev.kind, "v1"),
            kind=ev.kind,
            namespace=ev.namespace,
            name=ev.name,
            uid=ev.uid,
            resource_version=ev.resource_version,
        )
        return event_body(
            involved,
            reason=ev.reason,
            message=ev.message,
            type=ev.type,
            component=self.component,
            stamp=_now(),
        )

    async def _post_event(self, ev: EventSpec) -> bool:
        body = self.event_body(ev)
        namespace = ev.namespace or "default"
        path = RESOURCES["Event"].path(namespace=namespace)
        try:
            await self.protobuf.create(self.client, path, body)
        except Exception as exc:
            log.debug("event post failed: %r", exc)
            return False
        return True
