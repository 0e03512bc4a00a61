"""The age of a queue's oldest Pending gang, for "gangs pending longer than N" alerts: the
creation time of its oldest PodGroup still Pending, exported per queue (0 when none is)."""

from __future__ import annotations

from typing import Any

from batch.controllers.metrics import ControllerMetrics
from batch.controllers.queue import oldest_pending


def pg(name: str, created: str, phase: str | None) -> dict[str, Any]:
    status = {"phase": phase} if phase else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "status": status}


def test_oldest_pending_podgroup_creation_time() -> None:
    groups = [
        pg("running", "2026-01-01T00:00:00Z", "Running"),
        pg("new", "2026-01-01T00:05:00Z", None),  # no status yet: Pending
        pg("old", "2026-01-01T00:01:40Z", "Pending"),
        pg("admitted", "2026-01-01T00:00:10Z", "Inqueue"),
    ]
    assert oldest_pending(groups) == 1767225700.0  # 2026-01-01T00:01:40Z
    assert oldest_pending([g for g in groups if g["metadata"]["name"] != "old"]) == 1767225900.0
    assert oldest_pending(groups[:1]) is None
    assert oldest_pending([pg("bad", "yesterday", "Pending")]) is None


def test_the_gauge_is_exported() -> None:
    metrics = ControllerMetrics()
    metrics.oldest_pending.labels("q").set(1767225700.0)
    text = __import__("prometheus_client").generate_latest(metrics.registry).decode()
    assert 'tephra_queue_oldest_pending_podgroup_timestamp_seconds{queue_name="q"}' in text
