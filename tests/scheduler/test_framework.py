"""Extension-point combination rules (docs/volcano-semantics.md#tiers) and Statement exactness
(#statement)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from batch.model.info import JobInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session, run_session
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin, register_plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement
from batch.scheduler.framework.votes import ABSTAIN, PERMIT, REJECT

from .evict_util import pending, running
from .util import NOW, cluster, gang


class Voter(Plugin):
    """Test plugin: fixed votes/answers configured through arguments."""

    name: ClassVar[str] = ""

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.vote = arguments.get_int("vote", ABSTAIN)
        self.starving = arguments.get_str("starving", "")
        self.victims = arguments.get_str("victims", "")
        self.order = arguments.get_int("order", 0)

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.add_job_enqueueable_fn(lambda j: self.vote)
        ssn.hooks.add_job_pipelined_fn(lambda j: self.vote)
        if self.starving:
            ssn.hooks.add_job_starving_fn(lambda j: self.starving == "yes")
        if self.victims:
            keep = set(self.victims.split(",")) if self.victims != "none" else set()

            def victims(_: TaskInfo, cands: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
                return [t for t in cands if t.name in keep], PERMIT

            ssn.hooks.add_preemptable_fn(victims)
        if self.order:
            sign = self.order
            ssn.hooks.add_job_order_fn(lambda a, b: sign * ((a.name > b.name) - (a.name < b.name)))


for n in ("va", "vb", "vc"):
    register_plugin(type(f"Voter_{n}", (Voter,), {"name": n}))


def session(tiers: str) -> tuple[Session, JobInfo]:
    c = cluster(1)
    gang(c, "j", 2, phase="Pending", min_resources={"cpu": "1"})
    gang(c, "k", 1, phase="Pending")
    cfg = load_config(f"actions: allocate\ntiers: {tiers}")
    ssn = open_session(c, cfg, now=NOW)
    return ssn, ssn.jobs["default/j"]


@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        # a Permit in tier 1 decides, later rejections are not consulted
        (
            f"[{{plugins: [{{name: va, arguments: {{vote: {PERMIT}}}}}]}},"
            f" {{plugins: [{{name: vb, arguments: {{vote: {REJECT}}}}}]}}]",
            True,
        ),
        # any Reject in a tier wins over a Permit in the same tier
        (
            f"[{{plugins: [{{name: va, arguments: {{vote: {PERMIT}}}}},"
            f" {{name: vb, arguments: {{vote: {REJECT}}}}}]}}]",
            False,
        ),
        # all abstain -> next tier decides
        (
            "[{plugins: [{name: va}]}, "
            f"{{plugins: [{{name: vb, arguments: {{vote: {REJECT}}}}}]}}]",
            False,
        ),
        # nothing decided -> true
        ("[{plugins: [{name: va}, {name: vb}]}]", True),
        # enableJobEnqueued: false removes the rejecting voter
        (
            "[{plugins: [{name: va, enableJobEnqueued: false, "
            f"arguments: {{vote: {REJECT}}}}}]}}]",
            True,
        ),
    ],
)
def test_vote_semantics(tiers: str, expected: bool) -> None:
    ssn, job = session(tiers)
    assert ssn.dispatch.job_enqueueable(job)[0] is expected
    ssn.rollback()


def test_job_starving_uses_first_tier_that_registers() -> None:
    ssn, job = session(
        "[{plugins: [{name: va}]}, {plugins: [{name: vb, arguments: "
        "{starving: 'yes'}}, {name: vc, arguments: {starving: 'yes'}}]}]"
    )
    assert ssn.dispatch.job_starving(job) is True
    ssn, job = session(
        "[{plugins: [{name: va, arguments: {starving: 'no'}}]}, "
        "{plugins: [{name: vb, arguments: {starving: 'yes'}}]}]"
    )
    assert ssn.dispatch.job_starving(job) is False
    ssn, job = session("[{plugins: [{name: va}]}]")
    assert ssn.dispatch.job_starving(job) is False


def test_victim_intersection_per_tier() -> None:
    ssn, _ = session(
        "[{plugins: [{name: va, arguments: {victims: 'j-0,j-1'}}, "
        "{name: vb, arguments: {victims: 'j-1,k-0'}}]}]"
    )
    tasks = sorted(ssn.cache.tasks.values(), key=lambda t: t.name)
    got = ssn.dispatch.preemptable(tasks[0], tasks)
    assert [t.name for t in got] == ["j-1"]
    # an empty result stops the tier; the next tier answers
    ssn, _job = session(
        "[{plugins: [{name: va, arguments: {victims: 'none'}}]}, "
        "{plugins: [{name: vb, arguments: {victims: 'k-0'}}]}]"
    )
    got = ssn.dispatch.preemptable(tasks[0], list(ssn.cache.tasks.values()))
    assert [t.name for t in got] == ["k-0"]


def test_order_first_nonzero_decides_and_switch_disables() -> None:
    ssn, _ = session(
        "[{plugins: [{name: va, arguments: {order: -1}}, {name: vb, arguments: {order: 1}}]}]"
    )
    key = ssn.dispatch.job_order_key()
    jobs = sorted(ssn.jobs.values(), key=key)
    assert [j.name for j in jobs] == ["k", "j"]  # va (descending names) decides
    ssn, _ = session(
        "[{plugins: [{name: va, enableJobOrder: false, arguments: {order: -1}}, "
        "{name: vb, arguments: {order: 1}}]}]"
    )
    jobs = sorted(ssn.jobs.values(), key=ssn.dispatch.job_order_key())
    assert [j.name for j in jobs] == ["j", "k"]


def test_statement_discard_restores_exactly_and_commit_binds() -> None:
    c = cluster(2, cpu="4")
    gang(c, "g", 2, cpu="1")
    c.apply(
        "Pod",
        "ADDED",
        __import__("batch.model.fixtures", fromlist=["pod"]).pod(
            "run", node_name="n1", phase="Running", cpu="2", group="g"
        ),
    )
    cfg = load_config("actions: allocate\ntiers: [{plugins: [{name: gang}, {name: proportion}]}]")
    ssn = open_session(c, cfg, now=NOW)
    job = ssn.jobs["default/g"]
    used0 = ssn.nodes.used.copy()
    counts0 = list(job.counts)
    alloc0 = job.allocated.copy()
    t0, t1 = sorted(
        (t for t in job.tasks.values() if t.status is TaskStatus.PENDING), key=lambda t: t.name
    )
    running = next(t for t in job.tasks.values() if t.status is TaskStatus.RUNNING)
    st = Statement(ssn)
    st.allocate(t0, 0)
    st.pipeline(t1, 1)
    st.evict(running, "preempt")
    assert job.counts[TaskStatus.ALLOCATED] == 1 and job.counts[TaskStatus.PIPELINED] == 1
    assert running.status is TaskStatus.RELEASING
    st.discard()
    assert np.array_equal(ssn.nodes.used, used0)
    assert not ssn.nodes.pipelined.any() and not ssn.nodes.releasing.any()
    assert job.counts == counts0 and np.array_equal(job.allocated, alloc0)
    assert t0.node_name == "" and running.status is TaskStatus.RUNNING
    st = Statement(ssn)
    st.allocate(t0, 0)
    mark = st.save_operations()
    st.allocate(t1, 0)
    st.recover_operations(mark)
    assert t1.status is TaskStatus.PENDING
    st.evict(running, "preempt")
    st.commit()
    assert t0.status is TaskStatus.BINDING
    assert [b.name for b in ssn.binds] == ["g-0"]
    assert [(e.name, e.reason) for e in ssn.evictions] == [("run", "preempt")]
    ssn.rollback()
    assert job.counts == counts0 and t0.status is TaskStatus.PENDING


def test_fits_node_reports_first_failing_predicate() -> None:
    from batch.model import fixtures as fx

    c = cluster(0)
    c.apply("Node", "ADDED", fx.node("small", cpu="1"))
    c.apply(
        "Node",
        "ADDED",
        fx.node("tainted", cpu="8", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
    )
    c.apply("Node", "ADDED", fx.node("ok", cpu="8"))
    gang(c, "g", 1, cpu="2")
    cfg = load_config("actions: allocate\ntiers: [{plugins: [{name: predicates}]}]")
    ssn = open_session(c, cfg, now=NOW)
    task = next(iter(ssn.jobs["default/g"].tasks.values()))
    by = c.nodes.by_name
    assert ssn.placer.fits_node(task, by["small"]) == "Insufficient cpu"
    assert ssn.placer.fits_node(task, by["tainted"]) == "node(s) had untolerated taint {k: v}"
    assert ssn.placer.fits_node(task, by["ok"]) is None
    ssn.rollback()


def test_scheduler_memo_hits_only_when_nothing_changed() -> None:
    from batch.model import fixtures as fx
    from batch.scheduler import Scheduler

    c = cluster(1, cpu="1")
    gang(c, "big", 1, cpu="4")
    sched = Scheduler(
        c,
        load_config(
            "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, {name: sla}]}]"
        ),
    )
    d1 = sched.run_once(NOW)
    assert sched.run_once(NOW + 1) is d1 and sched.memo_hits == 1
    c.apply("Node", "ADDED", fx.node("n1", cpu="8"))
    d3 = sched.run_once(NOW + 2)
    assert d3 is not d1 and [b.node for b in d3.binds] == ["n1"]
    # an sla deadline passing between two cycles forces a recompute
    c.apply(
        "PodGroup",
        "ADDED",
        fx.podgroup(
            "slow",
            phase="Inqueue",
            annotations={"volcano.sh/sla-waiting-time": "1s"},
            created="2027-01-15T08:00:00Z",
        ),
    )
    d4 = sched.run_once(NOW)
    assert sched.run_once(NOW) is d4
    assert sched.run_once(NOW + 5) is not d4


def test_queue_metrics_amount_is_one_entry_of_amounts() -> None:
    """``QueueMetrics.amount`` answers what ``amounts`` has for one resource (0 when left out:
    pods, unlimited, absent or past the vector's end)."""
    from batch.scheduler.framework.decisions import QueueMetrics

    names = ["pods", "cpu", "memory", "nvidia.com/gpu"]
    zero = np.zeros(4)
    m = QueueMetrics(names, zero, zero, zero, None, lambda: 0.0, lambda: False)
    for vec in ([5.0, 1500.4, float("inf"), 2000.6], [3.0, 2.0], None):
        arr = None if vec is None else np.array(vec)
        for name in [*names, "example.com/fpga"]:
            assert m.amount(arr, name) == m.amounts(arr).get(name, 0), (vec, name)


class Keeper(Plugin):
    """Test plugin: a job-order callback kept across sessions (``keeps_callbacks``) that reads
    the session it answers for from ``self.ssn``, and one registered anew at every session open
    (as drf's hierarchy does)."""

    name: ClassVar[str] = "keeper"
    keeps_callbacks = True
    registered = 0

    def register_kept(self, hooks: Hooks) -> None:
        type(self).registered += 1
        hooks.add_job_order_key(lambda j: ("keeper", self.ssn.uid))

    def on_session_open(self, ssn: Session) -> None:
        uid = ssn.uid
        ssn.hooks.add_job_order_key(lambda j: ("keeper-now", uid))


class Namer(Plugin):
    """Test plugin: a job-order callback registered anew at every session open."""

    name: ClassVar[str] = ""

    def on_session_open(self, ssn: Session) -> None:
        uid = ssn.uid
        ssn.hooks.add_job_order_key(lambda j: (self.name, uid))


register_plugin(Keeper)
for n in ("na", "nb", "nc"):
    register_plugin(type(f"Namer_{n}", (Namer,), {"name": n}))


def test_kept_callbacks_stay_in_configuration_order_across_sessions() -> None:
    """A kit's hooks register a keeping plugin's callbacks once; every session sees them, in
    the configuration's order among the other plugins' (registered anew each session), and
    they answer for the session open now. The keeping plugin's callbacks of one session go
    with that session."""
    from batch.scheduler import Scheduler

    c = cluster(1)
    cfg = load_config(
        "actions: enqueue\ntiers: [{plugins: [{name: na}, {name: keeper}, {name: nb}]},"
        " {plugins: [{name: nc}]}]"
    )
    sched = Scheduler(c, cfg)
    hooks = sched.kit.hooks
    Keeper.registered = 0
    for i in range(3):
        gang(c, f"j{i}", 1, phase="Pending")  # a new job: the session runs
        sched.run_once(NOW + i)
        ssn = Session(c, cfg, sched.kit.plugins, now=NOW + i, uid=f"s{i}", hooks=hooks)
        said = [[fn.fn(None) for _, fn in tier] for tier in hooks.job_order.tiers]  # type: ignore[union-attr]
        now = [("keeper", f"s{i}"), ("keeper-now", f"s{i}")]
        assert said == [[("na", f"s{i}"), *now, ("nb", f"s{i}")], [("nc", f"s{i}")]]
        ssn.release()
    assert Keeper.registered == 1
    assert [len(t) for t in hooks.job_order.tiers] == [1, 0]  # released: the kept one stays


#: configurations whose plugins and actions keep per-session state: the Tephra default (pod
#: affinity, preempt's and reclaim's indexes), drf's hierarchy (its per-session callbacks), and
#: capacity with the opt-in plugins (their own session views)
_MANY = (
    "actions: enqueue, allocate, reclaim, preempt, backfill\ntiers: [{plugins: [{name: priority},"
    " {name: gang}, {name: conformance}, {name: sla}, {name: tiresias}]}, {plugins: ["
    "{name: capacity}, {name: predicates}, {name: nodeorder}, {name: reservation},"
    " {name: nominated}, {name: network-topology-aware}, {name: minruntime}, {name: requeue}]}]"
)
_HDRF = (
    "actions: enqueue, allocate, preempt, reclaim, backfill\ntiers: [{plugins: [{name: priority},"
    " {name: gang}, {name: conformance}]}, {plugins: [{name: drf, enableHierarchy: true},"
    " {name: predicates}, {name: nodeorder}, {name: binpack}]}]"
)


@pytest.mark.parametrize("conf", ["tephra", _HDRF, _MANY], ids=["tephra", "hdrf", "many"])
@pytest.mark.parametrize("kept", [False, True])
def test_a_session_is_freed_by_reference_counting_when_it_returns(kept: bool, conf: str) -> None:
    """Nothing holds a session once its decisions are returned: neither the plugins and actions
    a ``Scheduler`` keeps (predicates' pod affinity, reclaim's and preempt's indexes, every
    kept plugin's ``ssn``) nor, within the session, a reference cycle through its callbacks
    (its hooks, the dispatch's combined keys) that only the cyclic collector would free."""
    import gc

    from batch.scheduler import Scheduler
    from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG

    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "b-elastic", ["n0", "n1"], per_node=4, queue="b")  # reclaim evicts for a's gang
    pending(c, "a-job", 2, cpu="2", queue="a")
    cfg = load_config(TEPHRA_DEFAULT_CONFIG if conf == "tephra" else conf)
    sched = Scheduler(c, cfg)
    gc.collect()
    gc.disable()
    try:
        for i in range(3):
            pending(c, f"more-{i}", 1, cpu="2", queue="a")  # something new: the session runs
            d = sched.run_once(NOW + i) if kept else run_session(c, cfg, now=NOW + i)
            assert d.evictions or conf is _MANY  # the evicting actions had work
            alive = [o for o in gc.get_objects() if isinstance(o, Session)]
            assert not alive, [gc.get_referrers(s) for s in alive]
    finally:
        gc.enable()
