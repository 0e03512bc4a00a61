"""How fast the dashboard's pages answer at 5,000 nodes and 50,000 pods (issue 18: under 1 s).

A sandbox in this process gets the cluster of tests/dashboard/scale.py (5,000 nodes of 16 GPUs,
2,000 VCJobs of 25 bound pods, installed in-process); the dashboard then lists and watches it
over HTTP like any other cluster. Each page is fetched twice: the first load computes the page
model, the second finds it cached for the unchanged state version. Then each is opened in
headless Chromium, timed until its document is complete (`--no-browser` skips that). Prints the
figures as JSON (and writes them to `--json FILE`); nothing is asserted:
tests/dashboard/test_scale.py checks that the pages are right at this size.

    .venv/bin/python benchmarks/dashboard_scale.py
    .venv/bin/python benchmarks/dashboard_scale.py --nodes 1000 --jobs 400 --no-browser
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batch.dashboard.history import History  # noqa: E402
from batch.dashboard.server import Dashboard, DashboardThread  # noqa: E402
from batch.kube.config import load_access  # noqa: E402
from batch.sandbox.testing import run_sandbox  # noqa: E402
from tests.dashboard.browser import Browser  # noqa: E402
from tests.dashboard.scale import JOBS, NODES, PAGES, PODS_PER_JOB, install, nodes  # noqa: E402
from tests.waiting import wait_for  # noqa: E402


def load(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        size = len(resp.read())
    return time.perf_counter() - start, size


def in_browser(url: str, workdir: Path) -> dict[str, float]:
    """Seconds until each page's document is complete in headless Chromium (laid out, drawn)."""
    browser = Browser(workdir / "chromium")
    try:
        browser.goto(url + "/api/status")  # the browser itself warm
        return {path: browser.goto(url + path) for path in ("/", "/queues", "/jobs", "/nodes")}
    finally:
        browser.close()


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    pods = args.jobs * args.pods_per_job
    with run_sandbox(nodes=nodes(args.nodes)) as sb:
        started = time.perf_counter()
        install(sb, args.nodes, args.jobs, args.pods_per_job)
        figures: dict[str, Any] = {"nodes": args.nodes, "pods": pods}
        figures["install_s"] = time.perf_counter() - started
        dash = Dashboard(load_access(sb.kubeconfig_path), History(None))
        server = DashboardThread(dash).start()
        try:
            started = time.perf_counter()
            wait_for(lambda: len(dash.state.objects["Pod"]) == pods, "every pod", timeout=600)
            figures["sync_s"] = time.perf_counter() - started
            figures["pages"] = {}
            for path in PAGES:
                first, size = load(server.url + path)
                again, _ = load(server.url + path)
                figures["pages"][path] = {"first_s": first, "cached_s": again, "bytes": size}
            if not args.no_browser:
                figures["browser_s"] = in_browser(server.url, workdir)
        finally:
            server.stop()
    figures["load_avg_1m_end"] = os.getloadavg()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--pods-per-job", type=int, default=PODS_PER_JOB)
    parser.add_argument("--no-browser", action="store_true", help="HTTP loads only")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="dashboard-scale-") as tmp:
        figures = {"load_avg_1m_start": load_start, **measure(args, Path(tmp))}
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
