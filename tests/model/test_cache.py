"""ClusterCache: incremental accounting from raw watch events."""

from __future__ import annotations

import numpy as np
import pytest

from batch.model import fixtures as f
from batch.model.cache import CacheError, ClusterCache
from batch.model.status import TaskStatus


def used(c: ClusterCache, node: str, res: str) -> int:
    return int(c.nodes.used[c.resources.index(res), c.nodes.by_name[node]])


def test_pods_of_any_scheduler_consume_capacity_but_only_ours_are_tasks() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="4"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod("other", scheduler="default-scheduler", node_name="n0", phase="Running", cpu="1500m"),
    )
    c.apply("Pod", "ADDED", f.pod("ours", group="pg", cpu="1"))
    assert used(c, "n0", "cpu") == 1500
    assert used(c, "n0", "pods") == 1
    assert c.tasks["uid-default-other"].job_id is None
    assert c.tasks["uid-default-ours"].job_id == "default/pg"
    # a pod of ours without the group annotation joins no job
    c.apply("Pod", "ADDED", f.pod("loose", cpu="1"))
    assert c.tasks["uid-default-loose"].job_id is None


def test_modify_and_delete_reverse_exactly() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="4"))
    p = f.pod("a", node_name="n0", phase="Running", cpu="1", group="pg")
    c.apply("Pod", "ADDED", p)
    p2 = f.pod("a", node_name="n0", phase="Running", cpu="2", group="pg")
    c.apply("Pod", "MODIFIED", p2)
    assert used(c, "n0", "cpu") == 2000
    c.apply("Pod", "MODIFIED", f.pod("a", node_name="n0", phase="Succeeded", cpu="2", group="pg"))
    assert used(c, "n0", "cpu") == 0  # terminated pods hold nothing
    c.apply("Pod", "DELETED", p2)
    assert used(c, "n0", "cpu") == 0 and used(c, "n0", "pods") == 0
    assert "default/pg" not in c.jobs


def test_releasing_and_pods_on_unknown_nodes() -> None:
    c = ClusterCache()
    c.apply("Pod", "ADDED", f.pod("a", node_name="late", phase="Running", cpu="1", deleting=True))
    c.apply("Node", "ADDED", f.node("late", cpu="4"))
    idx = c.nodes.by_name["late"]
    cpu = c.resources.index("cpu")
    assert c.nodes.used[cpu, idx] == 1000 and c.nodes.releasing[cpu, idx] == 1000
    assert c.tasks["uid-default-a"].status is TaskStatus.RELEASING
    c.apply("Node", "DELETED", f.node("late"))
    c.apply("Node", "ADDED", f.node("late", cpu="4"))
    assert c.nodes.used[cpu, c.nodes.by_name["late"]] == 1000


def test_assume_bind_and_bind_failed() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="4"))
    c.apply("PodGroup", "ADDED", f.podgroup("pg"))
    p = f.pod("a", group="pg", cpu="1")
    c.apply("Pod", "ADDED", p)
    c.assume_bind("uid-default-a", "n0")
    assert c.tasks["uid-default-a"].status is TaskStatus.BINDING
    assert used(c, "n0", "cpu") == 1000
    c.apply("Pod", "MODIFIED", p)  # watch still shows it unbound: stays Binding
    assert c.tasks["uid-default-a"].status is TaskStatus.BINDING
    c.bind_failed("uid-default-a")
    assert c.tasks["uid-default-a"].status is TaskStatus.PENDING
    assert used(c, "n0", "cpu") == 0
    c.assume_bind("uid-default-a", "n0")
    c.apply("Pod", "MODIFIED", f.pod("a", group="pg", cpu="1", node_name="n0"))
    assert c.tasks["uid-default-a"].status is TaskStatus.BOUND
    assert not c.assumed
    job = c.jobs["default/pg"]
    assert job.counts[TaskStatus.BOUND] == 1 and job.counts[TaskStatus.PENDING] == 0


def test_assume_evict_and_evict_failed() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="4"))
    c.apply("PodGroup", "ADDED", f.podgroup("pg"))
    running = f.pod("a", group="pg", cpu="1", node_name="n0", phase="Running")
    c.apply("Pod", "ADDED", running)
    c.assume_evict("uid-default-a")
    assert c.tasks["uid-default-a"].status is TaskStatus.RELEASING
    c.apply("Pod", "MODIFIED", running)  # e.g. the DisruptionTarget condition: still Releasing
    assert c.tasks["uid-default-a"].status is TaskStatus.RELEASING
    generation = c.generation
    c.evict_failed("uid-default-a")  # the eviction was refused: the pod runs on
    assert c.tasks["uid-default-a"].status is TaskStatus.RUNNING
    assert not c.assumed_evict and c.generation > generation
    idx = c.nodes.by_name["n0"]
    cpu = c.resources.index("cpu")
    assert c.nodes.used[cpu, idx] == 1000 and c.nodes.releasing[cpu, idx] == 0
    job = c.jobs["default/pg"]
    assert job.counts[TaskStatus.RUNNING] == 1 and job.counts[TaskStatus.RELEASING] == 0
    c.evict_failed("uid-default-a")  # nothing assumed: no-op
    assert c.tasks["uid-default-a"].status is TaskStatus.RUNNING


def test_extended_resources_grow_dimensions() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", gpu=8))
    for i in range(20):
        c.apply("Node", "ADDED", f.node(f"x{i}", extra={f"example.com/r{i}": 4}))
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "a",
            node_name="x19",
            phase="Running",
            spec={"containers": [{"resources": {"requests": {"example.com/r19": "2"}}}]},
        ),
    )
    assert used(c, "x19", "example.com/r19") == 2000  # milli-units
    assert c.nodes.alloc.shape[0] == c.resources.capacity >= 23
    assert int(c.nodes.alloc[c.resources.index("nvidia.com/gpu"), 0]) == 8000


def test_not_ready_nodes_are_not_schedulable_and_bad_events_raise() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", ready=False))
    assert not c.nodes.schedulable[c.nodes.by_name["n0"]]
    with pytest.raises(CacheError):
        c.apply("Deployment", "ADDED", {})
    with pytest.raises(CacheError):
        c.apply("Pod", "BOOKMARK", {})


def test_init_containers_and_limits_defaulting() -> None:
    c = ClusterCache()
    spec = {
        "containers": [{"resources": {"limits": {"cpu": "2"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
    }
    c.apply("Pod", "ADDED", f.pod("a", spec=spec))
    t = c.tasks["uid-default-a"]
    cpu, mem = c.resources.index("cpu"), c.resources.index("memory")
    assert t.req[cpu] == 2000 and t.req[mem] == 0
    assert t.init_req[cpu] == 3000 and t.init_req[mem] == 1 << 30
    assert np.array_equal(t.req, c.tasks["uid-default-a"].template.req)


def test_bad_quantity_is_a_clear_error_and_leaves_the_cache_alone() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="4"))
    c.apply("Pod", "ADDED", f.pod("a", node_name="n0", phase="Running", cpu="1"))
    with pytest.raises(CacheError) as exc:
        c.apply("Pod", "MODIFIED", f.pod("a", node_name="n0", phase="Running", cpu="lots"))
    assert "Pod default/a" in str(exc.value) and "cpu" in str(exc.value)
    assert used(c, "n0", "cpu") == 1000
