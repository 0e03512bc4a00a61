"""Issue 19.2: a status the controller did not write (a `kubectl patch --subresource=status` with
phase `Bogus` or `running: -7`) must not leave the job stuck: it is recomputed, as Volcano's state
machine takes an unknown phase for Pending."""

from __future__ import annotations

from batch.controllers import constants as c

from .conftest import Harness, make_job, task


def _foreign(h: Harness, **status: object) -> None:
    job = h.cluster.get("Job", h.ns, h.name)
    assert job is not None
    job["status"] = {**job["status"], **status}


def test_a_bogus_phase_is_recomputed_and_the_job_completes() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)]))
    h.start()
    assert h.phase == c.RUNNING
    _foreign(h, state={"phase": "Bogus"}, running=-7, succeeded=-1)
    h.step(1)
    assert h.phase in (c.PENDING, c.RUNNING), h.status
    h.step(1)
    assert h.phase == c.RUNNING, h.status
    assert h.status["running"] == 2
    h.cluster.set_job_pods(h.job, "Succeeded", exit_code=0)
    h.step(1)
    h.step(1)
    assert h.phase == c.COMPLETED, h.status
    assert h.status["succeeded"] == 2


def test_a_bogus_phase_before_pods_exist_still_creates_them() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)]))
    h.step()
    _foreign(h, state={"phase": "Bogus"})
    h.admit()
    h.step(1)
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]
