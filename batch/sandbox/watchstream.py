"""Watch streams: newline-delimited events from a resourceVersion on (caught up from the kept
history in batches, then live), with bookmarks, timeouts, 410 Expired, Tables and planned drops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from batch.sandbox import tables
from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.responses import JSON, wants_table
from batch.sandbox.store import Obj, Watcher, dumps, event_line
from batch.sandbox.wire import Request, Response, Stream

BATCH = 500  # events per write while a watch catches up


class WatchStreams:
    """The open watches of the HTTP face."""

    def __init__(self, core: Core, *, bookmark_seconds: float, drop_watch_every: float) -> None:
        self.core = core
        self.bookmark_seconds = bookmark_seconds
        self.drop_watch_every = drop_watch_every
        self.watchers: set[Watcher] = set()
        self.dropped_watches = 0  # watch streams cut by `drop_watch_every`

    def close(self) -> None:
        for w in list(self.watchers):
            w.close()

    async def serve(
        self, request: Request, rt: ResourceType, ns: str | None, sels: dict[str, Any]
    ) -> Response | None:
        """A watch of ``rt`` in ``ns`` (None: all) with the selectors ``sels``."""
        q = request.query
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        send_initial = q.get("sendInitialEvents") in ("true", "1")
        w = Watcher(
            namespace=ns,
            label=sels["label"],
            field=sels["field"],
            api_version=rt.api_version if rt.crd else None,
            render=self._table_render(request, rt),
        )
        start = await self._watch_start(request, rt, ns, send_initial)
        if start is None:
            return None
        since, snapshot = start
        stream = await request.start_stream(content_type=JSON)
        stream.on_close.append(w.close)
        if not await _write_snapshot(stream, w, snapshot):
            return None
        if send_initial and bookmarks:
            await stream.write(self._bookmark(rt, since, initial_end=True))
        if not await self._catch_up(stream, w, rt, since):
            return None
        bucket = self.core.store.buckets[rt.storage_key]
        bucket.watchers.add(w)
        self.watchers.add(w)
        try:
            await self._serve_live(stream, w, rt, _watch_timeout(q), bookmarks)
        finally:
            bucket.watchers.discard(w)
            self.watchers.discard(w)
        return None

    def _table_render(
        self, request: Request, rt: ResourceType
    ) -> Callable[[str, Obj], bytes] | None:
        """The event renderer of a watch asking for a Table (columns in the first event)."""
        if not wants_table(request):
            return None
        include = request.query.get("includeObject", "Metadata")
        first = [True]

        def render(etype: str, obj: Obj) -> bytes:
            t = tables.table(
                rt,
                [obj],
                rv=obj["metadata"].get("resourceVersion", ""),
                include=include,
                with_columns=first[0],
            )
            first[0] = False
            return event_line(etype, dumps(t))

        return render

    async def _watch_start(
        self, request: Request, rt: ResourceType, ns: str | None, send_initial: bool
    ) -> tuple[int, list[Obj]] | None:
        """Where the watch starts: (resourceVersion, the objects to send as ADDED first).
        None when the resourceVersion asked for is compacted (the 410 is sent)."""
        store = self.core.store
        bucket = store.buckets[rt.storage_key]
        rv_param = request.query.get("resourceVersion", "")
        if not rv_param or rv_param == "0" or send_initial:
            # A consistent start: the objects as of `since`, then every event after it.
            return store.rv, list(bucket.iter(ns))
        try:
            since = int(rv_param)
        except ValueError as exc:
            raise ApiError(400, f"invalid resourceVersion {rv_param!r}") from exc
        if store.events_since(rt.storage_key, since) is None:
            await self._gone(request, rv_param, bucket.compacted_rv)
            return None
        return since, []

    async def _catch_up(self, stream: Stream, w: Watcher, rt: ResourceType, since: int) -> bool:
        """Send the kept events after since in batches (bounded memory, other requests keep
        being served); the caller joins the live fan-out in the same step as the last read,
        so nothing is missed. False when the stream ended or fell behind the history."""
        store = self.core.store
        while True:
            events = store.events_since(rt.storage_key, since, BATCH)
            if events is None:  # fell behind the kept history while catching up
                compacted = store.buckets[rt.storage_key].compacted_rv
                await stream.write(self._gone_line(str(since), compacted))
                return False
            if not events:
                return True
            for ev in events:
                w.offer(ev)
            since = events[-1].rv
            data = b"".join(w.pending)
            w.pending.clear()
            await stream.write(data)
            if stream.closed:
                return False

    async def _serve_live(
        self, stream: Stream, w: Watcher, rt: ResourceType, timeout: float, bookmarks: bool
    ) -> None:
        """Stream live events until the timeout, the client leaving or a planned drop, with a
        bookmark every bookmark_seconds when asked for."""
        started = time.monotonic()
        deadline = started + timeout
        drop_at = started + self.drop_watch_every if self.drop_watch_every else None
        next_bookmark = started + self.bookmark_seconds if bookmarks else None
        while True:
            if w.pending:
                data = b"".join(w.pending)
                w.pending.clear()
                await stream.write(data)
                continue
            if w.closed or stream.closed:
                return
            now = time.monotonic()
            if now >= deadline:
                return
            if drop_at is not None and now >= drop_at:
                self.dropped_watches += 1
                stream.abort()
                return
            if next_bookmark is not None and now >= next_bookmark:
                next_bookmark = now + self.bookmark_seconds
                await stream.write(self._bookmark(rt, self.core.store.rv))
                continue
            wait = min(t for t in (deadline, next_bookmark, drop_at) if t is not None) - now
            w.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.wake.wait(), timeout=max(wait, 0.001))

    @staticmethod
    def _gone_line(rv: str, compacted: int) -> bytes:
        err = ApiError(410, f"too old resource version: {rv} ({compacted})", reason="Expired")
        return event_line("ERROR", dumps(err.status()))

    async def _gone(self, request: Request, rv: str, compacted: int) -> None:
        """A watch from a compacted resourceVersion: 200, then one ERROR event (410)."""
        stream = await request.start_stream(content_type=JSON)
        await stream.write(self._gone_line(rv, compacted))

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return event_line(
            "BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
        )


class _NoEventType:
    """Stand-in event for initial ADDED lines (no cached body to reuse)."""

    obj: Obj = {}

    def body(self) -> bytes:  # pragma: no cover - never called: obj is not ev.obj
        return b"{}"


_NoEvent: Any = _NoEventType()


def _watch_timeout(query: Any) -> float:
    """timeoutSeconds of a watch; 30 minutes when absent or not a number."""
    try:
        return float(query.get("timeoutSeconds", "1800") or 1800)
    except ValueError:
        return 1800.0


async def _write_snapshot(stream: Stream, w: Watcher, snapshot: list[Obj]) -> bool:
    """The initial objects as ADDED events, in batches; False when the client left."""
    for start in range(0, len(snapshot), BATCH):
        lines = [
            w.line_for("ADDED", _NoEvent, o)
            for o in snapshot[start : start + BATCH]
            if w.matches(o)
        ]
        await stream.write(b"".join(lines))
        if stream.closed:
            return False
    return True
