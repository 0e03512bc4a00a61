"""The lean POST lane (batch.kube.postlane): the scheduler's Bindings and Events over
keep-alive HTTP/1.1 connections of its own, read back whatever way the server frames them."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from batch.kube.certs import self_signed
from batch.kube.client import ApiError, KubeClient
from batch.kube.config import ClusterAccess
from batch.kube.postlane import PostLane
from batch.kube.protobuf import MEDIA_TYPE

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await reader.readexactly(length)


def _run(
    answers: list[bytes], posts: int, *, close_after: int = -1
) -> tuple[list[Any], list[bytes], int]:
    """`posts` POSTs, one after the other, to a server that writes `answers` in turn (each in
    two pieces, split mid-way) and closes the connection after answer `close_after`; the
    answers or errors, the requests seen, connections opened."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            try:
                head, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            seen.append(head + body)
            answer = answers.pop(0)
            writer.write(answer[: len(answer) // 2])
            await writer.drain()
            await asyncio.sleep(0.01)
            writer.write(answer[len(answer) // 2 :])
            await writer.drain()
            if len(seen) - 1 == close_after:
                break
        writer.close()

    async def main() -> tuple[list[Any], int]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        lane = PostLane(f"http://127.0.0.1:{port}/prefix")
        out: list[Any] = []
        for i in range(posts):
            try:
                out.append(
                    await lane.post(
                        f"/api/v1/p{i}",
                        b"\x01\x02",
                        content_type=MEDIA_TYPE,
                        headers={"Accept": "application/json"},
                    )
                )
            except (ConnectionError, TimeoutError) as exc:
                out.append(type(exc))
        await lane.close()
        server.close()
        return out, lane.opened

    out, opened = asyncio.run(main())
    return out, seen, opened


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n%b\r\n%b" % (len(body), extra, body)


def test_answers_by_length_come_back_on_one_connection() -> None:
    out, seen, opened = _run([_ok(b'{"a":1}'), _ok(b"")], 2)
    assert out == [(201, b'{"a":1}'), (201, b"")]
    assert opened == 1
    first = seen[0]
    assert first.startswith(b"POST /prefix/api/v1/p0 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Type: application/vnd.kubernetes.protobuf\r\n" in first
    assert b"\r\nContent-Length: 2\r\n" in first
    assert first.endswith(b"\r\n\r\n\x01\x02")


def test_chunked_answers_are_joined() -> None:
    chunked = (
        b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"a"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n'
    )
    out, _, opened = _run([chunked, _ok(b"{}")], 2)
    assert out == [(403, b'{"a":1}'), (201, b"{}")]
    assert opened == 1


def test_a_connection_the_server_says_to_close_is_not_reused() -> None:
    out, _, opened = _run([_ok(b"{}", b"Connection: close\r\n"), _ok(b"{}")], 2)
    assert out == [(201, b"{}"), (201, b"{}")]
    assert opened == 2


def test_a_connection_closed_mid_answer_fails_the_post_and_the_next_opens_anew() -> None:
    cut = _ok(b'{"a":1}')[:-3]
    out, seen, opened = _run([cut, _ok(b"{}")], 2, close_after=0)
    assert out == [ConnectionError, (201, b"{}")]
    assert len(seen) == 2
    assert opened == 2


def test_garbage_fails_the_post() -> None:
    out, _, _ = _run([b"SSH-2.0-OpenSSH\r\n\r\n"], 1, close_after=0)
    assert out == [ConnectionError]


def test_no_answer_times_out() -> None:
    async def main() -> Any:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1 << 16)
            await asyncio.sleep(5)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        lane = PostLane(f"http://127.0.0.1:{port}")
        with pytest.raises(TimeoutError):
            await lane.post("/x", b"", content_type="a/b", headers={}, timeout=0.2)
        await lane.close()
        server.close()

    asyncio.run(main())


def _tls_server(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    cert, key = self_signed(tmp_path, hosts=("localhost", "127.0.0.1"))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


def test_the_clients_protobuf_posts_go_through_the_lane_over_tls(tmp_path: Path) -> None:
    """KubeClient sends a POST of prepared bytes through its lane (TLS, the client's headers,
    one kept-alive connection for sequential POSTs); a refusal is the same ApiError as
    aiohttp's; a JSON body still goes through aiohttp."""
    server_ctx, client_ctx = _tls_server(tmp_path)
    seen: list[tuple[str, str, str, bytes]] = []

    async def handler(req: web.Request) -> web.Response:
        body = await req.read()
        seen.append((req.path, req.headers["Content-Type"], req.headers["Authorization"], body))
        if req.path.endswith("/refused"):
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        return web.json_response({"kind": "Status", "code": 201}, status=201)

    async def main() -> int:
        app = web.Application()
        app.router.add_post("/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
        await site.start()
        port = runner.addresses[0][1]
        access = ClusterAccess(
            server=f"https://127.0.0.1:{port}",
            ssl_context=client_ctx,
            headers={"Authorization": "Bearer t"},
        )
        async with KubeClient(access) as client:
            for i in range(3):
                answer = await client.request("POST", f"/p{i}", body=b"\x00", content_type="x/y")
                assert answer == {"kind": "Status", "code": 201}
            with pytest.raises(ApiError) as refused:
                await client.request("POST", "/refused", body=b"\x00", content_type="x/y")
            assert refused.value.status == 409
            await client.request("POST", "/json", body={"a": 1})
            assert client._lane is not None
            opened = client._lane.opened
        await runner.cleanup()
        return opened

    assert asyncio.run(main()) == 1
    assert [s[:3] for s in seen[:4]] == [
        ("/p0", "x/y", "Bearer t"),
        ("/p1", "x/y", "Bearer t"),
        ("/p2", "x/y", "Bearer t"),
        ("/refused", "x/y", "Bearer t"),
    ]
    assert seen[4][1:] == ("application/json", "Bearer t", b'{"a":1}')
