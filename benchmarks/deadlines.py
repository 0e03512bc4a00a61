"""How long Tephra's own deadlines take on this machine: the figures tests no longer assert.

The tests prove each deadline by what the code records (issue 31 item 6: a cancelled lookup, a
give-up on virtual time, a Killing event naming the grace, counted faults); this prints the
seconds they take in real time, `--repeat` times each, and asserts nothing:

* webhook: a review whose cluster read never answers, `?timeout=2s` (the read's budget is half:
  1 s), until the answer (tests/controllers/test_webhook_budget.py);
* leader: a leader whose renewals all fail (Lease 1 s, renewed every 0.1 s) until it gives up;
  it must be before the Lease expires (tests/kube/test_units.py);
* grace: a running sandbox pod deleted with a 60 s grace, capped at 0.5 s, until it is gone
  (tests/sandbox/test_emulator.py);
* latency, drop: one GET with `latency=0.2` injected; a watch with `drop_watch_every=0.5` until
  it is cut (tests/sandbox/test_faults.py).

    .venv/bin/python benchmarks/deadlines.py [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client as http_client
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batch.kube.leader import LeaderElector  # noqa: E402
from batch.sandbox.nodes import make_nodes  # noqa: E402
from batch.sandbox.options import FaultOptions, SandboxOptions  # noqa: E402
from batch.sandbox.testing import run_sandbox  # noqa: E402
from tests.controllers.test_webhook_budget import REVIEW, SlowFacts, _post  # noqa: E402
from tests.kube.test_units import _DownClient  # noqa: E402
from tests.sandbox.helpers import bind, http, pod, watch_lines  # noqa: E402
from tests.waiting import wait_for  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def webhook() -> float:
    return timed(
        lambda: asyncio.run(_post("/queues/validate?timeout=2s", REVIEW, facts=SlowFacts()))
    )


def leader() -> float:
    elector = LeaderElector(
        _DownClient(),  # type: ignore[arg-type]
        name="l",
        namespace="ns",
        identity="me",
        lease_seconds=1,
        renew_seconds=0.1,
    )
    elector.is_leader = True
    elector._renewed_at = time.monotonic()
    began = elector._renewed_at
    asyncio.run(elector.hold())
    return time.monotonic() - began


def grace() -> float:
    with run_sandbox(
        nodes=make_nodes(count=1), options=SandboxOptions(max_grace_seconds=0.5)
    ) as sb:
        path = "/api/v1/namespaces/default/pods/graceful"
        http(
            sb.url,
            "POST",
            "/api/v1/namespaces/default/pods",
            pod("graceful", extra={"terminationGracePeriodSeconds": 60}),
        )
        bind(sb.url, "default", "graceful", "node-0")
        wait_for(lambda: http(sb.url, "GET", path)[1]["status"].get("phase") == "Running")
        return timed(
            lambda: (
                http(sb.url, "DELETE", path),
                wait_for(lambda: http(sb.url, "GET", path)[0] == 404, step=0.01),
            )
        )


def faults() -> tuple[float, float]:
    opts = SandboxOptions(
        install_crds=False, faults=FaultOptions(latency=0.2, drop_watch_every=0.5)
    )
    with run_sandbox(options=opts) as sb:
        latency = timed(lambda: http(sb.url, "GET", "/api/v1/namespaces/default"))

        def watch() -> None:
            with contextlib.suppress(OSError, http_client.HTTPException):
                for _ in watch_lines(
                    sb.url, "/api/v1/namespaces?watch=1&timeoutSeconds=30", timeout=10
                ):
                    pass

        return latency, timed(watch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    runs: dict[str, list[float]] = {
        "webhook": [],
        "leader": [],
        "grace": [],
        "latency": [],
        "drop": [],
    }
    for _ in range(args.repeat):
        runs["webhook"].append(webhook())
        runs["leader"].append(leader())
        runs["grace"].append(grace())
        latency, drop = faults()
        runs["latency"].append(latency)
        runs["drop"].append(drop)
    figures = {
        "load_avg_1m_start": load_start,
        **{f"{name}_s": [round(s, 3) for s in seconds] for name, seconds in runs.items()},
        **{f"{name}_median_s": round(statistics.median(s), 3) for name, s in runs.items()},
        "load_avg_1m_end": os.getloadavg()[0],
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
