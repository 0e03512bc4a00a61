"""Lists and their pages: a continuation serves the objects as they were at the first page's
resourceVersion, reconstructed from the watch history (410 Expired once that is gone), as etcd
does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.selectors import Matcher
from batch.sandbox.store import Obj, Store


class ListResult:
    __slots__ = ("cont", "items", "remaining", "rv")

    def __init__(self, items: list[Obj], rv: int, cont: str, remaining: int | None) -> None:
        self.items = items
        self.rv = rv
        self.cont = cont
        self.remaining = remaining


def list_page(
    store: Store,
    rt: ResourceType,
    ns: str | None,
    *,
    label: Matcher | None = None,
    field: Matcher | None = None,
    limit: int = 0,
    cont: str = "",
) -> ListResult:
    """One page of a list. A continuation (`cont`) serves the objects as they were at the
    first page's resourceVersion, which it also answers with (etcd's snapshot semantics),
    so list + watch from that resourceVersion misses nothing changed between pages."""
    bucket = store.buckets[rt.storage_key]
    rv = store.rv
    start: tuple[str, str] | None = None
    # (namespace, name) -> the object at the snapshot's resourceVersion (None: absent).
    past: dict[tuple[str, str], Obj | None] = {}
    if cont:
        try:
            token = json.loads(base64.urlsafe_b64decode(cont.encode()))
            start = (str(token["ns"]), str(token["name"]))
            rv = int(token["rv"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ApiError(400, "continue key is not valid") from exc
        past = _snapshot_changes(store, rt, bucket.namespaced, rv)
    changed: dict[str, set[str]] = {}
    for space, name in past:
        changed.setdefault(space, set()).add(name)
    namespaces = [ns] if ns is not None else sorted(set(bucket.objects) | set(changed))
    items: list[Obj] = []
    paging = limit > 0
    remaining = 0
    last: tuple[str, str] | None = None
    for space in namespaces:
        if start is not None and space < start[0]:
            continue
        objs = bucket.objects.get(space) or {}
        if past:
            names: Iterable[str] = sorted(set(objs) | changed.get(space, set()))
        elif not objs:
            continue
        else:
            names = sorted(objs) if paging or start is not None else objs
        for name in names:
            if start is not None and (space, name) <= start:
                continue
            obj = past[(space, name)] if (space, name) in past else objs.get(name)
            if obj is None:
                continue
            if label is not None and not label(obj["metadata"].get("labels") or {}):
                continue
            if field is not None and not field(obj):
                continue
            if paging and len(items) >= limit:
                remaining += 1
                continue
            items.append(obj)
            last = (space, name)
    next_token = ""
    if paging and remaining and last is not None:
        next_token = base64.urlsafe_b64encode(
            json.dumps({"ns": last[0], "name": last[1], "rv": rv}).encode()
        ).decode()
    return ListResult(items, rv, next_token, remaining if next_token else None)


def _snapshot_changes(
    store: Store, rt: ResourceType, namespaced: bool, rv: int
) -> dict[tuple[str, str], Obj | None]:
    """The objects changed since rv, as they were at rv (None: did not exist then)."""
    events = store.events_since(rt.storage_key, rv)
    if events is None:
        raise ApiError(
            410,
            "The provided continue parameter is too old to display a consistent list "
            "result. You can start a new list without the continue parameter.",
            reason="Expired",
        )
    past: dict[tuple[str, str], Obj | None] = {}
    for ev in events:
        meta = ev.obj["metadata"]
        key = (meta.get("namespace", "") if namespaced else "", str(meta["name"]))
        if key not in past:
            past[key] = None if ev.type == "ADDED" else (ev.old or ev.obj)
    return past
