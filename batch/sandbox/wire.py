"""A small HTTP/1.1 server on asyncio for the sandbox API (keep-alive, pipelining, chunked).

The sandbox's request handling is a few tens of microseconds; a general web framework would add
several times that per request, which on a 2-core machine decides whether the API server keeps
up with a scheduler binding a thousand pods a second. This module only does what Kubernetes
clients need: Content-Length and chunked request bodies, `Expect: 100-continue`, keep-alive,
pipelined requests answered in order, and chunked streaming responses (watches) with
back-pressure. No TLS, no HTTP/2 (clients use HTTP/1.1 over plain TCP).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote

log = logging.getLogger(__name__)

_MAX_HEADER = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_REASONS = {s.value: s.phrase for s in HTTPStatus}


class Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        body: bytes = b"",
        *,
        status: int = 200,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.body = body
        self.status = status
        self.content_type = content_type
        self.headers = headers


class Stream:
    """A chunked response body written while the handler runs (watch streams)."""

    def __init__(self, proto: HttpProtocol) -> None:
        self._proto = proto
        self.closed = False
        self.on_close: list[Callable[[], None]] = []

    async def write(self, data: bytes) -> None:
        if self.closed or not data:
            return
        proto = self._proto
        proto.transport_write(b"%x\r\n" % len(data) + data + b"\r\n")
        if proto.paused:
            await proto.drain()

    def abort(self) -> None:
        """Cut the connection without ending the stream (a dropped watch)."""
        self._proto.abort()

    def _closed(self) -> None:
        if not self.closed:
            self.closed = True
            for cb in self.on_close:
                cb()


class Request:
    __slots__ = ("_proto", "_stream", "body", "headers", "method", "path", "query", "raw_path")

    def __init__(
        self, proto: HttpProtocol, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> None:
        self._proto = proto
        self._stream: Stream | None = None
        self.method = method
        self.headers = headers
        self.body = body
        path, _, qs = target.partition("?")
        self.raw_path = target
        self.path = unquote(path)
        self.query: dict[str, str] = dict(parse_qsl(qs, keep_blank_values=True)) if qs else {}

    @property
    def host(self) -> str:
        return self.headers.get("host", "")

    @property
    def path_qs(self) -> str:
        return self.raw_path

    async def start_stream(
        self, *, status: int = 200, content_type: str = "application/json"
    ) -> Stream:
        proto = self._proto
        proto.transport_write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {content_type}"
            "\r\nTransfer-Encoding: chunked\r\nCache-Control: no-cache, private\r\n\r\n".encode()
        )
        stream = Stream(proto)
        self._stream = stream
        proto.stream = stream
        return stream


Handler = Callable[[Request], Awaitable[Response | None]]


class HttpProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, handler: Handler, connections: set[HttpProtocol]) -> None:
        self.handler = handler
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.pending: list[Request] = []
        self.busy = False
        self.paused = False
        self._drain: asyncio.Future[None] | None = None
        self.stream: Stream | None = None
        self.close_after = False
        self.lost = False
        self.sent_continue = False

    # ------------------------------------------------------------------ transport
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.connections.discard(self)
        if self.stream is not None:
            self.stream._closed()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    async def drain(self) -> None:
        if self.paused and not self.lost:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def transport_write(self, data: bytes) -> None:
        if self.transport is not None and not self.lost:
            self.transport.write(data)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        if self.stream is not None:
            self.stream._closed()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ parsing
    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            req = self._parse()
            if req is None:
                break
            self.pending.append(req)
        if self.pending and not self.busy:
            self.busy = True
            asyncio.get_running_loop().create_task(self._serve())

    def _parse(self) -> Request | None:
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEADER:
                self._fail(431, "request header too large")
            return None
        head = bytes(buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._fail(400, "malformed request line")
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        start = end + 4
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._chunked(start)
            if body is None:
                self._maybe_continue(headers)
                return None
            payload, consumed = body
        else:
            try:
                length = int(headers.get("content-length", "0") or 0)
            except ValueError:
                self._fail(400, "bad content-length")
                return None
            if length > _MAX_BODY:
                self._fail(413, "request body too large")
                return None
            if len(buf) - start < length:
                self._maybe_continue(headers)
                return None
            payload = bytes(buf[start : start + length])
            consumed = start + length
        del buf[:consumed]
        self.sent_continue = False
        conn = headers.get("connection", "").lower()
        if conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive"):
            self.close_after = True
        return Request(self, method, target, headers, payload)

    def _maybe_continue(self, headers: dict[str, str]) -> None:
        if headers.get("expect", "").lower() == "100-continue" and not self.sent_continue:
            self.sent_continue = True
            self.transport_write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _chunked(self, pos: int) -> tuple[bytes, int] | None:
        buf = self.buf
        out = bytearray()
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size_text = bytes(buf[pos:eol]).split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self._fail(400, "bad chunk size")
                return None
            pos = eol + 2
            if size == 0:
                end = buf.find(b"\r\n", pos)  # optional trailers end with an empty line
                while end >= 0 and end != pos:
                    pos = end + 2
                    end = buf.find(b"\r\n", pos)
                if end < 0:
                    return None
                return bytes(out), end + 2
            if len(buf) < pos + size + 2:
                return None
            out += buf[pos : pos + size]
            pos += size + 2

    def _fail(self, status: int, message: str) -> None:
        body = message.encode()
        self.transport_write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        self.buf.clear()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ serving
    async def _serve(self) -> None:
        try:
            while self.pending and not self.lost:
                req = self.pending.pop(0)
                try:
                    resp = await self.handler(req)
                except Exception:
                    log.exception("unhandled error serving %s %s", req.method, req.path)
                    resp = Response(
                        b'{"kind":"Status","apiVersion":"v1","status":"Failure",'
                        b'"reason":"InternalError","code":500}',
                        status=500,
                    )
                if req._stream is not None:
                    stream = req._stream
                    if not stream.closed and not self.lost:
                        self.transport_write(b"0\r\n\r\n")
                    self.stream = None
                    stream._closed()
                elif resp is not None:
                    self._write(resp)
                if self.close_after:
                    self.close()
                    return
        finally:
            self.busy = False
        if self.pending and not self.lost:  # arrived while the last response was written
            self.busy = True
            asyncio.get_running_loop().create_task(self._serve())

    def _write(self, resp: Response) -> None:
        body = resp.body
        head = (
            f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'OK')}\r\n"
            f"Content-Type: {resp.content_type}\r\nContent-Length: {len(body)}\r\n"
        )
        if resp.headers:
            head += "".join(f"{k}: {v}\r\n" for k, v in resp.headers.items())
        if self.close_after:
            head += "Connection: close\r\n"
        self.transport_write(head.encode() + b"\r\n" + body)


class WireServer:
    """Listening socket + open connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections: set[HttpProtocol] = set()
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: HttpProtocol(self.handler, self.connections),
            host,
            port,
            reuse_address=True,
            backlog=1024,
        )
        sock = self.server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close()
        if self.server is not None:
            await self.server.wait_closed()
            self.server = None
