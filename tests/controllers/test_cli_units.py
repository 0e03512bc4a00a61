"""Pure helpers of the job/queue CLI: column layout, resource flags, queue position."""

from __future__ import annotations

from typing import Any

import click
import pytest

from batch.cli.job import parse_resources, queue_position, table


def pg(
    name: str,
    *,
    queue: str = "q",
    phase: str = "Pending",
    created: str = "2026-01-01T00:00:00Z",
    pcn: str = "",
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name, "creationTimestamp": created},
        "spec": {"queue": queue, "priorityClassName": pcn},
        "status": {"phase": phase},
    }


def test_queue_position_orders_by_priority_then_age() -> None:
    groups = [
        pg("old", created="2026-01-01T00:00:00Z"),
        pg("new", created="2026-01-01T00:05:00Z"),
        pg("urgent", created="2026-01-01T00:09:00Z", pcn="high"),
        pg("running", phase="Running"),
        pg("elsewhere", queue="other"),
    ]
    prio = {"high": 1000}
    assert queue_position(groups[2], groups, prio) == (1, 3)
    assert queue_position(groups[0], groups, prio) == (2, 3)
    assert queue_position(groups[1], groups, prio) == (3, 3)
    assert queue_position(groups[3], groups, prio) == (0, 3)


def test_table_and_resources() -> None:
    out = table(["Name", "Weight"], [["a", 1], ["longer-name", 10]]).splitlines()
    assert out[0].startswith("Name") and out[0].index("Weight") == out[1].index("1") == out[
        2
    ].index("10")
    assert parse_resources("cpu=1000m, memory=100Mi", "-R") == {"cpu": "1000m", "memory": "100Mi"}
    with pytest.raises(click.BadParameter):
        parse_resources("cpu", "-R")
