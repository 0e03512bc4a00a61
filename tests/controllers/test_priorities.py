"""When the job controller reads its PriorityClass list again (issue 30.10): every 30 s, and
when a job names a class the list lacks, at most once every 5 s whatever the number of such
reconciles. The pure rule (`PriorityClassList`) with a given clock, then the shell's use of it
against `FakeApi`, its last read made older by hand, counting its lists."""

from __future__ import annotations

import asyncio
from typing import Any

from batch.controllers.jobspec import tasks_of
from batch.controllers.operator import ControllerManager
from batch.controllers.priorities import (
    MAX_AGE,
    MISS_RELIST,
    PriorityClassList,
    priority_class_names,
)

from .conftest import make_job, task
from .fakeapi import FakeApi


def test_a_missing_class_is_read_again_at_most_every_miss_relist() -> None:
    pcs = PriorityClassList()
    assert pcs.due(0.0, []) and pcs.known() is None
    pcs.read(0.0, {"silver": 10})
    assert pcs.known() == {"silver": 10}
    assert not pcs.due(MISS_RELIST - 0.1, ["silver"])  # every class there: the list stands
    assert not pcs.due(MISS_RELIST - 0.1, ["gold"])  # missing, but just read
    assert pcs.due(MISS_RELIST, ["gold"])
    assert not pcs.due(MAX_AGE - 0.1, ["silver"])
    assert pcs.due(MAX_AGE, ["silver"])


def test_a_failed_read_keeps_the_values_and_counts_as_a_try() -> None:
    pcs = PriorityClassList()
    pcs.read(0.0, None)
    assert pcs.known() is None and not pcs.due(1.0, ["gold"])
    pcs.read(MISS_RELIST, {"gold": 1})
    pcs.read(2 * MISS_RELIST, None)
    assert pcs.known() == {"gold": 1} and not pcs.due(2 * MISS_RELIST + 1, ["bronze"])


def test_the_names_are_the_tasks_own_else_the_jobs() -> None:
    own = task("a", 1)
    own["template"]["spec"]["priorityClassName"] = "bronze"
    job = make_job(tasks=[own, task("b", 1)], priorityClassName="gold")
    assert priority_class_names(job, tasks_of(job)) == {"bronze", "gold"}
    plain = make_job(tasks=[task("b", 1)])
    assert priority_class_names(plain, tasks_of(plain)) == set()


def _class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}  # fmt: skip


def test_the_shell_finds_a_new_class_without_listing_per_reconcile() -> None:
    api = FakeApi()
    api.put("PriorityClass", _class("silver", 10))
    mgr = ControllerManager(None, adapters=[])
    mgr.client = api  # type: ignore[assignment]

    def lists() -> int:
        return sum(1 for _method, kind, *_ in api.calls if kind == "PriorityClass")

    def later(seconds: float) -> None:  # as if the last read were `seconds` older
        assert mgr.jobs.priorities.tried_at is not None
        mgr.jobs.priorities.tried_at -= seconds

    async def scenario() -> None:
        assert await mgr.jobs.priority_values({"gold"}) == {"silver": 10}
        for _ in range(50):  # a class that does not exist: one list, not one per reconcile
            assert await mgr.jobs.priority_values({"gold"}) == {"silver": 10}
        assert lists() == 1
        api.put("PriorityClass", _class("gold", 100))
        later(MISS_RELIST)
        assert await mgr.jobs.priority_values({"gold"}) == {"silver": 10, "gold": 100}
        assert lists() == 2
        later(MISS_RELIST)
        assert await mgr.jobs.priority_values({"gold"}) == {"silver": 10, "gold": 100}
        assert lists() == 2  # nothing missing: the list stands until it is MAX_AGE old

    asyncio.run(scenario())
