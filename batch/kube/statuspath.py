"""Writing an object's `.status` whether or not its kind has a status subresource.

Why this exists: Volcano's PodGroup CRD declares no status subresource (`subresources: {}` in
v1.10 and since; its scheduler and controllers write PodGroup status with a plain update of the
object). On a cluster with Volcano's CRDs a PATCH of `podgroups/NAME/status` answers 404, with
the same Status body as for an object deleted meanwhile. Taking every such 404 for "gone"
dropped each status write without a word and left every PodGroup Pending. The other way round,
on a kind that has the subresource, a write through the object keeps everything but `.status`
and still answers 200.

So the way of each kind is learnt from the API server and remembered per client:
- before a kind's first write, discovery (`/apis/GROUP/VERSION` lists `PLURAL/status` only when
  the subresource exists; core kinds always have it);
- a 404 of `NAME/status` means "gone" only when a GET of the object answers 404 too; when the
  object is there, the kind has no status subresource (its CRD was replaced) and is written
  through the object from then on;
- a write through the object whose answer does not read back the status sent means the kind
  has gained the subresource: discovery is asked again and, when it says so, the write is made
  through `/status`.
Each change of way is logged once. A write that fails is raised to the caller, who counts it.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.kube.client import ApiError, KubeClient, Resource

__all__ = ["StatusPaths", "status_paths"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (apiVersion, plural)


def _key(res: Resource) -> Key:
    return (res.api_version, res.plural)


def _label(res: Resource) -> str:
    group = res.api_version.rpartition("/")[0]
    return f"{res.plural}.{group}" if group else res.plural


def reads_back(status: Any, sent: Mapping[str, Any]) -> bool:
    """True when the object's `status`, as the server answered, holds every field of the merge
    patch `sent`."""
    have = dict(status) if isinstance(status, Mapping) else {}
    return bool(apply_merge_patch(have, dict(sent)) == have)


class _Missing:
    """The kind has no status subresource (a write through `/status` found the object there)."""


_MISSING = _Missing()


class StatusPaths:
    """Which kinds of one API server take status writes through the object itself."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        #: kind -> True when its status is written through the object (no status subresource)
        self.through_object: dict[Key, bool] = {}
        self._learning = asyncio.Lock()  # a round of first writes asks discovery once

    async def patch(
        self,
        res: Resource,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any] | None:
        """Merge-patch `status` into the object's `.status`: the object written, or None when it
        is gone. Any other failure raises (ApiError, or the transport's error)."""
        through_object = self.through_object.get(_key(res))
        if through_object is None:
            through_object = await self._learn(res)
        if not through_object:
            done = await self._via_status(res, name, status, namespace)
            if not isinstance(done, _Missing):
                return done
        return await self._via_object(res, name, status, namespace)

    # -- the two ways ---------------------------------------------------------------------------
    async def _via_status(
        self, res: Resource, name: str, status: Mapping[str, Any], namespace: str | None
    ) -> dict[str, Any] | _Missing | None:
        """The write through `/status`: the object, None when gone, _MISSING when the kind has
        no status subresource (the object is there but its `/status` is not)."""
        try:
            return await self.client.patch(
                res, name, {"status": dict(status)}, namespace=namespace, sub="status"
            )
        except ApiError as exc:
            if exc.status != 404:
                raise
        if await self._gone(res, name, namespace):
            return None
        self._remember(res, True, "its status subresource answered 404 while the object exists")
        return _MISSING

    async def _via_object(
        self, res: Resource, name: str, status: Mapping[str, Any], namespace: str | None
    ) -> dict[str, Any] | None:
        try:
            obj = await self.client.patch(res, name, {"status": dict(status)}, namespace=namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        if reads_back(obj.get("status"), status):
            return obj
        if await self._discover(res) is not True:
            # the server has no subresource and took the write: a field it does not keep
            # (pruned by its schema, or a webhook's doing) is not ours to insist on
            log.debug("%s %s: status written but read back otherwise", res.kind, name)
            return obj
        self._remember(res, False, "a write through the object left its status unchanged")
        try:
            return await self.client.patch(
                res, name, {"status": dict(status)}, namespace=namespace, sub="status"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def _gone(self, res: Resource, name: str, namespace: str | None) -> bool:
        try:
            await self.client.get(res, name, namespace if res.namespaced else None)
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        return False

    # -- learning -------------------------------------------------------------------------------
    async def _learn(self, res: Resource) -> bool:
        """The way of a kind not written yet: through the object only when discovery says it has
        no status subresource (when discovery cannot say, `/status` is tried, and a 404 there
        still tells)."""
        async with self._learning:
            known = self.through_object.get(_key(res))
            if known is not None:
                return known  # learnt by a write that held the lock first
            has = await self._discover(res)
            self._remember(res, has is False, "discovery lists no status subresource", quiet=True)
            return has is False

    async def _discover(self, res: Resource) -> bool | None:
        """Whether the API server lists the kind's status subresource; None when it cannot say."""
        if "/" not in res.api_version:
            return True  # core kinds
        try:
            found = await self.client.request("GET", f"/apis/{res.api_version}")
        except Exception as exc:  # discovery is a hint: a write must not fail because of it
            log.debug("discovery of %s failed: %r", res.api_version, exc)
            return None
        names = {str(r.get("name", "")) for r in found.get("resources") or []}
        if res.plural not in names:
            return None  # the kind is not served (yet): nothing learnt
        return f"{res.plural}/status" in names

    def _remember(
        self, res: Resource, through_object: bool, why: str, *, quiet: bool = False
    ) -> None:
        key = _key(res)
        before = self.through_object.get(key)
        self.through_object[key] = through_object
        if before == through_object or (before is None and not through_object):
            return
        if through_object:
            how = "through the object itself, as Volcano does for PodGroups"
        else:
            how = "through its status subresource"
        level = logging.INFO if quiet else logging.WARNING
        log.log(level, "%s status is written %s: %s (%s)", res.kind, how, _label(res), why)


_PATHS: weakref.WeakKeyDictionary[Any, StatusPaths] = weakref.WeakKeyDictionary()


def status_paths(client: KubeClient) -> StatusPaths:
    """The StatusPaths of `client`: one per client, so that every writer holding the client
    (the scheduler's StatusWriter, the controllers' shell) learns a kind once, together."""
    paths = _PATHS.get(client)
    if paths is None:
        paths = _PATHS[client] = StatusPaths(client)
    return paths
