"""JobInfo readiness helpers (volcano-semantics.md#task-status) and their hand-unrolled status
groups."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo, TaskInfo, TaskTemplate
from batch.model.status import READY_STATUS, VALID_STATUS, TaskStatus


def test_unrolled_groups_match_the_status_sets() -> None:
    c = ClusterCache()
    c.apply("PodGroup", "ADDED", f.podgroup("pg", min_member=3))
    for i in range(len(TaskStatus)):
        c.apply("Pod", "ADDED", f.pod(f"p{i}", group="pg"))
    job = c.jobs["default/pg"]
    tasks = list(job.tasks.values())
    for task, status in zip(tasks, TaskStatus, strict=True):
        job.set_status(task, status)
    assert job.ready_task_num() == sum(1 for s in TaskStatus if s in READY_STATUS)
    assert job.valid_task_num() == sum(1 for s in TaskStatus if s in VALID_STATUS)


def test_readiness_helpers() -> None:
    c = ClusterCache()
    c.apply("PodGroup", "ADDED", f.podgroup("pg", min_member=3))
    for i in range(4):
        c.apply("Pod", "ADDED", f.pod(f"p{i}", group="pg"))
    c.apply("Pod", "ADDED", f.pod("be", group="pg", cpu=None, memory=None))
    job = c.jobs["default/pg"]
    t = sorted(job.tasks.values(), key=lambda x: x.name)
    assert job.pending_best_effort == 1 and not job.is_ready() and job.is_starving()
    job.set_status(t[1], TaskStatus.ALLOCATED)
    job.set_status(t[2], TaskStatus.PIPELINED)
    assert not job.is_ready() and job.is_pipelined()  # 1 ready + 1 waiting + 1 best effort
    job.set_status(t[3], TaskStatus.RUNNING)
    assert job.is_ready() and not job.is_starving()
    assert job.allocated[c.resources.index("cpu")] == 2000
    job.set_status(t[3], TaskStatus.PENDING)
    assert job.allocated[c.resources.index("cpu")] == 1000
    assert job.pending_req[c.resources.index("cpu")] == 2000  # p2, p3
    assert job.need_continue_allocating(set()) is True  # 5 tasks, minAvailable 3


def test_restore_status_counts_as_set_status_without_a_new_version() -> None:
    """A rollback moves tasks back with ``restore_status``: the same counters as
    ``set_status``, the version left for ``restore_version`` to put back."""
    c = ClusterCache()
    c.apply("PodGroup", "ADDED", f.podgroup("pg", min_member=2))
    for i in range(3):
        c.apply("Pod", "ADDED", f.pod(f"p{i}", group="pg", cpu="1"))
    job = c.jobs["default/pg"]
    tasks = sorted(job.tasks.values(), key=lambda x: x.name)
    before = (list(job.counts), job.allocated.copy(), job.pending_req.copy(), job.version)
    job.set_status(tasks[0], TaskStatus.ALLOCATED)
    job.set_status(tasks[1], TaskStatus.PIPELINED)
    job.set_status(tasks[0], TaskStatus.BINDING)
    moved = job.version
    assert moved != before[3]
    job.restore_status(tasks[0], TaskStatus.PENDING)
    job.restore_status(tasks[1], TaskStatus.PENDING)
    assert job.version == moved  # restore_version puts the old one back
    job.restore_version(before[3])
    assert list(job.counts) == before[0] and job.version == before[3]
    assert (job.allocated == before[1]).all() and (job.pending_req == before[2]).all()


def _task(uid: str, status: TaskStatus, req: Any) -> TaskInfo:
    tmpl = TaskTemplate(
        key=(uid,),
        fit=req,
        req=req,
        node_selector={},
        required_terms=None,
        preferred_terms=[],
        tolerations=[],
        host_ports=[],
        pod_affinity=[],
        pod_anti_affinity=[],
        namespace="ns",
    )
    return TaskInfo(
        uid=uid,
        namespace="ns",
        name=uid,
        job_id="ns/j",
        status=status,
        node_name="",
        req=req,
        init_req=req,
        template=tmpl,
    )


def _effective_min_resources(job: JobInfo) -> Any:
    """``JobInfo.effective_min_resources`` as first written (the reference)."""
    spec = job.spec_min_resources
    if spec is None or not job.tasks:
        return spec
    left_out = (spec == 0) & (job.total_req > 0)
    left_out[0] = False
    if not left_out.any():
        return spec
    dims = np.flatnonzero(left_out)
    reqs = np.array([t.req[dims] for t in job.tasks.values()], dtype=np.int64)
    least = np.sort(reqs, axis=0)[: max(job.min_available, 1)].sum(axis=0)
    out = spec.copy()
    out[dims] = least
    return out


_amount = st.sampled_from([0, 0, 1, 3])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_amount, min_size=4, max_size=4), min_size=1, max_size=3),
    st.lists(st.lists(_amount, min_size=4, max_size=4), min_size=0, max_size=4),
    st.integers(0, 3),
)
def test_effective_min_resources_is_the_formula(
    specs: list[list[int]], reqs: list[list[int]], min_available: int
) -> None:
    """Through specs replaced one after the other and tasks added one by one, the gang's
    minimum (with its kept zero dimensions) is what the formula gives each time."""
    job = JobInfo(uid="ns/j", namespace="ns", name="j", dims=4, min_available=min_available)
    for i, req in enumerate([[0, 0, 0, 0], *reqs]):
        if i:
            vec = np.array([1, *req[1:]], dtype=np.int64)
            job.add_task(_task(f"t{i}", TaskStatus.PENDING, vec))
        for spec in specs:
            job.spec_min_resources = np.array(spec, dtype=np.int64)
            want = _effective_min_resources(job)
            got = job.effective_min_resources()
            assert (want is None) == (got is None)
            if want is not None and got is not None:
                assert got.tolist() == want.tolist()
                assert (got is job.spec_min_resources) == (want is job.spec_min_resources)
