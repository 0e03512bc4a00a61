"""Issue 20.4: a job whose PriorityClass does not exist got a 403 on every pod create while `job
why` said NotEnoughResources. The controller now creates no pods, says why on the job's status
and on its PodGroup, and goes on once the PriorityClass exists."""

from __future__ import annotations

from batch.controllers import constants as c
from batch.controllers.priorities import MISS_RELIST

from .conftest import Harness, make_job, task


def _why(h: Harness) -> list[tuple[str, str, str]]:
    return [(e.ref.kind, e.reason, e.message) for e in h.cluster.events]


def test_a_missing_priority_class_is_named_and_no_pod_is_created() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], priorityClassName="gold"))
    h.cluster.priority_values = {"silver": 10}
    h.step()
    h.admit()
    assert h.pods() == []
    state = h.status["state"]
    assert h.phase == c.PENDING
    assert state["reason"] == "PriorityClassNotFound"
    assert 'PriorityClass "gold"' in state["message"]
    found = [w for w in _why(h) if w[1] == "PriorityClassNotFound"]
    assert {kind for kind, _r, _m in found} == {"Job", "PodGroup"}
    result = h.step(1)
    assert result.requeue_after == MISS_RELIST  # when the controller reads a missing class again
    h.cluster.priority_values["gold"] = 100
    h.step(MISS_RELIST)
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]
    assert h.status["state"].get("reason") != "PriorityClassNotFound"


def test_a_tasks_own_missing_class_counts_and_unknown_classes_assume_nothing() -> None:
    worker = task("worker", 1)
    worker["template"]["spec"]["priorityClassName"] = "bronze"
    h = Harness(make_job(tasks=[worker]))
    h.cluster.priority_values = {}
    h.step()
    h.admit()
    assert h.pods() == [] and 'PriorityClass "bronze"' in h.status["state"]["message"]
    h2 = Harness(make_job(tasks=[task("worker", 1)], priorityClassName="gold"))
    h2.step()  # priority_values unknown (None): pods are created and the API server decides
    h2.admit()
    assert h2.pod_names() == ["job-worker-0"]
