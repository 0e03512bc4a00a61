"""Contract: fault injection fails writes, throttles, delays and drops watches deterministically."""

from __future__ import annotations

import http.client as http_client
import urllib.error
import urllib.request

import pytest

from batch.sandbox.options import FaultOptions, SandboxOptions
from batch.sandbox.testing import run_sandbox

from .helpers import http, watch_lines


def _codes(faults: FaultOptions, n: int = 40) -> list[int]:
    opts = SandboxOptions(install_crds=False, faults=faults)
    with run_sandbox(options=opts) as sb:
        return [
            http(
                sb.url,
                "POST",
                "/api/v1/namespaces/default/configmaps",
                {"metadata": {"name": f"f{i}"}},
            )[0]
            for i in range(n)
        ]


def test_write_faults_are_deterministic() -> None:
    faults = FaultOptions(error_rate=0.2, throttle_rate=0.2, seed=7)
    first = _codes(faults)
    again = _codes(FaultOptions(error_rate=0.2, throttle_rate=0.2, seed=7))
    other = _codes(FaultOptions(error_rate=0.2, throttle_rate=0.2, seed=8))
    assert first == again
    assert first != other
    assert set(first) == {201, 429, 500}
    assert 8 <= first.count(201) <= 36


def test_throttle_body_and_reads_unaffected() -> None:
    opts = SandboxOptions(install_crds=False, faults=FaultOptions(throttle_rate=1.0))
    with run_sandbox(options=opts) as sb:
        req = urllib.request.Request(
            sb.url + "/api/v1/namespaces/default/configmaps",
            data=b'{"metadata":{"name":"x"}}',
            method="POST",
        )
        req.add_header("Content-Type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=5)
        assert exc.value.code == 429 and exc.value.headers["Retry-After"] == "1"
        assert http(sb.url, "GET", "/api/v1/namespaces")[0] == 200


def test_latency_and_dropped_watches() -> None:
    opts = SandboxOptions(
        install_crds=False, faults=FaultOptions(latency=0.2, drop_watch_every=0.5)
    )
    with run_sandbox(options=opts) as sb:
        api = sb.sandbox.http
        assert http(sb.url, "GET", "/api/v1/namespaces/default")[0] == 200
        assert api.faults.delayed == pytest.approx(0.2 * api.requests)  # each request waited
        events = []
        try:
            for ev in watch_lines(
                sb.url, "/api/v1/namespaces?watch=1&timeoutSeconds=30", timeout=10
            ):
                events.append(ev)
        except (OSError, http_client.HTTPException):
            pass  # the connection is cut, which clients may see as an error
        # the stream was cut by the fault (every 0.5 s), not ended by timeoutSeconds=30 or by
        # the client's read timeout
        assert api.watches.dropped_watches == 1, api.watches.dropped_watches
        assert {e["object"]["metadata"]["name"] for e in events} >= {"default"}
