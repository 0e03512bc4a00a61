"""A lean HTTP/1.1 lane for the scheduler's two writes per pod: its Binding and its Event.

Why this exists: every pod costs the scheduler two POSTs with a small protobuf body (its
Binding and its `Scheduled` event). Through aiohttp each cost the scheduler's one Python thread
about 220 µs of CPU (building the request object, its headers and URL, the response object, its
streams and tasks); on asyncio's own transport, a request written as one prepared byte string
and its answer read by a small parser cost about 80 µs (docs/benchmarks.md, "Where Tephra's
CPU goes", issue 33). On a machine whose cores the API server, etcd and the kubelets share
with the scheduler, the scheduler's CPU a pod bounds its binds a second.

The lane keeps its own keep-alive connections (TLS as the client's: the same `ssl.SSLContext`,
client certificate and `tls-server-name`), one request at a time on each, and answers
`(status, body)`; the body is read by `Content-Length` or chunked. A connection the server
closed, or that broke mid-answer, raises `ConnectionError` and is dropped: a POST is never
re-sent here (the binder re-sends a bind itself, as after any transient failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["PostLane"]

_MAX_HEAD = 64 * 1024


class _Answer:
    """Parses one HTTP/1.1 answer fed in pieces; `done` once whole."""

    __slots__ = ("_at", "body", "buf", "chunked", "close", "done", "extra", "length", "status")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.status = 0
        self.length = -1  # -1: the head is not read yet
        self.chunked = False
        self.close = False
        self.done = False
        self.body = b""
        #: bytes past the answer's end: the connection is not reused
        self.extra = False
        self._at = 0  # chunked: where the next chunk's size line starts

    def feed(self, data: bytes) -> None:
        self.buf += data
        if self.length < 0 and not self.chunked and not self._head():
            return
        if self.chunked:
            self._chunks()
        elif len(self.buf) >= self.length:
            self.body = bytes(self.buf[: self.length])
            self.extra = len(self.buf) > self.length
            self.done = True

    def _head(self) -> bool:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > _MAX_HEAD:
                raise ConnectionError("an HTTP answer's head longer than 64 KiB")
            return False
        lines = bytes(self.buf[:end]).split(b"\r\n")
        del self.buf[: end + 4]
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ConnectionError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
        self.status = int(parts[1])
        self.close = parts[0] == b"HTTP/1.0"
        self.length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                self.length = int(value)
            elif name == b"transfer-encoding" and value != b"identity":
                self.chunked = True
            elif name == b"connection":
                self.close = value == b"close"
        return True

    def _chunks(self) -> None:
        while True:
            eol = self.buf.find(b"\r\n", self._at)
            if eol < 0:
                return
            size = int(bytes(self.buf[self._at : eol]).split(b";", 1)[0], 16)
            if size == 0:  # the last chunk; no trailers are sent by the apiserver
                end = self.buf.find(b"\r\n", eol + 2)
                if end < 0:
                    return
                self.body = bytes(self.buf[: self._at])
                self.extra = len(self.buf) > end + 2
                self.done = True
                return
            if len(self.buf) < eol + 2 + size + 2:
                return
            # Keep the data in place: drop the size line and the chunk's closing CRLF.
            del self.buf[eol + 2 + size : eol + 4 + size]
            del self.buf[self._at : eol + 2]
            self._at += size


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._answer: _Answer | None = None
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        answer, waiter = self._answer, self._waiter
        if answer is None or waiter is None:  # nothing asked: the server may not speak now
            self.abort()
            return
        try:
            answer.feed(data)
        except (ValueError, ConnectionError) as exc:
            self._fail(ConnectionError(f"a garbled HTTP answer: {exc}"))
            self.abort()
            return
        if answer.done:
            self._answer = self._waiter = None
            if answer.close or answer.extra:
                self.abort()  # told to close, or more than was asked for: not reused
            if not waiter.done():
                waiter.set_result((answer.status, answer.body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionError(f"the API server closed the connection: {exc!r}"))

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter, self._answer = self._waiter, None, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def send(self, request: bytes, waiter: asyncio.Future[tuple[int, bytes]]) -> None:
        assert self.transport is not None
        self._answer, self._waiter = _Answer(), waiter
        self.transport.write(request)


class PostLane:
    """POSTs of prepared bodies over keep-alive HTTP/1.1 connections of its own."""

    def __init__(
        self,
        server: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        idle_connections: int = 64,
    ) -> None:
        url = urlsplit(server)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        if self._https and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self._ssl = ssl_context if self._https else None
        self._server_hostname = (server_hostname or self._host) if self._https else None
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = f"{host}:{self._port}"
        self._idle: deque[_Connection] = deque()
        self._idle_max = idle_connections
        self._all: set[_Connection] = set()
        #: connections opened so far (a measure of reuse)
        self.opened = 0

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str,
        headers: Mapping[str, str],
        timeout: float = 30.0,
    ) -> tuple[int, bytes]:
        """POST `body` to `path`: the answer's status and body. `ConnectionError` when the
        connection broke or the answer was garbled, `TimeoutError` after `timeout` s."""
        head = [f"POST {self._prefix}{path} HTTP/1.1", f"Host: {self._host_header}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}", "", ""]
        request = "\r\n".join(head).encode("latin-1") + body
        conn = self._idle_connection() or await self._connect()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[tuple[int, bytes]] = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter, conn)
        try:
            conn.send(request, waiter)
            answer = await waiter
        except BaseException:
            conn.abort()
            self._all.discard(conn)
            raise
        finally:
            timer.cancel()
        self._release(conn)
        return answer

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely timed out
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._server_hostname,
        )
        self.opened += 1
        self._all.add(conn)
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.closed or len(self._idle) >= self._idle_max:
            conn.abort()
            self._all.discard(conn)
            return
        self._idle.append(conn)

    async def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing


def _expire(waiter: asyncio.Future[tuple[int, bytes]], conn: _Connection) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer from the API server in time"))
    with contextlib.suppress(Exception):
        conn.abort()
