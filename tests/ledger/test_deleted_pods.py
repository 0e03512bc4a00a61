"""A deleted pod's run ends when its deletion was asked, not at the grace deadline (both
databases): the stored finish and the GPU-hours computed from it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from batch.ledger.convert import events_from_pod
from batch.ledger.events import LedgerEvent
from batch.ledger.recorder import Recorder
from batch.ledger.reports import Filters, usage

from .helpers import rows, t

START = t(10, 8)
ASKED = t(10, 10)  # two hours later, with a grace of 30 s


def _gpu_pod(phase: str, container: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "annotations": {"volcano.sh/queue-name": "q"},
            "deletionTimestamp": (ASKED + dt.timedelta(seconds=30)).isoformat(),
            "deletionGracePeriodSeconds": 30,
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "c", "state": container}]},
    }


def _record(url: str, spill: Path, events: list[LedgerEvent]) -> None:
    with Recorder(url, spill_path=spill, background=False) as rec:
        rec.record(events)
        assert rec.flush()


def test_a_deleted_pod_records_the_request_and_its_gpu_hours(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    running = _gpu_pod("Running", {"running": {"startedAt": START.isoformat()}})
    killed = _gpu_pod(
        "Failed",
        {
            "terminated": {
                "startedAt": START.isoformat(),
                "finishedAt": (ASKED + dt.timedelta(seconds=2)).isoformat(),
                "exitCode": 143,
            }
        },
    )
    spill = tmp_path / "spill.jsonl"
    seen = t(10, 11)
    _record(ledger_url, spill, [*events_from_pod(None, running, now=seen, adapters=[])])
    _record(ledger_url, spill, [*events_from_pod(running, killed, now=seen, adapters=[])])
    _record(ledger_url, spill, [*events_from_pod(killed, None, now=seen, adapters=[])])
    # A restarted controller that records the deletion again, seen later, changes nothing.
    later = t(11)
    _record(ledger_url, spill, [*events_from_pod(killed, None, now=later, adapters=[])])
    [pod] = rows(engine, "pod_attempts")
    assert (pod["started_at"], pod["finished_at"], pod["outcome"]) == (START, ASKED, "Failed")
    with engine.connect() as conn:
        report = usage(conn, Filters(since=t(10), until=t(11)), by=["queue"])
    assert report.rows == [("q", 1, 2.0, 0.0)]


def test_a_pod_deleted_with_no_container_status_ends_at_the_request(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    pod = _gpu_pod("Running", {})
    pod["status"] = {"phase": "Running", "startTime": START.isoformat()}
    _record(ledger_url, tmp_path / "s.jsonl", events_from_pod(pod, None, now=t(11), adapters=[]))
    [row] = rows(engine, "pod_attempts")
    assert (row["finished_at"], row["outcome"]) == (ASKED, "Deleted")
    with engine.connect() as conn:
        report = usage(conn, Filters(since=t(10), until=t(11)), by=["queue"])
    assert report.rows == [("q", 1, 2.0, 0.0)]
