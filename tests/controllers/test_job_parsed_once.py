"""A reconcile parses the job's tasks once (`read_job`); the PodGroup's spec, minAvailable and
minResources reuse them instead of re-reading the raw job (issue 32: up to 4 parses before)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import batch.controllers.job.facts as facts_module
from batch.controllers import jobspec
from batch.controllers.jobspec import TaskView

from .conftest import Harness, make_job, task


def test_one_reconcile_parses_the_tasks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]
    parse = jobspec.tasks_of

    def counting(job: Mapping[str, Any]) -> list[TaskView]:
        calls[0] += 1
        return parse(job)

    monkeypatch.setattr(jobspec, "tasks_of", counting)
    monkeypatch.setattr(facts_module, "tasks_of", counting)
    h = Harness(make_job(tasks=[task("a", 2), task("b", 1)]))
    reconciles = 0
    for phase in ("", "Inqueue", "Running"):
        if phase:
            h.cluster.set_podgroup_phase(h.job, phase)
        h.clock.tick(1)
        h.cluster.reconcile(h.ns, h.name, now=h.clock.now)
        reconciles += 1
    h.cluster.set_job_pods(h.job, "Running")
    h.cluster.reconcile(h.ns, h.name, now=h.clock.tick(1))
    reconciles += 1
    assert calls[0] == reconciles
