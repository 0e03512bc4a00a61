"""Issue 19.5: enqueue must not admit a gang no node shape can ever hold.

100 pods of 16 GPUs on 8-GPU nodes were enqueued against the queue's totals and held its whole
share, keeping a feasible 4-GPU gang Pending for minutes. Such a gang now stays Pending with a
reason naming the resource, and takes no share of the queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from batch.scheduler.framework import feasibility

from .util import NOW, cluster, gang, run

EARLY = "2026-01-01T00:00:00Z"
LATE = "2026-01-01T00:10:00Z"


def test_a_pod_larger_than_every_node_is_not_enqueued_and_does_not_starve_others() -> None:
    c = cluster(2, cpu="64", memory="256Gi", gpu=8)
    for i in range(100):
        gang(
            c,
            f"huge-{i}",
            1,
            phase="Pending",
            gpu=16,
            created=EARLY,
            min_resources={"nvidia.com/gpu": "16"},
        )
    gang(c, "small", 1, phase="Pending", gpu=4, created=LATE, min_resources={"nvidia.com/gpu": "4"})
    d = run(c, now=NOW)
    phases = {k[1]: v["phase"] for k, v in d.podgroup_status.items()}
    assert phases.get("small") == "Inqueue", phases.get("small")
    assert all(phases.get(f"huge-{i}", "Pending") == "Pending" for i in range(100))
    reason = d.pending_reasons["default/huge-0"]
    assert reason.kind == "NeverFits"
    assert "nvidia.com/gpu" in reason.message and "16" in reason.message and "8" in reason.message
    cond = d.podgroup_status[("default", "huge-0")]["conditions"][-1]
    assert cond["type"] == "Unschedulable" and "can never fit" in cond["message"]


def test_a_gang_that_fits_the_largest_node_is_still_enqueued() -> None:
    c = cluster(1, cpu="64", memory="256Gi", gpu=8)
    gang(c, "fits", 1, phase="Pending", gpu=8, min_resources={"nvidia.com/gpu": "8"})
    d = run(c, now=NOW)
    assert d.podgroup_status[("default", "fits")]["phase"] in ("Inqueue", "Running")


def test_jobs_of_one_shape_that_fit_are_judged_once_a_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 33: the first session at 20,000 single pods judged 20,000 identical jobs one by
    one ("can it ever fit?"), a tenth of the session before the first bind. A job whose queue,
    gang size, minResources and pod shapes were judged to fit this session fits unjudged; one
    that does not fit is still judged (and told why) on its own. Counts only."""
    c = cluster(2, cpu="64", memory="256Gi", gpu=8)
    for i in range(30):
        gang(c, f"one-{i}", 1, phase="Pending", gpu=1, created=EARLY)
    for i in range(3):
        gang(c, f"huge-{i}", 1, phase="Pending", gpu=16, created=LATE)
    judged: list[str] = []
    by_node = feasibility._by_node

    def counted(ssn: Any, job: Any, largest: Any, shapes: Any) -> Any:
        judged.append(job.name)
        return by_node(ssn, job, largest, shapes)

    monkeypatch.setattr(feasibility, "_by_node", counted)
    d = run(c, now=NOW)
    assert sorted(judged) == ["huge-0", "huge-1", "huge-2", "one-0"], judged
    assert all(d.pending_reasons[f"default/huge-{i}"].kind == "NeverFits" for i in range(3))
    assert sum(1 for b in d.binds if b.name.startswith("one-")) == 16  # 2 nodes x 8 GPUs
