"""Webhook TLS (issue 20.6): TLS 1.2 or newer, and no CBC cipher suites (an AEAD suite only)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_webhook import Server


def _handshake(port: int, cafile: Path, *, ciphers: str | None, version: ssl.TLSVersion) -> str:
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.minimum_version = ctx.maximum_version = version
    if ciphers:
        ctx.set_ciphers(ciphers)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[0]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    srv.stop()


def test_cbc_suites_and_old_versions_are_refused(server: Server) -> None:
    for cbc in ("ECDHE-RSA-AES128-SHA256", "ECDHE-ECDSA-AES128-SHA256", "AES128-SHA", "AES256-SHA"):
        with pytest.raises(ssl.SSLError):
            _handshake(server.port, server.cert, ciphers=cbc, version=ssl.TLSVersion.TLSv1_2)
    with pytest.raises(ssl.SSLError):
        _handshake(
            server.port, server.cert, ciphers="DEFAULT:@SECLEVEL=0", version=ssl.TLSVersion.TLSv1_1
        )


def test_aead_suites_are_served(server: Server) -> None:
    got = _handshake(server.port, server.cert, ciphers=None, version=ssl.TLSVersion.TLSv1_2)
    assert "GCM" in got or "CHACHA20" in got, got
    assert _handshake(server.port, server.cert, ciphers=None, version=ssl.TLSVersion.TLSv1_3)
