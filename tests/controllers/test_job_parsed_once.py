"""A reconcile reads the job once: `read_job` builds its view (`batch.api.jobview.job_view`) and
every step (the PodGroup's spec, minAvailable, minResources, the pods, the plugins, the policies)
reads that view instead of parsing the raw job again (issue 32: up to 4 parses before). A stored
job (with a uid and a resourceVersion) is parsed once per version, whoever asks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import batch.controllers.memory as memory
from batch.api.jobview import JobView, job_view

from .conftest import Harness, make_job, task


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """[views built inside reconcile_job, reconcile_job calls]."""
    counts = [0, 0]
    inside = [False]
    build, reconcile = job_view.build, memory.reconcile_job

    def counting_build(*args: Any) -> JobView:
        counts[0] += inside[0]
        return build(*args)

    def counting_reconcile(*args: Any, **kwargs: Any) -> Any:
        counts[1] += 1
        inside[0] = True
        try:
            return reconcile(*args, **kwargs)
        finally:
            inside[0] = False

    monkeypatch.setattr(job_view, "build", counting_build)
    monkeypatch.setattr(memory, "reconcile_job", counting_reconcile)
    yield counts


def test_one_reconcile_builds_the_job_view_once(builds: list[int]) -> None:
    h = Harness(make_job(tasks=[task("a", 2), task("b", 1)]))
    for phase in ("", "Inqueue", "Running"):
        if phase:
            h.cluster.set_podgroup_phase(h.job, phase)
        h.clock.tick(1)
        h.cluster.reconcile(h.ns, h.name, now=h.clock.now)
    h.cluster.set_job_pods(h.job, "Running")
    h.cluster.reconcile(h.ns, h.name, now=h.clock.tick(1))
    assert builds[1] == 4 and builds[0] == builds[1]


def _stored(rv: str, replicas: int) -> Mapping[str, Any]:
    job = make_job(tasks=[task("a", replicas)])
    job["metadata"] |= {"uid": "u-parsed-once", "resourceVersion": rv}
    return job


def test_a_stored_job_is_parsed_once_per_version(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]
    build = job_view.build

    def counting(*args: Any) -> JobView:
        calls[0] += 1
        return build(*args)

    monkeypatch.setattr(job_view, "build", counting)
    first = job_view(_stored("7", 2))
    assert job_view(_stored("7", 2)) is first and calls[0] == 1
    newer = job_view(_stored("8", 3))  # a new version is read again
    assert calls[0] == 2 and newer.tasks[0].replicas == 3 and first.tasks[0].replicas == 2
    unstored = make_job()  # no resourceVersion: never cached
    job_view(unstored)
    job_view(unstored)
    assert calls[0] == 4
