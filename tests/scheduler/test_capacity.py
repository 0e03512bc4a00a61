"""capacity: the queue tree, per-queue sums, real capability and deserved, and the hooks, on a
small hierarchy worked out by hand (docs/volcano-semantics.md#capacity)."""

from __future__ import annotations

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.framework.session import Session
from batch.scheduler.plugins.capacity import CapacityPlugin

from .util import NOW, cluster, gang

HIER = "actions: enqueue, allocate\ntiers: [{plugins: [{name: capacity, enableHierarchy: true}]}]"
FLAT = "actions: enqueue, allocate\ntiers: [{plugins: [{name: capacity}]}]"


def _tree() -> ClusterCache:
    """root (16 cpu) -> eng (capability 10, guarantee 2) -> eng-a (deserved 4, guarantee 1),
    eng-b (capability 3); root -> ops (deserved 6). eng-a runs 2 cpu with minResources 1 cpu;
    eng-b has an Inqueue gang of minResources 2 cpu, nothing running."""
    c = cluster(2, cpu="8", queues=())
    c.apply("Queue", "ADDED", f.queue("eng", capability={"cpu": "10"}, guarantee={"cpu": "2"}))
    c.apply(
        "Queue",
        "ADDED",
        f.queue("eng-a", parent="eng", deserved={"cpu": "4"}, guarantee={"cpu": "1"}),
    )
    c.apply("Queue", "ADDED", f.queue("eng-b", parent="eng", capability={"cpu": "3"}))
    c.apply("Queue", "ADDED", f.queue("ops", deserved={"cpu": "6"}))
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("run", queue="eng-a", min_resources={"cpu": "1"}, phase="Running"),
    )
    for i in range(2):
        c.apply("Pod", "ADDED", f.pod(f"run-{i}", group="run", node_name="n0", phase="Running"))
    gang(c, "wait", 2, queue="eng-b", min_resources={"cpu": "2"}, cpu="1")
    return c


def _open(c: ClusterCache, conf: str) -> tuple[Session, CapacityPlugin, int]:
    ssn = open_session(c, load_config(conf), now=NOW)
    plugin = next(p for p in ssn.plugins if isinstance(p, CapacityPlugin))
    return ssn, plugin, c.resources.index("cpu")


def test_hierarchy_tree_sums_real_capability_and_deserved() -> None:
    ssn, plugin, cpu = _open(_tree(), HIER)
    a = plugin.attrs
    assert plugin.refuse == ""
    assert a["eng-a"].parent is a["eng"] and a["eng"].parent is a["root"]
    assert {x.queue.name for x in a["root"].children} == {"eng", "ops"}

    def cpu_of(field: str) -> dict[str, float]:
        return {n: float(getattr(x, field)[cpu]) / 1000 for n, x in a.items()}

    # root: unlimited capability, guarantee and deserved summed from its children
    assert cpu_of("real_capability") == {"root": 16, "eng": 10, "eng-a": 10, "eng-b": 3, "ops": 14}
    # deserved: min(deserved, realCapability), at least guarantee
    assert cpu_of("deserved") == {"root": 6, "eng": 2, "eng-a": 4, "eng-b": 0, "ops": 6}
    assert cpu_of("guarantee") == {"root": 2, "eng": 2, "eng-a": 1, "eng-b": 0, "ops": 0}
    # sums walk up the chain
    assert cpu_of("allocated") == {"root": 2, "eng": 2, "eng-a": 2, "eng-b": 0, "ops": 0}
    assert cpu_of("inqueue") == {"root": 2, "eng": 2, "eng-a": 0, "eng-b": 2, "ops": 0}
    assert cpu_of("elastic") == {"root": 1, "eng": 1, "eng-a": 1, "eng-b": 0, "ops": 0}
    assert ssn.dispatch.deserved("eng-a") is a["eng-a"].deserved
    ssn.rollback()


def test_hierarchy_hooks_walk_ancestors() -> None:
    c = _tree()
    gang(c, "big", 1, queue="eng-a", phase="Pending", min_resources={"cpu": "8"}, cpu="8")
    gang(c, "more", 1, queue="eng-b", phase="Pending", min_resources={"cpu": "2"}, cpu="2")
    gang(c, "fits", 1, queue="ops", phase="Pending", min_resources={"cpu": "6"}, cpu="6")
    ssn, plugin, cpu = _open(c, HIER)
    q = ssn.queues
    # ops (share 0) before eng's subtree (eng has no deserved: share 1)
    key = ssn.dispatch.queue_order_key()
    assert sorted(["eng-a", "ops"], key=lambda n: key(q[n])) == ["ops", "eng-a"]
    # enqueue: minResources + allocated + inqueue - elastic <= realCapability on the chain
    ok, _ = ssn.dispatch.job_enqueueable(ssn.jobs["default/big"])  # eng: 8 + 2 + 2 - 1 > 10
    assert not ok
    reason = ssn.reasons["default/big"]
    assert reason.kind == "OverCapability" and "'eng'" in reason.message
    ok, _ = ssn.dispatch.job_enqueueable(ssn.jobs["default/more"])  # eng-b: 2 + 2 > 3
    assert not ok and "'eng-b'" in ssn.reasons["default/more"].message
    assert ssn.dispatch.job_enqueueable(ssn.jobs["default/fits"])[0]
    # allocatable: allocated + task <= realCapability for the queue and its ancestors
    big = next(iter(ssn.jobs["default/big"].tasks.values()))
    more = next(iter(ssn.jobs["default/more"].tasks.values()))
    assert ssn.dispatch.allocatable(q["eng-a"], big)  # eng-a 2 + 8 <= 10, eng 2 + 8 <= 10
    assert ssn.dispatch.allocatable(q["eng-b"], more)  # eng-b 0 + 2 <= 3
    assert not ssn.dispatch.allocatable(q["eng-b"], big)  # eng-b 0 + 8 > 3
    # preemptive: allocatable and under deserved on one requested resource
    assert not ssn.dispatch.preemptive(q["eng-a"], [big])  # 2 + 8 > deserved 4
    assert not ssn.dispatch.preemptive(q["eng-b"], [more])  # eng-b deserves nothing
    ssn.dispatch.job_enqueued(ssn.jobs["default/fits"])
    inqueue = {n: float(plugin.attrs[n].inqueue[cpu]) for n in ("ops", "root", "eng")}
    assert inqueue == {"ops": 6000, "root": 8000, "eng": 2000}  # added up the chain
    ssn.rollback()


def test_job_in_non_leaf_queue_refuses_everything() -> None:
    c = _tree()
    gang(c, "bad", 1, queue="eng", phase="Pending", cpu="1")
    ssn, plugin, _cpu = _open(c, HIER)
    assert plugin.refuse == "job default/bad is in non-leaf queue 'eng'"
    job = ssn.jobs["default/wait"]
    assert not ssn.dispatch.job_enqueueable(job)[0]
    assert ssn.reasons["default/wait"].kind == "NotEnqueued"
    task = next(iter(job.tasks.values()))
    assert not ssn.dispatch.allocatable(ssn.queues["eng-b"], task)
    ssn.rollback()


def test_flat_real_capability_sums_and_reclaimable() -> None:
    c = cluster(2, cpu="8", queues=())
    c.apply("Queue", "ADDED", f.queue("qa", guarantee={"cpu": "3"}, deserved={"cpu": "2"}))
    c.apply("Queue", "ADDED", f.queue("qb", capability={"cpu": "5"}, guarantee={"cpu": "1"}))
    c.apply("Queue", "ADDED", f.queue("qc", deserved={"cpu": "2"}))
    c.apply("PodGroup", "ADDED", f.podgroup("a", queue="qa", phase="Running"))
    c.apply("PodGroup", "ADDED", f.podgroup("cc", queue="qc", phase="Running"))
    for i in range(4):
        c.apply(
            "Pod", "ADDED", f.pod(f"a-{i}", group="a", node_name="n0", phase="Running", memory=None)
        )
        c.apply(
            "Pod",
            "ADDED",
            f.pod(f"cc-{i}", group="cc", node_name="n1", phase="Running", memory=None),
        )
    gang(c, "b", 1, queue="qb", phase="Pending", cpu="1")
    ssn, plugin, cpu = _open(c, FLAT)
    a = plugin.attrs
    assert all(x.parent is None and not x.children for x in a.values())
    # realCapability = total - Σ guarantees + own guarantee, at most capability
    real = {n: float(x.real_capability[cpu]) / 1000 for n, x in a.items()}
    assert real == {"root": 12, "qa": 15, "qb": 5, "qc": 12}
    assert float(a["qa"].allocated[cpu]) == 4000 and float(a["qc"].allocated[cpu]) == 4000
    # qa's deserved is raised to its guarantee (3): a victim must leave qa at 3 and come from a
    # queue above its deserved, counting each pick against the next: 1 from qa, 2 from qc
    assert float(a["qa"].deserved[cpu]) == 3000
    reclaimer = next(iter(ssn.jobs["default/b"].tasks.values()))
    cands = [t for j in ("default/a", "default/cc") for t in ssn.jobs[j].tasks.values()]
    victims = ssn.dispatch.reclaimable(reclaimer, cands)
    by_job: dict[str, int] = {}
    for t in victims:
        by_job[t.job_id or ""] = by_job.get(t.job_id or "", 0) + 1
    assert by_job == {"default/a": 1, "default/cc": 2}
    ssn.rollback()
