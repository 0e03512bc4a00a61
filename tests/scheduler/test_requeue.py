"""The requeue plugin: an admitted gang that cannot be placed gives its admission back once it
has stood still for ``admissionTimeout`` while a PodGroup it may keep out waits for admission;
it is held out of admission for a doubling backoff (unless it could start on the idle nodes
now) and then tried after its queue's other pending PodGroups (plugins/requeue)."""

from __future__ import annotations

import pytest

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.scheduler import Decisions, Scheduler, apply_decisions, load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.framework.admissions import Admissions
from batch.scheduler.framework.feasibility import starts_now
from batch.scheduler.framework.session import Session

from .evict_util import running
from .util import BASIC, NOW, cluster, gang

REQUEUE = BASIC.replace(
    "  - name: gang\n",
    "  - name: requeue\n    arguments: {admissionTimeout: 60s}\n  - name: gang\n",
)


def _fragmented() -> ClusterCache:
    """Two 4-cpu nodes, each half used: 4 cpus free, 2 + 2. ``big`` (one 4-cpu pod) fits the
    overcommit budget (9.6 - 4 in use) but no node; ``small`` (2 x 1 cpu) fits a node, but
    not the budget once ``big`` holds 4 of it."""
    c = cluster(2, cpu="4")
    running(c, "held", ["n0", "n1"], per_node=1, cpu="2")
    gang(c, "big", 1, phase="Pending", cpu="4", min_resources={"cpu": "4"})
    gang(
        c,
        "small",
        2,
        phase="Pending",
        cpu="1",
        created="2026-01-01T00:01:00Z",
        min_resources={"cpu": "2"},
    )
    return c


def _session(sched: Scheduler, now: float) -> Decisions:
    """One session, its binds assumed and its PodGroup phases read back, as the service does."""
    d = sched.run_once(now)
    apply_decisions(sched.cache, d)
    for (ns, name), status in d.podgroup_status.items():
        sched.cache.assume_phase(f"{ns}/{name}", status["phase"])
    return d


def _phase(d: Decisions, name: str) -> str:
    return str(d.podgroup_status[("default", name)]["phase"])


def test_a_gang_that_cannot_start_gives_its_admission_back_after_the_timeout() -> None:
    sched = Scheduler(_fragmented(), load_config(REQUEUE))
    d = _session(sched, NOW)
    assert (_phase(d, "big"), _phase(d, "small")) == ("Inqueue", "Pending")
    assert "overused" in d.pending_reasons["default/small"].message
    assert sched.next_change(NOW) == pytest.approx(NOW + 60)
    d = _session(sched, NOW + 59)
    assert (_phase(d, "big"), _phase(d, "small")) == ("Inqueue", "Pending")
    d = _session(sched, NOW + 60)
    assert _phase(d, "big") == "Pending"
    why = d.pending_reasons["default/big"]
    assert why.kind == "Requeued" and "admission given back after 1m" in why.message
    assert [e.reason for e in d.events if e.name == "big"].count("Requeued") == 1
    d = _session(sched, NOW + 61)  # big is held out of admission: small is admitted
    assert sorted(b.name for b in d.binds) == ["small-0", "small-1"]
    assert _phase(d, "big") == "Pending"
    assert (
        "not admitted again before 2027-01-15T08:02:00Z" in d.pending_reasons["default/big"].message
    )
    assert sched.next_change(NOW + 61) == pytest.approx(NOW + 120)  # the hold ends
    d = _session(sched, NOW + 120)  # put to admission again: its 4 no longer fit the budget
    assert _phase(d, "big") == "Pending"
    assert "overused" in d.pending_reasons["default/big"].message


def test_a_held_gang_that_could_start_now_is_put_to_admission_before_its_hold_ends() -> None:
    sched = Scheduler(_fragmented(), load_config(REQUEUE))
    _session(sched, NOW)
    d = _session(sched, NOW + 60)
    assert d.pending_reasons["default/big"].details["held_until"] == NOW + 120
    pod = f.pod("held-0", group="held", cpu="2", node_name="n0", phase="Running")
    sched.cache.apply("Pod", "DELETED", pod)
    d = _session(sched, NOW + 61)  # n0 is idle: big could start there
    assert _phase(d, "big") in ("Inqueue", "Running")
    assert "default/big" not in Admissions.of(sched.cache).held


def test_a_gang_of_another_queue_admitted_first_is_held_back_longer_each_time() -> None:
    """``big`` (queue a, alone) comes first in queue order and stands still; ``small`` (queue
    b) is refused by overcommit's budget. Given back without a hold, ``big`` would be admitted
    again at once and ``small`` never: the hold lets ``small`` in. A second give-back without
    having moved in between holds twice as long."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "held", ["n0", "n1"], per_node=1, cpu="2", queue="b")
    gang(c, "big", 1, phase="Pending", cpu="4", queue="a", min_resources={"cpu": "4"})
    sched = Scheduler(c, load_config(REQUEUE))
    assert _phase(_session(sched, NOW), "big") == "Inqueue"
    gang(c, "small", 2, phase="Pending", cpu="1", queue="b", min_resources={"cpu": "2"})
    d = _session(sched, NOW + 1)
    assert d.pending_reasons["default/small"].details["rejected_by"] == "overcommit"
    d = _session(sched, NOW + 60)
    assert d.pending_reasons["default/big"].details["held_until"] == NOW + 120
    d = _session(sched, NOW + 61)
    assert _phase(d, "small") == "Inqueue"  # admitted (b is above its share to place it)
    c.apply("Pod", "DELETED", {"metadata": {"name": "small-0", "namespace": "default"}})
    c.apply("Pod", "DELETED", {"metadata": {"name": "small-1", "namespace": "default"}})
    c.apply("PodGroup", "DELETED", {"metadata": {"name": "small", "namespace": "default"}})
    assert _phase(_session(sched, NOW + 120), "big") == "Inqueue"  # the hold ended
    gang(c, "small2", 2, phase="Pending", cpu="1", queue="b", min_resources={"cpu": "2"})
    _session(sched, NOW + 121)
    d = _session(sched, NOW + 180)
    assert d.pending_reasons["default/big"].details["held_until"] == NOW + 180 + 120


def test_the_admission_is_kept_when_no_waiting_podgroup_could_start_either() -> None:
    """``small`` waits for admission, refused by the budget ``big`` holds, but its 3-cpu pods
    fit no node's 2 idle cpus either: giving ``big``'s admission back would let nothing start
    and only cost ``big`` its place, so it is kept (on a full cluster every waiter is such)."""
    c = _fragmented()
    c.apply("PodGroup", "DELETED", {"metadata": {"name": "small", "namespace": "default"}})
    gang(c, "small", 2, phase="Pending", cpu="3", min_resources={"cpu": "6"})
    sched = Scheduler(c, load_config(REQUEUE))
    for t in (0, 60, 600, 3600):
        d = _session(sched, NOW + t)
        assert (_phase(d, "big"), _phase(d, "small")) == ("Inqueue", "Pending")
        assert d.pending_reasons["default/small"].details["rejected_by"] == "overcommit"


@pytest.mark.parametrize("conf", [BASIC, REQUEUE], ids=["volcano", "requeue"])
def test_without_the_plugin_or_a_waiting_podgroup_the_admission_is_kept(conf: str) -> None:
    """Volcano's enqueue keeps the admission for ever; the plugin keeps it while nobody waits."""
    c = _fragmented()
    if conf == REQUEUE:
        c.apply("PodGroup", "DELETED", {"metadata": {"name": "small", "namespace": "default"}})
    sched = Scheduler(c, load_config(conf))
    for t in (0, 60, 600, 3600):
        d = _session(sched, NOW + t)
        assert _phase(d, "big") == "Inqueue"
        assert not d.binds


def test_a_gang_pipelined_on_resources_being_released_keeps_its_admission() -> None:
    """The timer counts from the last session that found the gang ready or pipelined: while
    ``held``'s pod on n0 is being deleted, ``big`` is pipelined there and is never given back,
    though ``small`` waits for admission; once n0's pod is gone it binds."""
    c = _fragmented()
    pod = f.pod("held-0", group="held", cpu="2", node_name="n0", phase="Running", deleting=True)
    c.apply("Pod", "MODIFIED", pod)
    sched = Scheduler(c, load_config(REQUEUE))
    for t in range(0, 600, 30):  # sessions with nothing new reuse the last decisions
        d = _session(sched, NOW + t)
        assert _phase(d, "big") == "Inqueue", t
        assert [p.name for p in d.pipelines] == ["big-0"], t
    assert Admissions.of(c).since["default/big"] >= NOW + 540  # timed from the last session
    c.apply("Pod", "DELETED", pod)
    d = _session(sched, NOW + 600)
    assert ("big-0", "n0") in [(b.name, b.node) for b in d.binds]


@pytest.mark.parametrize(("cpus", "starts"), [(("2", "2"), True), (("3", "1"), False)])
def test_starts_now_places_pods_of_several_requests_on_the_idle_nodes(
    cpus: tuple[str, str], starts: bool
) -> None:
    """Two nodes with 2 idle cpus each: pods of 2 + 2 cpus start now, of 3 + 1 do not."""
    c = cluster(2, cpu="4")
    running(c, "held", ["n0", "n1"], per_node=1, cpu="2")
    gang(c, "g", 0, min_member=2)
    for i, cpu in enumerate(cpus):
        c.apply("Pod", "ADDED", f.pod(f"g-{i}", group="g", cpu=cpu, memory=f"{i + 1}Gi"))
    ssn = open_session(c, load_config(BASIC), now=NOW)
    try:
        assert starts_now(ssn, ssn.jobs["default/g"]) is starts
    finally:
        ssn.release()


@pytest.mark.parametrize(
    ("tasks", "cpus", "starts"),
    [({"w": 2}, "4", True), ({"w": 2}, "6", False), ({"a": 1, "b": 1}, "4", False)],
)
def test_starts_now_counts_a_gang_without_pods_as_its_one_task_share_of_min_resources(
    tasks: dict[str, int], cpus: str, starts: bool
) -> None:
    """A VCJob's PodGroup waits for admission before its pods exist: 2 pods sharing 4 cpus
    start on the two nodes' 2 + 2 idle cpus, sharing 6 do not, and a gang of two tasks is not
    guessed at."""
    c = cluster(2, cpu="4")
    running(c, "held", ["n0", "n1"], per_node=1, cpu="2")
    pg = f.podgroup("g", min_member=2, min_resources={"cpu": cpus}, min_task_member=tasks)
    c.apply("PodGroup", "ADDED", pg)
    ssn = open_session(c, load_config(BASIC), now=NOW)
    try:
        assert starts_now(ssn, ssn.jobs["default/g"]) is starts
    finally:
        ssn.release()


def test_refused_podgroups_of_one_shape_are_judged_once_a_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fifty waiters of one shape, none of which could start: one ``starts_now`` a session,
    not one per waiter and per overdue admission (thousands of refused single pods)."""
    from batch.scheduler.plugins import requeue

    c = _fragmented()
    c.apply("PodGroup", "DELETED", {"metadata": {"name": "small", "namespace": "default"}})
    for i in range(50):
        gang(c, f"w{i}", 1, phase="Pending", cpu="3", min_resources={"cpu": "3"})
    calls: list[str] = []

    def counted(ssn: Session, job: JobInfo) -> bool:
        calls.append(job.uid)
        return starts_now(ssn, job)

    monkeypatch.setattr(requeue, "starts_now", counted)
    sched = Scheduler(c, load_config(REQUEUE))
    _session(sched, NOW)
    d = _session(sched, NOW + 60)
    assert _phase(d, "big") == "Inqueue"
    assert len(calls) == 1
