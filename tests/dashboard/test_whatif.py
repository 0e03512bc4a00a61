"""The what-if form behind --allow-whatif: a replay of the live sandbox's ledger, in a thread."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.dashboard.whatif import WhatIfRuns
from batch.kube.config import load_access
from tests.waiting import wait_for

from .browser import Browser
from .conftest import Live, gpu_job

pytestmark = pytest.mark.xdist_group("dashboard")


@pytest.fixture
def with_whatif(live: Live) -> Iterator[str]:
    runs = WhatIfRuns(live.db_url, since="1d")
    dash = Dashboard(load_access(live.sb.kubeconfig_path), History(None), whatif=runs)
    server = DashboardThread(dash).start()
    try:
        yield server.url
    finally:
        server.stop()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.geturl(), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, url, exc.read().decode()


def _start(url: str, *changes: str) -> tuple[int, str, str]:
    """Post the what-if form as the browser does (its csrf value, the page's Origin)."""
    form = _get(url + "/whatif")[2]
    found = re.search(r'name=csrf value="([^"]+)"', form)
    fields = [("set", c) for c in changes] + [("csrf", found.group(1) if found else "")]
    req = urllib.request.Request(
        url + "/whatif/start", data=urllib.parse.urlencode(fields).encode(), headers={"Origin": url}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.geturl(), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, url, exc.read().decode()


def test_whatif_is_off_without_the_flag(live: Live) -> None:
    assert live.get("/whatif")[0] == 404
    assert "--allow-whatif" in _start(live.url, "queue=team-a,weight=3")[2]


def test_a_replay_runs_in_the_background_and_returns_a_table(live: Live, with_whatif: str) -> None:
    live.submit(gpu_job("recorded", replicas=1, gpus=1, run=1, queue="team-b"))
    wait_for(lambda: live.job("recorded").get("phase") == "Completed", timeout=90)
    wait_for(lambda: "team-b" in {r["queue"] for r in live.api("/history")["wait_times"]})
    status, where, body = _start(with_whatif, "queue=team-b,weight=3")
    assert status == 200 and where.endswith("/whatif/1"), (status, where, body[:300])

    def finished() -> dict[str, Any] | None:
        with urllib.request.urlopen(with_whatif + "/api/whatif/1", timeout=30) as resp:
            run: dict[str, Any] = json.loads(resp.read())
        return run if run["state"] != "running" else None

    run = wait_for(finished, what="the replay", timeout=180)
    assert run["state"] == "done", run
    assert {r["queue"] for r in run["rows"]} >= {"team-b"}, run["rows"]
    page = _get(with_whatif + "/whatif/1")[2]
    assert "<pre id=result>" in page and "team-b" in page
    assert "queue=team-b,weight=3" in _get(with_whatif + "/whatif")[2]


def test_a_bad_change_is_refused_at_once(with_whatif: str) -> None:
    status, _where, body = _start(with_whatif, "queue=team-b,weight=x")
    assert status == 400 and "weight" in body, body
    assert _start(with_whatif)[0] == 400


def test_the_form_in_a_browser_returns_the_table(
    live: Live, with_whatif: str, tmp_path: Path
) -> None:
    browser = Browser(tmp_path / "chromium")
    try:
        browser.goto(with_whatif + "/whatif")
        browser.eval(
            "document.querySelector('input[name=set]').value = 'queue=team-a,weight=1';"
            "document.querySelector('form button').click()"
        )
        wait_for(
            lambda: browser.text("#result").startswith("queue "),
            what="the what-if table",
            timeout=180,
            explain=lambda: browser.text("main"),
        )
        assert "team-a   2->1" in browser.text("#result")
        browser.screenshot(tmp_path / "dashboard-whatif.png")
    finally:
        browser.close()
