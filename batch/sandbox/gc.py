"""Garbage collection as kube-controller-manager does it: owner references and namespaces.

Background deletion: when an owner is removed, dependents whose owners are all gone are deleted
(dependents that still have a live owner only lose the dangling reference). Foreground deletion:
an owner carrying the `foregroundDeletion` finalizer stays (with its deletionTimestamp) until its
dependents are gone. Orphan deletion: dependents lose the reference, the owner goes. A namespace
being deleted has its content deleted and is removed once empty.

An owner reference whose uid names no stored object (the owner was deleted before the dependent
was created, as a controller acting on a stale cache does) is dangling: a dependent whose owners
are all dangling is deleted, one with a live owner left loses the dangling references. This is
kube-controller-manager's rule for an owner it cannot find; without it, objects created for a
job in the instant it was deleted would live for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError
from batch.sandbox.store import Obj

log = logging.getLogger(__name__)

Ref = tuple[str, str, str]  # storage key, namespace, name


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {str(r.get("uid")) for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid")}


class GarbageCollector:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.by_uid: dict[str, Ref] = {}
        self.dependents: dict[str, set[Ref]] = {}
        self.terminating_ns: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        core.store.listeners.append(self.on_change)
        # index what already exists
        for key, bucket in core.store.buckets.items():
            for obj in bucket.iter(None):
                self.on_change("ADDED", key, obj, None)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for deps in list(self.dependents.values()):
            for ref in list(deps):
                self._soon(self._check_dangling, ref)

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon(self._safe, fn, *args)

    @staticmethod
    def _safe(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except ApiError as err:
            if err.code not in (404, 409):
                log.warning("garbage collector: %s", err.message)
        except Exception:
            log.exception("garbage collector failed")

    def on_change(self, etype: str, key: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        uid = str(meta.get("uid", ""))
        ref: Ref = (key, meta.get("namespace", ""), meta["name"])
        old_owners = _owner_uids(old)
        new_owners = set() if etype == "DELETED" else _owner_uids(obj)
        if old_owners != new_owners or etype == "ADDED":
            for o in old_owners - new_owners:
                deps = self.dependents.get(o)
                if deps is not None:
                    deps.discard(ref)
                    if not deps:
                        del self.dependents[o]
            for o in new_owners:
                self.dependents.setdefault(o, set()).add(ref)
            # one lookup an owner: `set - dict.keys()` would copy every stored uid per change
            if any(o not in self.by_uid for o in new_owners):
                self._soon(self._check_dangling, ref)
        if etype == "DELETED":
            self.by_uid.pop(uid, None)
            if uid in self.dependents:
                self._soon(self._owner_removed, uid)
            for o in old_owners:
                if o in self.by_uid:
                    self._soon(self._check_owner, o)
            ns = meta.get("namespace", "")
            if ns in self.terminating_ns:
                self._soon(self._drain_namespace, ns)
            return
        self.by_uid[uid] = ref
        if meta.get("deletionTimestamp"):
            fins = meta.get("finalizers") or []
            if "foregroundDeletion" in fins or "orphan" in fins:
                self._soon(self._check_owner, uid)
            if key == "namespaces" and meta["name"] not in self.terminating_ns:
                self.terminating_ns.add(meta["name"])
                self._soon(self._drain_namespace, meta["name"])

    def _obj(self, ref: Ref) -> Obj | None:
        return self.core.store.get(*ref)

    def _owner_removed(self, uid: str) -> None:
        for ref in list(self.dependents.get(uid, ())):
            obj = self._obj(ref)
            rt = self.core.rt_for_key(ref[0])
            if obj is None or rt is None:
                continue
            alive = [u for u in _owner_uids(obj) if u != uid and u in self.by_uid]
            if alive:
                self._drop_refs(ref, {uid})
            elif not obj["metadata"].get("deletionTimestamp"):
                self.core.delete(rt, ref[1], ref[2], propagation="Background")

    def _check_dangling(self, ref: Ref) -> None:
        """Collect a dependent whose owners are all gone; drop the dangling references of one
        that still has a live owner."""
        obj = self._obj(ref)
        rt = self.core.rt_for_key(ref[0])
        if obj is None or rt is None:
            return
        owners = _owner_uids(obj)
        dangling = {o for o in owners if o not in self.by_uid}
        if not dangling:
            return
        if dangling != owners:
            self._drop_refs(ref, dangling)
        elif not obj["metadata"].get("deletionTimestamp"):
            self.core.delete(rt, ref[1], ref[2], propagation="Background")

    def _drop_refs(self, ref: Ref, uids: set[str]) -> None:
        obj = self._obj(ref)
        rt = self.core.rt_for_key(ref[0])
        if obj is None or rt is None:
            return
        meta = dict(obj["metadata"])
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in uids]
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        self.core.write(rt, obj, {**obj, "metadata": meta}, manager="kube-controller-manager")

    def _check_owner(self, uid: str) -> None:
        ref = self.by_uid.get(uid)
        if ref is None:
            return
        owner = self._obj(ref)
        rt = self.core.rt_for_key(ref[0])
        if owner is None or rt is None or not owner["metadata"].get("deletionTimestamp"):
            return
        fins = list(owner["metadata"].get("finalizers") or [])
        deps = list(self.dependents.get(uid, ()))
        if "orphan" in fins:
            for dep in deps:
                self._drop_refs(dep, {uid})
            fins.remove("orphan")
        elif "foregroundDeletion" in fins:
            if deps:
                for dep in deps:
                    obj = self._obj(dep)
                    drt = self.core.rt_for_key(dep[0])
                    if (
                        obj is not None
                        and drt is not None
                        and not obj["metadata"].get("deletionTimestamp")
                    ):
                        self.core.delete(drt, dep[1], dep[2], propagation="Foreground")
                return
            fins.remove("foregroundDeletion")
        else:
            return
        owner = self._obj(ref)
        if owner is None:
            return
        meta = {**owner["metadata"], "finalizers": fins}
        if not fins:
            meta.pop("finalizers")
        self.core.write(rt, owner, {**owner, "metadata": meta}, manager="kube-controller-manager")

    def _drain_namespace(self, ns: str) -> None:
        core = self.core
        left = 0
        for key, bucket in list(core.store.buckets.items()):
            if not bucket.namespaced:
                continue
            rt = core.rt_for_key(key)
            if rt is None:
                continue
            for obj in list(bucket.iter(ns)):
                left += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        # the namespace controller deletes content in the background
                        core.delete(rt, ns, obj["metadata"]["name"], propagation="Background")
                    except ApiError as err:
                        if err.code != 404:
                            raise
        if left == 0 or not any(
            (b.objects.get(ns)) for b in core.store.buckets.values() if b.namespaced
        ):
            self.terminating_ns.discard(ns)
            core.finish_namespace(ns)
