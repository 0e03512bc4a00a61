"""Pure helpers of the job/queue CLI: column layout, resource flags, queue position and share."""

from __future__ import annotations

from typing import Any

import click
import pytest

from batch.api.fairshare import FAIR_SHARE_ANNOTATION, fair_share_value
from batch.cli.job import parse_resources, table
from batch.cli.queue import _HEADERS, _row
from batch.kube.why import explain, queue_position, queue_share


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


SHARE = fair_share_value(
    deserved={"cpu": 5000, "memory": 2**30, "nvidia.com/gpu": 22000},
    allocated={"cpu": 3000, "nvidia.com/gpu": 4000},
    request={"nvidia.com/gpu": 30000},
    session="session-7-1800000000000",
)


def _published(q: dict[str, Any]) -> dict[str, Any]:
    q["metadata"]["annotations"] = {FAIR_SHARE_ANNOTATION: SHARE}
    return q


def test_queue_listings_show_the_schedulers_deserved_share() -> None:
    """`tephra queue get/list` show the deserved share the scheduler published (issue 29.1)."""
    assert _HEADERS[-1] == "Deserved"
    row = _row(_published(queue("team", 1)))
    assert row[len(_HEADERS) - 1] == "cpu=5,nvidia.com/gpu=22"
    assert _row(queue("other", 1))[len(_HEADERS) - 1] == "<none>"


class _Look:
    """A WhyLookup over fixed objects (a job in queue `team`, its PodGroup Inqueue)."""

    def __init__(self, q: dict[str, Any]) -> None:
        self.q = q

    def podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {**pg(name, queue="team", phase="Inqueue"), "spec": {"minMember": 1}}

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.q

    def events(self, namespace: str, involved: str) -> list[dict[str, Any]]:
        return []

    def podgroups(self) -> list[dict[str, Any]]:
        return []

    def priorities(self) -> dict[str, int]:
        return {}

    def queues(self) -> list[dict[str, Any]]:
        return [self.q]

    def capacity(self) -> dict[str, int]:
        return {"nvidia.com/gpu": 32_000}

    def pods(self, namespace: str, group: str) -> list[dict[str, Any]]:
        return []

    def free_by_node(self) -> dict[str, dict[str, int]]:
        return {}

    def evictions(self) -> list[dict[str, Any]]:
        return []


JOB = {"metadata": {"name": "j", "namespace": "default", "uid": "u"}, "spec": {"queue": "team"}}


def test_job_why_says_what_the_queue_deserves() -> None:
    lines = explain(JOB, _Look(_published(queue("team", 3))))
    assert "  queue team: allocated 4 of deserved 22 nvidia.com/gpu (weight 3)" in lines, lines
    assert not any("of deserved" in line for line in explain(JOB, _Look(queue("team", 3))))
