"""The in-memory object store: buckets of plain dicts, one global resourceVersion, watch fan-out.

Objects are stored as the JSON dicts clients sent (after defaulting) and are never modified after
they are stored: every write stores a new dict, so list and watch answers can serialize stored
objects without copying them. Each bucket (one per group/resource) keeps a bounded event history
so a watch can resume from a resourceVersion; a resourceVersion older than the history is answered
with 410 Gone, as etcd compaction does. Everything runs on the server's event loop thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

from batch.sandbox.selectors import Matcher

Obj = dict[str, Any]
Listener = Callable[[str, str, Obj, Obj | None], None]
MAX_PENDING = 200_000  # undelivered events after which a watch is ended

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


def dumps(obj: Any) -> bytes:
    return _dumps(obj).encode()


class WatchEvent:
    """One committed change: type ADDED/MODIFIED/DELETED, the object after it, the one before."""

    __slots__ = ("_body", "obj", "old", "rv", "type")

    def __init__(self, etype: str, obj: Obj, old: Obj | None, rv: int) -> None:
        self.type = etype
        self.obj = obj
        self.old = old
        self.rv = rv
        self._body: bytes | None = None

    def body(self) -> bytes:
        if self._body is None:
            self._body = dumps(self.obj)
        return self._body


def event_line(etype: str, body: bytes) -> bytes:
    return b'{"type":"' + etype.encode() + b'","object":' + body + b"}\n"


class Watcher:
    """A watch stream's filter and its queue of pending lines."""

    __slots__ = (
        "api_version",
        "closed",
        "field",
        "label",
        "namespace",
        "pending",
        "render",
        "wake",
    )

    def __init__(
        self,
        *,
        namespace: str | None,
        label: Matcher | None,
        field: Matcher | None,
        api_version: str | None,
        render: Callable[[str, Obj], bytes] | None = None,
    ) -> None:
        self.namespace = namespace
        self.label = label
        self.field = field
        self.api_version = api_version
        self.render = render
        self.pending: list[bytes] = []
        self.wake = asyncio.Event()
        self.closed = False

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.label is not None and not self.label(meta.get("labels") or {}):
            return False
        return not (self.field is not None and not self.field(obj))

    def line_for(self, etype: str, ev: WatchEvent, obj: Obj) -> bytes:
        if self.render is not None:
            return self.render(etype, obj)
        if obj is ev.obj and (
            self.api_version is None or obj.get("apiVersion") == self.api_version
        ):
            return event_line(etype, ev.body())
        if self.api_version is not None and obj.get("apiVersion") != self.api_version:
            obj = {**obj, "apiVersion": self.api_version}
        return event_line(etype, dumps(obj))

    def offer(self, ev: WatchEvent) -> None:
        if self.closed:
            return
        etype = ev.type
        if etype == "MODIFIED" and ev.old is not None:
            new_ok = self.matches(ev.obj)
            old_ok = self.matches(ev.old)
            if new_ok and not old_ok:
                etype = "ADDED"
            elif old_ok and not new_ok:
                etype = "DELETED"
            elif not new_ok:
                return
        elif not self.matches(ev.obj):
            return
        self.pending.append(self.line_for(etype, ev, ev.obj))
        if len(self.pending) > MAX_PENDING:
            # A client that stopped reading: end its watch (it resumes from the last event it
            # got, as after any watch timeout) instead of buffering without bound.
            self.pending.clear()
            self.close()
        self.wake.set()

    def push(self, line: bytes) -> None:
        self.pending.append(line)
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class Bucket:
    """All objects of one group/resource."""

    __slots__ = ("compacted_rv", "history", "key", "log", "namespaced", "objects", "watchers")

    def __init__(self, key: str, namespaced: bool, history: int) -> None:
        self.key = key
        self.namespaced = namespaced
        self.objects: dict[str, dict[str, Obj]] = {}
        # Event history: a list trimmed to `history` entries when it reaches twice that
        # (amortized O(1) appends, O(log n) lookups by resourceVersion).
        self.log: list[WatchEvent] = []
        self.history = history
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()

    def count(self) -> int:
        return sum(len(v) for v in self.objects.values())

    def iter(self, namespace: str | None) -> Iterator[Obj]:
        if namespace is not None:
            yield from (self.objects.get(namespace) or {}).values()
        else:
            for objs in self.objects.values():
                yield from objs.values()


class Store:
    """Buckets, the resourceVersion counter and change listeners."""

    def __init__(self, *, history: int = 100_000) -> None:
        self.rv = 0
        self.history = history
        self.buckets: dict[str, Bucket] = {}
        self.listeners: list[Listener] = []

    def bucket(self, key: str, namespaced: bool = True) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = Bucket(key, namespaced, self.history)
        return b

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        b = self.buckets.get(key)
        if b is None:
            return None
        objs = b.objects.get(namespace)
        return objs.get(name) if objs else None

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def commit(self, key: str, obj: Obj, old: Obj | None, *, deleted: bool = False) -> Obj:
        """Store obj (a new dict whose metadata this call may set) and notify watchers."""
        b = self.buckets[key]
        rv = self.next_rv()
        meta = obj["metadata"] = dict(obj["metadata"])
        meta["resourceVersion"] = str(rv)
        ns = meta.get("namespace", "") if b.namespaced else ""
        name = meta["name"]
        if deleted:
            objs = b.objects.get(ns)
            if objs is not None:
                objs.pop(name, None)
                if not objs:
                    del b.objects[ns]
            etype = "DELETED"
        else:
            b.objects.setdefault(ns, {})[name] = obj
            etype = "MODIFIED" if old is not None else "ADDED"
        ev = WatchEvent(etype, obj, old, rv)
        log = b.log
        log.append(ev)
        if len(log) >= 2 * b.history:
            drop = len(log) - b.history
            b.compacted_rv = log[drop - 1].rv
            del log[:drop]
        for w in b.watchers:
            w.offer(ev)
        ev._body = None  # serialized once for all current watchers; not kept in the history
        for listener in self.listeners:
            listener(etype, key, obj, old)
        return obj

    def events_since(self, key: str, rv: int, limit: int | None = None) -> list[WatchEvent] | None:
        """Events after rv (at most limit), or None when rv is older than the kept history."""
        b = self.buckets[key]
        if rv < b.compacted_rv:
            return None
        log = b.log
        if not log or log[-1].rv <= rv:
            return []
        lo, hi = 0, len(log)
        while lo < hi:
            mid = (lo + hi) // 2
            if log[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return log[lo:] if limit is None else log[lo : lo + limit]
