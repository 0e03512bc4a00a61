"""Fair admission and overcommit's budget (issue 17): gangs a queue was admitted to beyond its
fair share must not keep a queue below its share out.

Philly, first 200 jobs at 10 %: one queue's 8- and 16-GPU gangs, admitted while the cluster was
its own, held overcommit's whole budget; when another queue's burst of one-GPU jobs arrived it
was not even admitted, so no action could act for it for days.
"""

from __future__ import annotations

import pytest

from batch.model import fixtures as f

from .util import BASIC, NOW, cluster, gang, run

FAIR = BASIC.replace(
    "  - name: proportion\n", "  - name: proportion\n    arguments: {fairShare: true}\n"
)


def _full_budget() -> object:
    """10 cpus: queue b runs 10 and was admitted to 2 more (overcommit 1.2: 12, all spent);
    queue a (same weight) submits a 1-cpu gang."""
    c = cluster(1, cpu="10", queues=("a", "b"))
    gang(c, "b-running", 10, queue="b", phase="Running", cpu="1", node_name="n0")
    for i in range(10):  # the pods run (the helper makes them Pending)
        pod = f.pod(f"b-running-{i}", group="b-running", cpu="1", node_name="n0", phase="Running")
        c.apply("Pod", "MODIFIED", pod)
    gang(c, "b-admitted", 2, queue="b", phase="Inqueue", cpu="1", min_resources={"cpu": "2"})
    c.apply("PodGroup", "ADDED", f.podgroup("a-job", queue="a", min_resources={"cpu": "1"}))
    return c


@pytest.mark.parametrize(
    ("conf", "admitted"), [(FAIR, True), (BASIC, False)], ids=["fair", "volcano"]
)
def test_a_queue_below_its_share_is_admitted_past_what_others_hold_beyond_theirs(
    conf: str, admitted: bool
) -> None:
    d = run(_full_budget(), conf, now=NOW)  # type: ignore[arg-type]
    phase = d.podgroup_status[("default", "a-job")]["phase"]
    assert phase == ("Inqueue" if admitted else "Pending")
    if not admitted:  # Volcano's budget: b's admitted gang holds the rest of it
        assert "resource in cluster is overused" in d.pending_reasons["default/a-job"].message
