"""A small asyncio Kubernetes API client: list, watch, get, create, patch, delete, subresources.

Why this exists: the scheduler must keep a cache of every node and pod in sync and post up to
thousands of bindings a second. The official client is synchronous and spends most of its time
in model (de)serialisation; this one keeps objects as plain dicts (which is what the scheduler's
cache consumes), keeps connections alive, and streams watches line by line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from batch.kube.config import ClusterAccess
from batch.kube.postlane import PostLane
from batch.kube.resource import RESOURCES, ApiError, Resource

__all__ = ["RESOURCES", "ApiError", "KubeClient", "Resource"]

log = logging.getLogger(__name__)


class KubeClient:
    """Async access to one API server. Use as `async with KubeClient(access) as client:`."""

    def __init__(self, access: ClusterAccess, *, max_connections: int = 64) -> None:
        self.access = access
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        #: POSTs of prepared (protobuf) bodies: the scheduler's Bindings and Events, at a
        #: third of aiohttp's CPU a request (batch.kube.postlane)
        self._lane: PostLane | None = None
        self._lane_headers = {"Accept": "application/json", "User-Agent": "tephra"}

    async def __aenter__(self) -> KubeClient:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, ssl=self.access.ssl_context or False
            )
            self._session = aiohttp.ClientSession(
                base_url=self.access.server,
                connector=connector,
                headers={"Accept": "application/json", **self.access.headers},
                read_bufsize=2**22,
            )
            self._lane = PostLane(
                self.access.server,
                ssl_context=self.access.ssl_context,
                server_hostname=self.access.tls_server_name,
                idle_connections=self._max_connections,
            )
            self._lane_headers.update(self.access.headers)

    async def close(self) -> None:
        if self._lane is not None:
            await self._lane.close()
            self._lane = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeClient is not open")
        return self._session

    async def _auth(self) -> dict[str, str] | None:
        """The exec plugin's bearer header, renewed off the event loop when it expired (None:
        no plugin, the session's static headers say it all)."""
        creds = self.access.credentials
        if creds is None:
            return None
        if creds.stale():
            await asyncio.to_thread(creds.current)
        return creds.headers()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        answer: bool = True,
    ) -> dict[str, Any]:
        """The answer's JSON body; `answer=False`: a success's body is not decoded (`{}`), for
        callers that never read it (a pod's Binding and Event: one decode less per write)."""
        args = (method, path, params, body, content_type, timeout, answer)
        try:
            return await self._request(*args)
        except ApiError as exc:
            if exc.status != 401 or self.access.credentials is None:
                raise
            self.access.credentials.invalidate()  # refused: the plugin runs again, once
            return await self._request(*args)

    async def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float,
        answer: bool,
    ) -> dict[str, Any]:
        data = (
            body
            if body is None or isinstance(body, bytes)
            else json.dumps(body, separators=(",", ":"))
        )
        headers = await self._auth()
        if self._lane is not None and isinstance(data, bytes) and method == "POST" and not params:
            lane_headers = {**self._lane_headers, **headers} if headers else self._lane_headers
            status, raw = await self._lane.post(
                path, data, content_type=content_type, headers=lane_headers, timeout=timeout
            )
            return _answer(status, raw, method, path, answer)
        if data is not None:
            headers = {**(headers or {}), "Content-Type": content_type}
        async with self.session.request(
            method,
            path,
            params=params,
            data=data,
            headers=headers,
            server_hostname=self.access.tls_server_name,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            return _answer(resp.status, await resp.read(), method, path, answer)

    # -- typed helpers ----------------------------------------------------------------------
    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self.request("GET", res.path(namespace=namespace, name=name))

    async def list(
        self, res: Resource, *, namespace: str | None = None, **params: str
    ) -> dict[str, Any]:
        """One LIST call, following `continue` tokens; returns the list with all items."""
        items: list[dict[str, Any]] = []
        query = {"limit": "5000", **params}
        while True:
            page = await self.request(
                "GET", res.path(namespace=namespace), params=query, timeout=120.0
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                page["items"] = items
                return page
            query = {**query, "continue": token}

    async def create(
        self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.request("POST", res.path(namespace=namespace), body=obj)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        sub: str | None = None,
        patch_type: str = "merge",
    ) -> dict[str, Any]:
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return await self.request(
            "PATCH",
            res.path(namespace=namespace, name=name, sub=sub),
            body=patch,
            content_type=ctype,
        )

    async def replace(
        self, res: Resource, obj: Mapping[str, Any], *, sub: str | None = None
    ) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        return await self.request(
            "PUT",
            res.path(namespace=meta.get("namespace"), name=meta.get("name"), sub=sub),
            body=obj,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_seconds: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", res.path(namespace=namespace, name=name), body=body)

    async def watch(
        self,
        res: Resource,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
        **params: str,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Stream watch events `(type, object)` from `resource_version` until the server ends it.

        Raises ApiError(410) when the version is too old (the caller must re-list); an ERROR
        event carrying a 410 Status is turned into the same exception.
        """
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **params,
        }
        async with self.session.get(
            res.path(),
            params=query,
            headers=await self._auth(),
            server_hostname=self.access.tls_server_name,
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=10, sock_read=timeout_seconds + 30
            ),
        ) as resp:
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                if resp.status == 401 and self.access.credentials is not None:
                    self.access.credentials.invalidate()  # the caller's retry gets a fresh one
                raise ApiError(resp.status, body, f"WATCH {res.plural}")
            seen = 0
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                event = json.loads(line)
                etype = event.get("type", "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 500)
                    raise ApiError(code, obj, f"WATCH {res.plural}")
                yield etype, obj
                seen += 1
                if seen % 256 == 0:
                    # A busy stream never waits on the socket: let other tasks run.
                    await asyncio.sleep(0)


def _answer(status: int, raw: bytes, method: str, path: str, decode: bool = True) -> dict[str, Any]:
    """An answer's JSON body (`{}` for a success not to `decode`); `ApiError` for >= 400."""
    if status < 400 and not decode:
        return {}
    try:
        payload = json.loads(raw) if raw else {}
    except ValueError:
        payload = {"message": raw[:200].decode(errors="replace")}
    if status >= 400:
        raise ApiError(status, payload, f"{method} {path}")
    return payload if isinstance(payload, dict) else {"items": payload}
