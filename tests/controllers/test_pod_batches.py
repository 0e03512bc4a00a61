"""The job controller's bounded work (issue 19, item 1): pods come in batches, a reconcile never
holds more than one batch of new pods, and a job over the size limits is never expanded."""

from __future__ import annotations

import tracemalloc
from typing import Any

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.controllers import constants as c
from batch.controllers.effects import CreateObject, EmitEvent, PatchStatus
from batch.controllers.job import reconcile_job
from tests.work import lines_run

from .conftest import Harness, make_job, task

HUGE = 100_000_000
RAISED = AdmissionLimits(pods_per_job=HUGE, replicas_per_task=HUGE)
#: lines of batch/ one reconcile of a batch of new pods may run (about 58,000 measured, 2026-12);
#: a loop over every replica of a HUGE job runs far more and is stopped at the cap
LINES_PER_BATCH = 1_000_000


def _admitted(
    job: dict[str, Any], limits: AdmissionLimits = DEFAULT_LIMITS
) -> tuple[Harness, dict[str, Any], dict[str, Any]]:
    """A job initialised (Pending) with its PodGroup admitted (Inqueue), before any pod."""
    h = Harness(job)
    h.cluster.apply(reconcile_job(h.job, [], None, now=h.clock.now, limits=limits).actions)
    h.cluster.set_podgroup_phase(h.job, "Inqueue")
    stored = h.cluster.get("Job", h.ns, h.name)
    pg = h.podgroup()
    assert stored is not None and pg is not None
    return h, stored, pg


def _pods(result: Any) -> list[str]:
    return [a.body["metadata"]["name"] for a in result.of_type(CreateObject) if a.ref.kind == "Pod"]


def test_the_plan_holds_one_batch_and_asks_for_the_rest() -> None:
    _h, job, pg = _admitted(make_job(tasks=[task("ps", 2), task("worker", 5_000)]))
    result = reconcile_job(job, [], pg, now=_h.clock.now, pod_batch=100)
    names = _pods(result)
    assert len(names) == 100
    assert names[:3] == ["job-ps-0", "job-ps-1", "job-worker-0"]
    assert names[-1] == "job-worker-97"
    assert result.requeue_after == 0


def test_the_next_batches_skip_the_pods_that_exist() -> None:
    h, job, pg = _admitted(make_job(tasks=[task("worker", 10)]))
    first = reconcile_job(job, [], pg, now=h.clock.now, pod_batch=4)
    made = [a.body for a in first.of_type(CreateObject) if a.ref.kind == "Pod"]
    second = reconcile_job(job, made, pg, now=h.clock.now, pod_batch=4)
    assert _pods(second) == [f"job-worker-{i}" for i in range(4, 8)]


def test_every_pod_is_created_in_batches() -> None:
    h, _job, _pg = _admitted(make_job(tasks=[task("worker", 1_250)]))
    h.step()  # reconciles until nothing more is asked now: 3 batches of 500
    assert len(h.pods()) == 1_250


def test_a_hundred_million_replicas_cost_one_batch() -> None:
    # as if admission had been raised (or bypassed): the reconcile still builds one batch only
    h, job, pg = _admitted(make_job(tasks=[task("worker", HUGE)]), RAISED)
    tracemalloc.start()
    try:
        with lines_run(cap=LINES_PER_BATCH) as lines:
            result = reconcile_job(job, [], pg, now=h.clock.now, limits=RAISED)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(_pods(result)) == c.POD_BATCH
    assert peak < 32 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert lines.count > c.POD_BATCH, lines.count  # the count saw the batch being built


def test_a_job_over_the_limits_fails_at_once_and_creates_nothing() -> None:
    h = Harness(make_job(tasks=[task("worker", HUGE)], plugins={"svc": []}))
    result = h.step()
    assert h.phase == c.FAILED
    state = h.status["state"]
    assert state["reason"] == "JobTooLarge" and "limit of 10000 pods per task" in state["message"]
    assert not h.pods() and h.podgroup() is None
    assert not [a for a in result.actions if isinstance(a, CreateObject)]
    assert h.step().of_type(CreateObject) == []


def test_a_job_scaled_over_the_limits_is_left_as_it_is() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    h.start()
    job = h.cluster.get("Job", h.ns, h.name)
    assert job is not None and h.phase == c.RUNNING
    job["spec"]["tasks"][0]["replicas"] = HUGE  # an update that bypassed admission
    result = reconcile_job(job, h.pods(), h.podgroup(), now=h.clock.now)
    assert [type(a) for a in result.actions] == [EmitEvent]
    assert not result.of_type(PatchStatus) and result.requeue_after is None


def test_a_job_with_quantities_kubernetes_cannot_hold_fails_at_once() -> None:
    """Issue 20.2/20.3: `memory: 16Ei`, cpu 2^63-1 or half a GPU, in a job that bypassed
    admission, left it Pending with no status (the scheduler could not account its PodGroup, or
    every pod create was refused). The controller now fails it, saying which quantity."""
    for resources in (
        {"requests": {"memory": "16Ei"}},
        {"limits": {"cpu": "9223372036854775807"}},
        {"limits": {"nvidia.com/gpu": "0.5"}},
    ):
        worker = task("worker", 2)
        worker["template"]["spec"]["containers"][0]["resources"] = resources
        h = Harness(make_job(tasks=[worker]))
        h.step()
        state = h.status["state"]
        assert h.phase == c.FAILED, resources
        assert state["reason"] == "InvalidResources"
        assert next(iter(next(iter(resources.values())))) in state["message"]
        assert not h.pods() and h.podgroup() is None
