"""List+watch reflectors that keep a consumer (the scheduler cache) in sync with the API server.

Why this exists: the scheduler must never decide on a half-loaded cluster (Volcano schedules
on a partially synced cache: its issues #2821 and #5174). Each reflector lists its kind, hands
every object to the consumer as an ADDED event, reports itself synced, then watches from the
list's resourceVersion. On 410 Gone, or when a stream breaks, it re-lists and turns the
difference into ADDED/MODIFIED/DELETED events, so the consumer never misses a deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from batch.kube.client import ApiError, KubeClient, Resource

__all__ = ["EventSink", "Reflector", "ReflectorSet"]

log = logging.getLogger(__name__)

EventSink = Callable[[str, str, dict[str, Any]], None]
"""Consumer callback: (kind, event type, object)."""


def _uid(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


@dataclass
class Reflector:
    """Keeps one kind in sync: list, then watch; re-list on 410 or a broken stream."""

    client: KubeClient
    resource: Resource
    sink: EventSink
    params: dict[str, str] = field(default_factory=dict)
    watch_timeout: int = 300
    #: longest wait between tries while the API does not serve the kind (404: a CRD not
    #: installed); the waits start at 1 s and double
    absent_retry: float = 30.0
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    relists: int = 0
    #: when (time.time()) listing or watching last started to fail; None while they work
    down_since: float | None = None
    # uid -> (resourceVersion, metadata-only stub). Full objects live in the consumer; the stub
    # is what a DELETED event synthesised by a re-list carries.
    _known: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    _absent_wait: float = 0.0

    def _remember(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        stub_meta = {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}
        stub = {"kind": self.resource.kind, "metadata": stub_meta}
        self._known[_uid(obj)] = (str(meta.get("resourceVersion") or ""), stub)

    async def _list(self) -> str:
        page = await self.client.list(self.resource, **self.params)
        items = page.get("items") or []
        previous = self._known
        self._known = {}
        current: dict[str, dict[str, Any]] = {}
        for obj in items:
            obj.setdefault("kind", self.resource.kind)
            current[_uid(obj)] = obj
        for uid, (_rv, stub) in previous.items():
            if uid not in current:
                self.sink(self.resource.kind, "DELETED", stub)
        for uid, obj in current.items():
            old = previous.get(uid)
            if old is None:
                self.sink(self.resource.kind, "ADDED", obj)
            elif old[0] != str((obj.get("metadata") or {}).get("resourceVersion") or ""):
                self.sink(self.resource.kind, "MODIFIED", obj)
            self._remember(obj)
        return str((page.get("metadata") or {}).get("resourceVersion") or "0")

    async def run(self) -> None:
        """Run until cancelled."""
        backoff = 0.2
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    rv = await self._list()
                    self.relists += 1
                    self.synced.set()
                    self.down_since = None
                    backoff = 0.2
                async for etype, obj in self.client.watch(
                    self.resource,
                    resource_version=rv,
                    timeout_seconds=self.watch_timeout,
                    **self.params,
                ):
                    meta = obj.get("metadata") or {}
                    if etype == "BOOKMARK":
                        rv = str(meta.get("resourceVersion") or rv)
                        continue
                    obj.setdefault("kind", self.resource.kind)
                    rv = str(meta.get("resourceVersion") or rv)
                    if etype == "DELETED":
                        self._known.pop(_uid(obj), None)
                    else:
                        self._remember(obj)
                    self.sink(self.resource.kind, etype, obj)
                    backoff = 0.2
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.status == 410:
                    log.info("%s watch expired (410): re-listing", self.resource.plural)
                    rv = None
                    continue
                if exc.status == 404 and rv is None:
                    await self._absent()
                    continue
                log.warning("%s watch failed: %s", self.resource.plural, exc)
                rv = None
            except (TimeoutError, OSError, ValueError) as exc:
                log.warning("%s watch broken: %s; re-listing", self.resource.plural, exc)
                rv = None
            except Exception as exc:  # aiohttp raises many ClientError subclasses
                log.warning("%s watch error: %r; re-listing", self.resource.plural, exc)
                rv = None
            if rv is None and self.down_since is None:
                self.down_since = time.time()
            await asyncio.sleep(backoff * (1 + random.random()))
            backoff = min(backoff * 2, 5.0)

    async def _absent(self) -> None:
        """The API does not serve the kind (yet): say so once, try again ever less often.
        A kind not served has no objects: that is listed, so the reflector counts as synced
        (Volcano v1.10's CRDs have no HyperNode; the scheduler must not wait for one)."""
        self.synced.set()
        if not self._absent_wait:
            log.info(
                "%s/%s is not served; watching it once it is (checked at most every %.0f s)",
                self.resource.api_version,
                self.resource.plural,
                self.absent_retry,
            )
        self._absent_wait = min(max(self._absent_wait * 2, 1.0), self.absent_retry)
        await asyncio.sleep(self._absent_wait)


@dataclass
class ReflectorSet:
    """A group of reflectors started and stopped together, with one "all synced" barrier."""

    reflectors: list[Reflector]
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(r.run()) for r in self.reflectors]

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(
                asyncio.gather(*(r.synced.wait() for r in self.reflectors)), timeout
            )
        except TimeoutError:
            return False
        return True

    def down_since(self) -> float | None:
        """Since when (time.time()) the first reflector still failing has been failing."""
        failing = [r.down_since for r in self.reflectors if r.down_since is not None]
        return min(failing) if failing else None

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
