"""allocate/enqueue/backfill semantics on small in-memory clusters
(docs/volcano-semantics.md#allocate)."""

from __future__ import annotations

from batch.model import fixtures as f
from batch.model.status import TaskStatus

from .util import bound_jobs, cluster, gang, run


def test_gang_is_all_or_nothing() -> None:
    c = cluster(2, cpu="4")
    gang(c, "big", 3, cpu="2500m")  # 7.5 cpu fits the total but only one per node
    gang(c, "small", 2, cpu="1")
    d = run(c)
    assert bound_jobs(d) == {"default/small": 2}
    r = d.pending_reasons["default/big"]
    assert r.kind == "GangShort" and r.short_by == 1
    assert "0/2 nodes are available: 2 Insufficient cpu." in r.message
    st = d.podgroup_status[("default", "big")]
    assert st["phase"] == "Inqueue"
    cond = st["conditions"][0]
    assert cond["type"] == "Unschedulable" and cond["reason"] == "NotEnoughResources"
    assert cond["message"].startswith("3/3 tasks in gang unschedulable: ")
    assert any(e.reason == "Unschedulable" and e.name == "big" for e in d.events)


def test_session_leaves_cache_untouched_and_is_deterministic() -> None:
    c = cluster(3, cpu="4")
    gang(c, "a", 3, cpu="2")
    gang(c, "b", 2, cpu="3")
    before = (c.nodes.used.copy(), {u: t.status for u, t in c.tasks.items()})
    d1 = run(c)
    assert (c.nodes.used == before[0]).all()
    assert {u: t.status for u, t in c.tasks.items()} == before[1]
    d2 = run(c)
    assert d1.binds == d2.binds
    assert d1.podgroup_status == d2.podgroup_status


def test_enqueue_gates_pending_podgroups_and_allocate_skips_them() -> None:
    c = cluster(1, cpu="4")
    gang(c, "fits", 1, phase="Pending", min_resources={"cpu": "2"}, cpu="2")
    gang(c, "toobig", 1, phase="Pending", min_resources={"cpu": "40"}, cpu="2")
    d = run(c)
    assert d.podgroup_status[("default", "fits")]["phase"] == "Inqueue"
    assert bound_jobs(d) == {"default/fits": 1}
    assert d.podgroup_status[("default", "toobig")]["phase"] == "Pending"
    r = d.pending_reasons["default/toobig"]
    assert r.kind == "NeverFits"  # 40 cpu on a 4-cpu cluster: not even put to the queue's vote
    assert r.message == "can never fit: the gang asks for 40 cpu, the cluster has 4"
    # without enqueue configured allocate promotes pending jobs itself
    conf = """
actions: "allocate"
tiers:
- plugins: [{name: gang}, {name: predicates}, {name: proportion}]
"""
    d = run(c, conf)
    assert bound_jobs(d) == {"default/fits": 1, "default/toobig": 1} or bound_jobs(d) == {
        "default/fits": 1
    }


def test_job_order_priority_then_creation() -> None:
    c = cluster(1, cpu="2")
    c.apply("PriorityClass", "ADDED", f.priority_class("high", 1000))
    gang(c, "old", 1, cpu="2", created="2026-01-01T00:00:00Z")
    gang(c, "new", 1, cpu="2", created="2026-01-02T00:00:00Z")
    assert bound_jobs(run(c)) == {"default/old": 1}
    gang(c, "vip", 1, cpu="2", created="2026-01-03T00:00:00Z", priority_class="high")
    assert bound_jobs(run(c)) == {"default/vip": 1}


def test_elastic_job_places_beyond_min_available() -> None:
    c = cluster(2, cpu="4")
    gang(c, "el", 6, min_member=2, cpu="1")
    d = run(c)
    assert bound_jobs(d) == {"default/el": 6}
    assert "default/el" not in d.pending_reasons


def test_pipelining_onto_releasing_resources() -> None:
    c = cluster(1, cpu="4")
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "dying",
            node_name="n0",
            phase="Running",
            cpu="4",
            deleting=True,
            scheduler="default-scheduler",
        ),
    )
    gang(c, "next", 1, cpu="2")
    d = run(c)
    assert not d.binds
    assert [p.name for p in d.pipelines] == ["next-0"]
    assert d.pending_reasons["default/next"].kind == "Pipelined"


def test_best_effort_tasks_go_to_backfill() -> None:
    c = cluster(1, cpu="1", pods=3)
    gang(c, "be", 4, min_member=1, cpu=None, memory=None)
    d = run(c)
    assert len(d.binds) == 3  # pod count limit
    assert bound_jobs(d) == {"default/be": 3}


def test_best_effort_role_does_not_hold_its_gang_back() -> None:
    # Volcano's MindSpore example: a best-effort master (no requests) and two 1-GPU workers,
    # minAvailable 3 with minTaskMember per role. Pending best-effort tasks count as ready for
    # the gang and per role (CheckTaskReady), so the workers bind and backfill places the master.
    c = cluster(1, gpu=4)
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("ms", min_member=3, phase="Inqueue", min_task_member={"master": 1, "worker": 2}),
    )
    c.apply("Pod", "ADDED", f.pod("ms-m", group="ms", role="master", cpu=None, memory=None))
    for i in range(2):
        c.apply("Pod", "ADDED", f.pod(f"ms-w{i}", group="ms", role="worker", gpu=1))
    d = run(c)
    assert sorted(b.name for b in d.binds) == ["ms-m", "ms-w0", "ms-w1"]
    assert "default/ms" not in d.pending_reasons


def test_invalid_job_and_missing_queue() -> None:
    c = cluster(2)
    gang(c, "short", 2, min_member=3)
    gang(c, "lost", 1, queue="nope")
    d = run(c)
    assert d.pending_reasons["default/short"].kind == "InvalidJob"
    assert "valid: 2, min: 3" in d.pending_reasons["default/short"].message
    assert d.pending_reasons["default/lost"].kind == "QueueMissing"
    assert ("default", "lost") not in d.podgroup_status


def test_commit_then_assume_bind_then_next_session_sees_running() -> None:
    from batch.scheduler import apply_decisions

    c = cluster(2, cpu="4")
    gang(c, "g", 2, cpu="3")
    d = run(c)
    assert len(d.binds) == 2
    apply_decisions(c, d)
    assert all(t.status is TaskStatus.BINDING for t in c.tasks.values())
    d2 = run(c)
    assert not d2.binds
    for b in d.binds:
        c.apply(
            "Pod", "MODIFIED", f.pod(b.name, group="g", cpu="3", node_name=b.node, phase="Running")
        )
    d3 = run(c)
    assert d3.podgroup_status[("default", "g")]["phase"] == "Running"
    assert d3.podgroup_status[("default", "g")]["running"] == 2
    assert d3.queue_status["default"]["allocated"]["cpu"] == "6"
    assert d3.queue_status["root"]["allocated"]["cpu"] == "6"
    assert d3.queue_status["default"]["running"] == 1


def test_unknown_phase_when_running_tasks_and_unschedulable() -> None:
    c = cluster(1, cpu="4")
    c.apply("PodGroup", "ADDED", f.podgroup("g", min_member=2, phase="Running"))
    c.apply("Pod", "ADDED", f.pod("g-0", group="g", cpu="3", node_name="n0", phase="Running"))
    c.apply("Pod", "ADDED", f.pod("g-1", group="g", cpu="3"))
    d = run(c)
    assert d.podgroup_status[("default", "g")]["phase"] == "Unknown"


def test_min_task_member_per_role() -> None:
    c = cluster(1, cpu="4")
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup(
            "mpi", min_member=2, phase="Inqueue", min_task_member={"master": 1, "worker": 1}
        ),
    )
    c.apply("Pod", "ADDED", f.pod("mpi-w0", group="mpi", role="worker", cpu="1"))
    c.apply("Pod", "ADDED", f.pod("mpi-w1", group="mpi", role="worker", cpu="1"))
    d = run(c)
    # two workers would satisfy minMember 2, but the master role is missing
    assert not d.binds
    assert d.pending_reasons["default/mpi"].kind == "InvalidJob"
    c.apply("Pod", "ADDED", f.pod("mpi-m0", group="mpi", role="master", cpu="3"))
    d = run(c)
    assert sorted(b.name for b in d.binds) == ["mpi-m0", "mpi-w0"]


def test_task_order_by_pod_priority_then_index() -> None:
    c = cluster(1, cpu="2")
    c.apply("PodGroup", "ADDED", f.podgroup("j", min_member=1, phase="Inqueue"))
    c.apply("Pod", "ADDED", f.pod("j-low", group="j", cpu="2", priority=1))
    c.apply("Pod", "ADDED", f.pod("j-high", group="j", cpu="2", priority=100))
    d = run(c)
    assert [b.name for b in d.binds] == ["j-high"]


def test_failed_attempt_memo_respects_changes_in_between() -> None:
    from batch.scheduler.actions.allocate import Allocate

    c = cluster(0)
    c.apply("Node", "ADDED", f.node("n0", cpu="2", pods=1))
    c.apply("Node", "ADDED", f.node("n1", cpu="4"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod("other", node_name="n1", phase="Running", cpu="2", scheduler="default-scheduler"),
    )
    gang(c, "a", 1, cpu="3", created="2026-01-01T00:00:01Z")
    gang(
        c,
        "b",
        1,
        cpu="1",
        created="2026-01-01T00:00:02Z",
        spec={"nodeSelector": {"kubernetes.io/hostname": "n0"}},
    )
    gang(c, "c", 1, cpu="3", created="2026-01-01T00:00:03Z")
    d = run(c)
    assert bound_jobs(d) == {"default/b": 1}
    assert d.pending_reasons["default/a"].message == "0/2 nodes are available: 2 Insufficient cpu."
    # kube-scheduler sorts the "<count> <reason>" strings
    assert d.pending_reasons["default/c"].message == (
        "0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu."
    )
    Allocate.use_memo = False
    try:
        d2 = run(c)
    finally:
        Allocate.use_memo = True
    assert {k: v.message for k, v in d.pending_reasons.items()} == {
        k: v.message for k, v in d2.pending_reasons.items()
    }


def test_backfill_unpipelines_best_effort_tasks_pipelined_earlier() -> None:
    from batch.scheduler import TEPHRA_DEFAULT_CONFIG

    c = cluster(1, cpu="1", pods=2)
    for i in range(3):
        gang(c, f"be{i}", 1, cpu=None, memory=None, created=f"2026-01-01T00:00:0{i}Z")
    d = run(c, TEPHRA_DEFAULT_CONFIG)  # preempt runs before backfill in Tephra's default
    assert len(d.binds) == 2 and not d.pipelines
    assert d.pending_reasons["default/be2"].message == "0/1 nodes are available: 1 Too many pods."


def test_queue_status_shape_is_tephras_own() -> None:
    """A listed departure (docs/volcano-semantics.md#compatibility): Tephra's queue status names
    every PodGroup phase count, zeros included, and `allocated` without `pods`; Volcano v1.10
    omits zero counts and counts the queue's pods in `allocated.pods`."""
    c = cluster(1, queues=("default", "idle"))
    gang(c, "g", 2, cpu="1")
    d = run(c)
    assert d.queue_status["idle"] == {
        "allocated": {"cpu": "0", "memory": "0"},
        **dict.fromkeys(("pending", "inqueue", "running", "unknown", "completed"), 0),
    }
    assert "pods" not in d.queue_status["default"]["allocated"]
