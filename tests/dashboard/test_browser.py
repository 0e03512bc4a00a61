"""The dashboard in a real browser (headless Chromium over DevTools) on a live sandbox.

Each page is opened, checked for the live figures and saved as a screenshot in pytest's
tmp_path (``dashboard-<page>.png``); with TEPHRA_DASHBOARD_SHOTS=DIR they are copied there too
(how docs/images/dashboard-*.png are made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_for

from .browser import Browser
from .conftest import SCHED, Live, gpu_job

pytestmark = pytest.mark.xdist_group("dashboard")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium"))
    try:
        yield b
    finally:
        b.close()


def _shot(browser: Browser, tmp_path: Path, name: str) -> Path:
    path = browser.screenshot(tmp_path / f"dashboard-{name}.png")
    assert path.stat().st_size > 10_000, path
    keep = os.environ.get("TEPHRA_DASHBOARD_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    return path


def _count(browser: Browser, selector: str) -> int:
    return int(browser.eval(f"document.querySelectorAll({selector!r}).length"))


def test_the_pages_render_the_live_cluster(live: Live, browser: Browser, tmp_path: Path) -> None:
    browser.goto(live.url + "/")
    assert browser.text("h1") == "Cluster"
    wait_for(lambda: "8\nGPUs" in browser.text(".cards"), what="8 GPUs card")
    assert browser.text("table.racks tr:nth-child(2)").split("\t")[:2] == ["rack-0", "1"]
    _shot(browser, tmp_path, "overview")
    browser.goto(live.url + "/nodes")
    nodes = browser.eval("[...document.querySelectorAll('table.nodes tr')]"
                         ".filter(tr => tr.cells[0].tagName == 'TD')"
                         ".map(tr => [...tr.cells].map(td => td.innerText))")  # fmt: skip
    assert [n[:2] for n in nodes] == [["node-0", "ready"], ["node-1", "ready"]]
    assert all(n[2].strip().endswith(" / 4") for n in nodes), nodes  # GPUs used / total
    _shot(browser, tmp_path, "nodes")
    browser.goto(live.url + "/queues")
    names = browser.eval("[...document.querySelectorAll('table.queues tr td:first-child')]"
                         ".map(td => td.innerText)")  # fmt: skip
    assert names[:2] == ["root", "default"] and {"team-a", "team-b"} <= set(names)
    assert _count(browser, "svg.chart rect.bar") >= 3 * 3
    assert browser.eval("document.querySelector('svg.chart text.unit').textContent") == "GPUs"
    _shot(browser, tmp_path, "queues")
    _check_jobs_page(live, browser, tmp_path)
    # 2 GPUs for 3 s: 0.0017 GPU-hours, above the report's rounding (3 decimals)
    live.submit(gpu_job("seen", replicas=1, gpus=2, run=3, queue="team-a"))

    def used() -> bool:
        usage = live.api("/history")["usage"]
        return any(r["queue"] == "team-a" and r["gpu_hours"] for r in usage)

    wait_for(used, what="team-a's GPU-hours in the ledger", timeout=90)
    browser.goto(live.url + "/history")
    assert browser.text("h1").startswith("History, last 7 days")
    assert _count(browser, "svg.chart") == 3
    drawn = browser.eval(
        "[...document.querySelectorAll('svg.chart')].map(svg => [...svg.querySelectorAll("
        "'rect.bar')].filter(r => r.getBBox().height > 0).length)"
    )
    assert drawn[1] > 0, drawn  # GPU-hours per queue per day
    _shot(browser, tmp_path, "history")


def _check_jobs_page(live: Live, browser: Browser, tmp_path: Path) -> None:
    """A VCJob and an operator's gang side by side, sortable by GPUs."""
    from .test_api import _operator_gang

    live.sb.apply(_operator_gang("bert"))
    live.submit(gpu_job("listed", replicas=1, gpus=1, run=1, queue="team-a"))
    try:
        browser.goto(live.url + "/jobs?sort=-gpus")
        wait_for(
            lambda: {"bert", "listed"} <= set(browser.text("table.jobs").split()),
            what="bert and listed in the jobs table",
            explain=lambda: browser.text("table.jobs"),
        )
        heads = browser.eval(
            "[...document.querySelectorAll('table.jobs th')].map(th => th.innerText)"
        )
        assert heads[:6] == ["job", "kind", "namespace", "queue", "phase", "GPUs asked ▼"], heads
        first = browser.eval("[...document.querySelector('table.jobs tr:nth-child(2)').cells]"
                             ".map(td => td.innerText)")  # fmt: skip
        assert first[:2] == ["bert", "PyTorchJob"] and first[5] == "64", first
        assert first[10].endswith(" ago"), first  # age, relative
        _shot(browser, tmp_path, "jobs")
    finally:
        live.co.delete_namespaced_custom_object(*SCHED, "default", "podgroups", "bert")


def _team_a_gpus(browser: Browser) -> str:
    return str(
        browser.eval(
            "(r => r ? r.cells[6].innerText : '')([...document.querySelectorAll("
            "'table.queues tr')].find(r => r.cells[0].innerText === 'team-a'))"
        )
    )


def test_the_queue_view_follows_a_job_without_a_reload(
    live: Live, browser: Browser, tmp_path: Path
) -> None:
    wait_for(lambda: live.api("/overview")["gpus"]["allocated"] == 0, what="an idle cluster")
    browser.goto(live.url + "/queues")
    wait_for(lambda: _team_a_gpus(browser).startswith("0 / 4"), what="team-a idle")
    browser.eval("window.notReloaded = true")
    live.submit(gpu_job("starts", replicas=1, gpus=3, run=20, queue="team-a"))
    wait_for(
        lambda: _team_a_gpus(browser).startswith("3 / "),  # deserved: the scheduler's figure
        what="team-a's row shows 3 GPUs",
        timeout=90,
        explain=lambda: _team_a_gpus(browser),
    )
    assert browser.eval("window.notReloaded") is True
    assert browser.text("#version").startswith("live, version ")
    _shot(browser, tmp_path, "queues-live")


def test_the_job_page_shows_why_a_job_waits(live: Live, browser: Browser, tmp_path: Path) -> None:
    created = live.submit(gpu_job("toobig", replicas=4, gpus=4, run=1, queue="team-b"))
    try:
        wait_for(lambda: live.job("toobig"), what="the job in the dashboard's state")
        browser.goto(live.url + "/jobs/default/toobig")
        wait_for(
            lambda: (
                "no reason recorded" not in (why := browser.text("#why"))
                and "queue position: " in why
            ),
            what="the pending reason on the job page",
            timeout=60,
            explain=lambda: browser.text("#why"),
        )
        why = browser.text("#why")
        assert why.startswith("Job default/toobig: phase Pending, queue team-b")
        assert browser.text("#verdict").startswith("Job default/toobig "), browser.text("#verdict")
        assert "Unschedulable" in why or "event " in why, why
        assert "  queue position: 1 of 1 waiting in queue team-b" in why
        assert browser.text("#phase") == "Pending"
        _shot(browser, tmp_path, "job")
    finally:
        name = created["metadata"]["name"]
        live.co.delete_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", "default", "jobs", name
        )
