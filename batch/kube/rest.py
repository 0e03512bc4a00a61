"""A small synchronous Kubernetes REST client: what one `tephra` command needs, and no more.

Why this exists: a command such as `tephra job list` makes one or two requests and exits. The
official client spends ten times their cost importing its generated API modules and models
before the first byte is sent, and the asyncio client (`batch.kube.client`) pulls in aiohttp.
This one is the standard library's `http.client` over the same `ClusterAccess` the services use
(`batch.kube.config`: kubectl's kubeconfig rules, contexts, tokens, client certificates, CA,
`tls-server-name`, exec credential plugins renewed when they expire or are refused), keeps
objects as the plain dicts the server sent, and streams watches line by line.
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from batch.kube.config import ClusterAccess
from batch.kube.resource import ApiError, Resource

__all__ = ["RestClient"]

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class _TLSConnection(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against `tls-server-name` when the cluster sets one."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float | None,
        context: ssl.SSLContext,
        name: str | None,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context = context
        self._server_name = name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._server_name)


class RestClient:
    """Blocking access to one API server (one connection, kept alive between requests)."""

    def __init__(self, access: ClusterAccess, *, timeout: float = 30.0) -> None:
        self.access = access
        self.timeout = timeout
        url = urlsplit(access.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        if not self._https:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        context = self.access.ssl_context or ssl.create_default_context()
        name = self.access.tls_server_name
        return _TLSConnection(self._host, self._port, timeout=timeout, context=context, name=name)

    def _headers(self, accept: str, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": "tephra", **self.access.headers}
        if self.access.credentials is not None:
            headers.update(self.access.credentials.headers())
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _send(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> http.client.HTTPResponse:
        """One exchange; a kept-alive connection the server closed meanwhile is reopened once."""
        for attempt in (1, 2):
            if self._conn is None or timeout != self.timeout:
                self.close()
                self._conn = self._connect(timeout)
            try:
                self._conn.request(method, url, body=data, headers=dict(headers))
                return self._conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        *,
        accept: str,
        content_type: str | None,
        timeout: float | None,
    ) -> http.client.HTTPResponse:
        url = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        for attempt in (1, 2):
            resp = self._send(method, url, data, self._headers(accept, content_type), timeout)
            if resp.status < 400:
                return resp
            payload = _decode(resp.read())
            creds = self.access.credentials
            if resp.status == 401 and creds is not None and attempt == 1:
                creds.invalidate()  # refused: the plugin runs again, once
                continue
            raise ApiError(resp.status, payload, f"{method} {path}")
        raise AssertionError("unreachable")  # pragma: no cover

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> dict[str, Any]:
        """The answer's JSON body (an `ApiError` for a status >= 400; `OSError` when the server
        cannot be reached)."""
        try:
            resp = self._exchange(
                method,
                path,
                params,
                body,
                accept=accept,
                content_type=content_type if body is not None else None,
                timeout=self.timeout,
            )
            payload = _decode(resp.read())
        except http.client.HTTPException as exc:  # a garbled answer: the server is unusable
            self.close()
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
        return payload

    # -- typed helpers ----------------------------------------------------------------------
    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", res.path(namespace=namespace, name=name))

    def list(self, res: Resource, *, namespace: str | None = None, **params: str) -> dict[str, Any]:
        """One LIST, following `continue` tokens; the list with all its items."""
        items: list[dict[str, Any]] = []
        query = {"limit": "5000", **params}
        while True:
            page = self.request("GET", res.path(namespace=namespace), params=query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                page["items"] = items
                return page
            query = {**query, "continue": token}

    def create(
        self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return self.request("POST", res.path(namespace=namespace), body=obj)

    def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            res.path(namespace=namespace, name=name),
            body=patch,
            content_type=_PATCH_TYPES[patch_type],
        )

    def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        return self.request("DELETE", res.path(namespace=namespace, name=name), body=body)

    def watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int | None = None,
        accept: str = "application/json",
        **params: str,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch events `(type, object)` from `resource_version` until the server ends the
        stream (after `timeout_seconds`, when given). An ERROR event raises its `ApiError`;
        `accept` may ask for each object as a one-row `Table`, as kubectl's watch does."""
        query = {"watch": "1", "resourceVersion": resource_version, **params}
        query["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            query["timeoutSeconds"] = str(timeout_seconds)
        read_timeout = None if timeout_seconds is None else timeout_seconds + 30.0
        self.close()  # a watch holds its own connection
        try:
            resp = self._exchange(
                "GET",
                res.path(namespace=namespace),
                query,
                None,
                accept=accept,
                content_type=None,
                timeout=read_timeout,
            )
            yield from _events(resp, res)
        except (TimeoutError, http.client.HTTPException) as exc:
            raise ConnectionError(f"watch {res.plural}: {type(exc).__name__}") from None
        finally:
            self.close()


def _events(resp: http.client.HTTPResponse, res: Resource) -> Iterator[tuple[str, dict[str, Any]]]:
    while True:
        line = resp.readline()
        if not line:
            return
        if not line.strip():
            continue
        event = json.loads(line)
        kind, obj = str(event.get("type") or ""), event.get("object") or {}
        if kind == "ERROR":
            raise ApiError(int(obj.get("code") or 500), obj, f"WATCH {res.plural}")
        if kind != "BOOKMARK":
            yield kind, obj


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw) if raw else {}
    except ValueError:
        return {"message": " ".join(raw[:200].decode(errors="replace").split())}
    return payload if isinstance(payload, dict) else {"items": payload}
