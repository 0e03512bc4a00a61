"""The dashboard's pages at 5,000 nodes and 50,000 pods on the sandbox answer, and correctly.

The cluster (tests/dashboard/scale.py) is installed in-process; the dashboard then lists and
watches it over HTTP like any other cluster. Each page is fetched over HTTP and its content
checked against the cluster, then the nodes page is opened in headless Chromium and its
node table rows counted. How fast the pages answer is measured by benchmarks/dashboard_scale.py, not
here: a time bound in a test fails on a loaded machine for no fault of the code.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("batch.sandbox.testing")

from batch.dashboard.gangs import JOB_ROWS
from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.kube.config import load_access
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .browser import Browser
from .scale import GPUS_PER_NODE, JOBS, NODES, PODS_PER_JOB, install, nodes

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dashboard-scale")]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=120) as resp:
        assert resp.status == 200, url
        return str(resp.read().decode())


def _check_pages(url: str) -> None:
    overview = json.loads(_get(url + "/api/overview"))
    assert overview["nodes"] == NODES
    assert overview["gpus"]["total"] == NODES * GPUS_PER_NODE
    assert sum(overview["pods"].values()) == JOBS * PODS_PER_JOB
    assert _get(url + "/").count('<a href="/nodes#rack-') == 1  # one rack: "(no rack)"
    assert _get(url + "/nodes").count('<span class="state ready">') == NODES
    queues = _get(url + "/queues")
    assert "<h1>Queues</h1>" in queues and ">default<" in queues
    jobs = _get(url + "/jobs")
    assert f"<h1>Jobs ({JOBS})</h1>" in jobs
    assert f"showing {JOB_ROWS} of {JOBS}" in jobs
    job = _get(url + "/jobs/default/job-7")
    assert f"<h2>Pods ({PODS_PER_JOB})</h2>" in job
    assert all(f"job-7-w-{k}<" in job for k in range(PODS_PER_JOB))


def _check_in_browser(url: str, tmp_path: Path) -> None:
    browser = Browser(tmp_path / "chromium")
    try:
        browser.goto(url + "/nodes")
        assert browser.eval("document.querySelectorAll('table.nodes tr').length") == NODES + 1
        browser.screenshot(tmp_path / "dashboard-5000-nodes.png", whole_page=False)
    finally:
        browser.close()


def test_pages_answer_correctly_at_5000_nodes(tmp_path: Path) -> None:
    with run_sandbox(nodes=nodes()) as sb:
        install(sb)
        dash = Dashboard(load_access(sb.kubeconfig_path), History(None))
        server = DashboardThread(dash).start()
        try:
            wait_for(
                lambda: len(dash.state.objects["Pod"]) == JOBS * PODS_PER_JOB,
                what="every pod in the dashboard's state",
                timeout=240,
            )
            _check_pages(server.url)
            _check_in_browser(server.url, tmp_path)
        finally:
            server.stop()
