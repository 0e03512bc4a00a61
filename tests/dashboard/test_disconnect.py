"""The dashboard when its API server goes away (issue 30.4): it says so, and recovers.

Its own small sandbox (no components: it starts in milliseconds), stopped under a running
dashboard and started again on the same port.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.kube.config import load_access
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .test_security import call

pytestmark = pytest.mark.xdist_group("dashboard")

DOWN = re.compile(r"disconnected since \d\d:\d\d UTC")


def _status(url: str) -> dict[str, Any]:
    reply = call(url + "/api/status")
    assert reply.status == 200, reply
    return dict(json.loads(reply.body))


def test_a_lost_api_server_shows_as_disconnected_until_it_is_back() -> None:
    with run_sandbox(nodes=make_nodes(count=1, gpus=1)) as sb:
        port = urlsplit(sb.url).port
        assert port is not None
        dash = Dashboard(load_access(sb.kubeconfig_path), History(None))
        server = DashboardThread(dash).start()
        try:
            wait_for(lambda: _status(server.url)["synced"], what="the first sync")
            status = _status(server.url)
            assert status["connection"].startswith("live, version ")
            assert status["disconnected_since"] is None
            sb.stop()
            down = wait_for(
                lambda: (s := _status(server.url))["synced"] is False and s,
                what="synced: false once the API server is gone",
                explain=lambda: _status(server.url),
            )
            assert DOWN.fullmatch(down["connection"]), down
            assert down["disconnected_since"].endswith("+00:00"), down
            page = call(server.url + "/queues").body
            assert DOWN.search(page) and ">live" not in page, page[:600]
            with run_sandbox(nodes=make_nodes(count=1, gpus=1), port=port):
                back = wait_for(
                    lambda: (s := _status(server.url))["synced"] and s,
                    what="live again once the API server is back",
                    explain=lambda: _status(server.url),
                )
                assert back["connection"].startswith("live, version "), back
                assert back["disconnected_since"] is None
        finally:
            server.stop()
