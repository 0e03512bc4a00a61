"""Pure helpers of the job/queue CLI: column layout, resource flags, queue position and share."""

from __future__ import annotations

from typing import Any

import click
import pytest

from batch.cli.job import parse_resources, table
from batch.kube.why import queue_position, queue_share


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


def queue(name: str, weight: int, parent: str = "", allocated: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"weight": weight, **({"parent": parent} if parent else {})}
    return {"metadata": {"name": name}, "spec": spec, "status": {"allocated": allocated or {}}}


def test_queue_share_gives_the_queue_weight_and_holdings() -> None:
    """`tephra job why` says what the job's queue holds of the cluster (issue 15, item 6)."""
    queues = [
        queue("root", 1),
        queue("default", 1, allocated={"cpu": "4", "nvidia.com/gpu": "2"}),
        queue("prod", 2, parent="root"),
        queue("team", 5, parent="prod"),
    ]
    capacity = {"cpu": 128_000, "nvidia.com/gpu": 32_000}
    line = queue_share(queues[1], queues, capacity, ["nvidia.com/gpu", "cpu"])
    assert line == (
        "queue default: weight 1 of 3 among the queues under root; holds 2 of 32 nvidia.com/gpu "
        "(6%), 4 of 128 cpu (3%)"
    )
    line = queue_share(queues[3], queues, {}, ["nvidia.com/gpu"])
    assert line == "queue team: weight 5 of 5 among the queues under prod; holds 0 nvidia.com/gpu"


def test_table_and_resources() -> None:
    out = table(["Name", "Weight"], [["a", 1], ["longer-name", 10]]).splitlines()
    assert out[0].startswith("Name") and out[0].index("Weight") == out[1].index("1") == out[
        2
    ].index("10")
    assert parse_resources("cpu=1000m, memory=100Mi", "-R") == {"cpu": "1000m", "memory": "100Mi"}
    with pytest.raises(click.BadParameter):
        parse_resources("cpu", "-R")
