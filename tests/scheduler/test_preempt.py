"""preempt action: priority preemption inside a queue (docs/volcano-semantics.md#preempt) and
Tephra's guards."""

from __future__ import annotations

from typing import Any

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.status import TaskStatus
from batch.scheduler import apply_decisions

from .evict_util import (
    EVICT_CONF,
    STRICT_CONF,
    evicted_jobs,
    pending,
    priorities,
    running,
    settle,
    statuses,
)
from .util import NOW, bound_jobs, cluster, run

PREEMPT_ONLY = EVICT_CONF.replace("preempt, reclaim", "preempt")


def test_higher_priority_job_preempts_lower_priority_in_same_queue() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    low = running(c, "low", ["n0", "n1"], per_node=4, priority_class="low")
    high = pending(c, "high", 2, cpu="2", priority_class="high")
    d = run(c, PREEMPT_ONLY)
    assert evicted_jobs(d) == {low: 4}
    assert {e.reason for e in d.evictions} == {"preempt"}
    assert sorted(p.job_id for p in d.pipelines) == [high, high]
    assert not d.binds
    assert any(e.reason == "Preempted" and high in e.message for e in d.events)
    assert {e.beneficiary for e in d.evictions} == {high}  # who gained, for the ledger
    # victims are Releasing until the watch shows them gone; the preemptor binds after that
    apply_decisions(c, d)
    assert statuses(c, low)[TaskStatus.RELEASING] == 4
    d2 = run(c, PREEMPT_ONLY)
    assert not d2.evictions and not d2.binds
    settle(c, d)
    d3 = run(c, PREEMPT_ONLY)
    assert bound_jobs(d3) == {high: 2} and not d3.evictions


def test_preemption_stays_within_the_queue() -> None:
    c = cluster(2, cpu="4", queues=("default", "other"))
    priorities(c)
    running(c, "low", ["n0", "n1"], per_node=4, priority_class="low", queue="other")
    pending(c, "high", 2, cpu="2", priority_class="high")
    d = run(c, PREEMPT_ONLY)
    assert not d.evictions and not d.pipelines


def test_equal_priority_never_preempts() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    running(c, "a", ["n0", "n1"], per_node=4, priority_class="low")
    pending(c, "b", 2, cpu="2", priority_class="low")
    d = run(c, PREEMPT_ONLY)
    assert not d.evictions
    # no PriorityClass at all: everything has priority 0, still nothing
    c2 = cluster(2, cpu="4")
    running(c2, "a", ["n0", "n1"], per_node=4)
    pending(c2, "b", 2, cpu="2")
    assert not run(c2, PREEMPT_ONLY).evictions


def test_not_enough_victims_means_no_eviction_at_all() -> None:
    c = cluster(3, cpu="4")
    priorities(c)
    running(c, "low", ["n0", "n1"], per_node=4, priority_class="low")
    running(c, "vip", ["n2"], per_node=4, priority_class="high")
    # a 3-pod gang needing a whole node each: only two nodes can be freed
    pending(c, "gang3", 3, cpu="4", priority_class="high")
    d = run(c, PREEMPT_ONLY)
    assert not d.evictions and not d.pipelines
    # with idle capacity too small to help either
    c2 = cluster(2, cpu="4")
    priorities(c2)
    running(c2, "low", ["n0"], per_node=3, priority_class="low")
    running(c2, "vip", ["n1"], per_node=4, priority_class="high")
    pending(c2, "gang2", 2, cpu="3", priority_class="high")
    assert not run(c2, PREEMPT_ONLY).evictions


def test_gang_victims_keep_their_minimum() -> None:
    c = cluster(4, cpu="2")
    priorities(c)
    low = running(
        c, "low", ["n0", "n1", "n2", "n3"], per_node=1, min_member=3, cpu="2", priority_class="low"
    )
    # two 2-cpu pods need two evictions, but the victim gang may lose only one pod
    pending(c, "two", 2, cpu="2", priority_class="high")
    d = run(c, PREEMPT_ONLY)
    assert not d.evictions
    c.apply("PodGroup", "DELETED", c.jobs["default/two"].podgroup or {})
    for t in list(c.jobs["default/two"].tasks.values()):
        assert t.raw is not None
        c.apply("Pod", "DELETED", t.raw)
    one = pending(c, "one", 1, cpu="2", priority_class="high")
    d = run(c, PREEMPT_ONLY)
    assert evicted_jobs(d) == {low: 1}
    assert [p.job_id for p in d.pipelines] == [one]


def test_gang_minimum_holds_across_nodes_in_one_session() -> None:
    c = cluster(4, cpu="2")
    priorities(c)
    low = running(c, "low", ["n0", "n1", "n2", "n3"], min_member=2, cpu="2", priority_class="low")
    pending(c, "p", 3, cpu="2", priority_class="high")  # needs 3 of the 2 spare pods
    assert not run(c, PREEMPT_ONLY).evictions
    c2 = cluster(4, cpu="2")
    priorities(c2)
    low = running(c2, "low", ["n0", "n1", "n2", "n3"], min_member=2, cpu="2", priority_class="low")
    pending(c2, "p", 2, cpu="2", priority_class="high")
    d = run(c2, PREEMPT_ONLY)
    assert evicted_jobs(d) == {low: 2}
    assert len({e.uid for e in d.evictions}) == 2 and len(d.pipelines) == 2


def test_conformance_protects_kube_system_and_critical_pods() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    running(c, "sys", ["n0"], per_node=4, namespace="kube-system", priority_class="low")
    running(c, "crit", ["n1"], per_node=4, priority_class="low")
    for t in c.jobs["default/crit"].tasks.values():
        t.priority_class_name = "system-node-critical"
    pending(c, "high", 1, cpu="2", priority_class="high")
    for conf in (PREEMPT_ONLY, STRICT_CONF.replace("preempt, reclaim", "preempt")):
        d = run(c, conf)
        assert not d.evictions


def test_intra_job_preemption_evicts_lower_priority_tasks_of_the_same_job() -> None:
    conf = PREEMPT_ONLY.replace(
        "  - name: gang\n", "  - name: gang\n    enablePreemptable: false\n"
    )
    c = cluster(1, cpu="4")
    priorities(c)
    job = running(c, "mixed", ["n0"], per_node=1, min_member=2, cpu="4", priority_class="low")
    p = f.pod("mixed-hi", group="mixed", cpu="2", priority=5000)
    c.apply("Pod", "ADDED", p)
    d = run(c, conf)
    assert evicted_jobs(d) == {job: 1}
    assert [x.name for x in d.pipelines] == ["mixed-hi"]


def test_a_gang_that_can_never_fit_pipelines_nothing() -> None:
    """Two 8-GPU pods on one 8-GPU node: no session may pipeline (and so nominate) one of them.
    Intra-job preemption, whose statements are committed task by task, once pipelined the pod
    that fits by itself: the nomination then held the node from every other job for good."""
    from batch.scheduler import TEPHRA_DEFAULT_CONFIG

    c = cluster(1, gpu=8)
    pending(c, "never", 2, gpu=8)
    for conf in (PREEMPT_ONLY, TEPHRA_DEFAULT_CONFIG):
        d = run(c, conf)
        assert d.pipelines == [] and d.binds == [] and d.evictions == []


def test_min_runtime_protects_young_pods() -> None:
    conf = PREEMPT_ONLY.replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n    arguments: {preemptMinRuntime: 10m}\n",
    )
    c = cluster(1, cpu="4")
    priorities(c)
    # NOW in tests/scheduler/util.py is 2027-01-15T08:00:00Z
    running(c, "young", ["n0"], per_node=4, priority_class="low", start="2027-01-15T07:55:00Z")
    pending(c, "high", 1, cpu="2", priority_class="high")
    assert not run(c, conf).evictions
    # older than 10 minutes: preemptable
    c2 = cluster(1, cpu="4")
    priorities(c2)
    running(c2, "old", ["n0"], per_node=4, priority_class="low", start="2027-01-15T07:40:00Z")
    pending(c2, "high", 1, cpu="2", priority_class="high")
    assert evicted_jobs(run(c2, conf)) == {"default/old": 2}


def test_candidate_budget_bounds_the_work() -> None:
    c = cluster(4, cpu="4")
    priorities(c)
    running(c, "low", ["n0", "n1", "n2", "n3"], per_node=4, priority_class="low")
    for i in range(4):
        pending(c, f"h{i}", 1, cpu="4", priority_class="high")
    full = run(c, PREEMPT_ONLY)
    # the victim job keeps its minimum (1 pod): three whole nodes can be freed, not four
    assert len({e.job_id for e in full.evictions}) == 1 and len(full.evictions) == 12
    assert len(full.pipelines) == 3
    limited = (
        PREEMPT_ONLY
        + """
configurations:
- name: preempt
  arguments: {maxCandidateEvaluations: 1}
"""
    )
    d = run(c, limited)
    assert len(d.pipelines) == 1 and len(d.evictions) == 4


def test_preemptor_with_policy_never_does_not_preempt() -> None:
    c = cluster(1, cpu="4")
    priorities(c)
    running(c, "low", ["n0"], per_node=4, priority_class="low")
    pending(c, "high", 1, cpu="2", priority_class="high", spec={"preemptionPolicy": "Never"})
    assert not run(c, PREEMPT_ONLY).evictions


def test_nominated_preemptor_keeps_the_released_resources() -> None:
    from batch.scheduler import TEPHRA_DEFAULT_CONFIG, load_config

    conf = load_config(TEPHRA_DEFAULT_CONFIG.replace("MinRuntime: 5m", "MinRuntime: 0s"))
    c = cluster(1, cpu="4")
    priorities(c)
    running(c, "low", ["n0"], per_node=4, priority_class="low")
    mid = pending(c, "mid", 1, cpu="2", priority_class="high")
    d = run(c, conf)
    assert len(d.evictions) == 2 and [p.job_id for p in d.pipelines] == [mid]
    settle(c, d)  # victims gone, the preemptor nominated to n0
    other = pending(c, "other", 1, cpu="2", priority_class="high", created="2025-01-01T00:00:00Z")
    d2 = run(c, conf)
    # the older job orders first but may not take what was released for "mid"
    assert bound_jobs(d2) == {mid: 1}
    assert other in d2.pending_reasons and not d2.evictions


def test_scheduler_memo_notices_a_victim_passing_its_min_runtime() -> None:
    from batch.scheduler import Scheduler, load_config

    mr = "  - name: minruntime\n    arguments: {preemptMinRuntime: 10m}\n"
    conf = load_config(
        PREEMPT_ONLY.replace("  - name: conformance\n", "  - name: conformance\n" + mr)
    )
    c = cluster(1, cpu="4")
    priorities(c)
    running(c, "young", ["n0"], per_node=4, priority_class="low", start="2027-01-15T07:55:00Z")
    pending(c, "high", 1, cpu="2", priority_class="high")
    s = Scheduler(c, conf)
    assert not s.run_once(NOW).evictions
    assert not s.run_once(NOW + 60).evictions and s.memo_hits == 1
    assert len(s.run_once(NOW + 301).evictions) == 2  # started 07:55, 10 minutes passed at 08:05


def test_arguments_are_validated() -> None:
    import pytest

    from batch.scheduler import ConfigError, load_config
    from batch.scheduler.plugins.minruntime import parse_duration

    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("90s") == 90.0 and parse_duration("2.5m") == 150.0
    assert parse_duration("120") == 120.0 and parse_duration(7) == 7.0
    for bad in ("soon", "5 m", "-1", "", "1h-3m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    base = PREEMPT_ONLY
    bad_confs = {
        "victimSelection": base + "configurations:\n- name: preempt\n"
        "  arguments: {victimSelection: lenient}\n",
        "reclaimHysteresis": base + "configurations:\n- name: reclaim\n"
        "  arguments: {reclaimHysteresis: 1.5}\n",
        "timeBudgetSeconds": base + "configurations:\n- name: reclaim\n"
        "  arguments: {timeBudgetSeconds: -1}\n",
        "preemptMinRuntime": base.replace(
            "  - name: conformance\n",
            "  - name: conformance\n  - name: minruntime\n    arguments: {preemptMinRuntime: x}\n",
        ),
        "unknown argument": base.replace(
            "  - name: conformance\n",
            "  - name: conformance\n  - name: minruntime\n    arguments: {preemptMinRunTime: 5m}\n",
        ),
    }
    for needle, text in bad_confs.items():
        with pytest.raises(ConfigError, match=needle):
            load_config(text)


def test_helm_tiering_breaks_gangs_where_tephra_default_does_not() -> None:
    from batch.scheduler import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG

    helm = HELM_DEFAULT_CONFIG.replace("enqueue, allocate, backfill", "enqueue, allocate, preempt")

    def build() -> ClusterCache:
        c = cluster(2, cpu="2")
        priorities(c)
        running(c, "low", ["n0", "n1"], min_member=2, cpu="2", priority_class="low")
        pending(c, "high", 1, cpu="2", priority_class="high")
        return c

    # Volcano's Helm tiers: gang's preemptable is off, so a gang at its minimum loses a pod
    assert evicted_jobs(run(build(), helm)) == {"default/low": 1}
    # Tephra's default keeps every victim gang at or above minAvailable
    assert not run(build(), TEPHRA_DEFAULT_CONFIG).evictions


def test_time_budget_counts_tasks_without_any_candidate_node(monkeypatch: Any) -> None:
    """Nodes full of another scheduler's pods give a starving task no candidate node at all;
    the time budget must still end the action (a backlog of 100k one-pod jobs took preempt and
    reclaim 14 s a cycle with a 0.4 s budget each)."""
    import time

    from batch.scheduler.actionlib import victims as eviction

    c = cluster(2, cpu="4")
    priorities(c)
    running(c, "foreign", ["n0", "n1"], per_node=4, scheduler="default-scheduler")
    for i in range(5):
        pending(c, f"h{i}", 1, cpu="4", priority_class="high")
    conf = (
        PREEMPT_ONLY + "configurations:\n- name: preempt\n  arguments: {timeBudgetSeconds: 0.5}\n"
    )
    tried = []
    real = eviction.candidate_nodes

    def counting(*args: Any, **kw: Any) -> Any:
        tried.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(eviction, "candidate_nodes", counting)
    assert not run(c, conf).evictions
    assert len(tried) >= 5  # with time to spare, every starving task is tried
    tried.clear()
    ticks = iter(range(1, 10**6))
    slow = type(
        "Clock", (), {"perf_counter": staticmethod(lambda: time.perf_counter() + next(ticks))}
    )
    monkeypatch.setattr(eviction, "time", slow)  # every look at the clock: a second later
    assert not run(c, conf).evictions
    assert tried == []


def _owned_by(c: ClusterCache, job_id: str, api_version: str, kind: str, name: str) -> None:
    """Give the PodGroup of ``job_id`` a controller owner, as the job controller or an
    operator does."""
    pg = dict(c.jobs[job_id].podgroup or {})
    ref = {"apiVersion": api_version, "kind": kind, "name": name, "uid": name, "controller": True}
    pg["metadata"] = {**pg["metadata"], "ownerReferences": [ref]}
    c.apply("PodGroup", "MODIFIED", pg)


def test_preemption_events_name_the_jobs_not_their_podgroups() -> None:
    """Issue 31.3: "evicted (preempt) for job default/high-3f2a..." named a PodGroup, which
    nobody submitted; the event names the victim's and the preemptor's workloads."""
    c = cluster(2, cpu="4")
    priorities(c)
    low = running(c, "low", ["n0", "n1"], per_node=4, priority_class="low")
    high = pending(c, "high", 2, cpu="2", priority_class="high")
    _owned_by(c, low, "kubeflow.org/v1", "PyTorchJob", "pt-low")
    _owned_by(c, high, "batch.volcano.sh/v1alpha1", "Job", "urgent")
    d = run(c, PREEMPT_ONLY)
    said = [e.message for e in d.events if e.reason == "Preempted"]
    assert said, [e.message for e in d.events]
    assert all(
        " of PyTorchJob default/pt-low evicted (preempt) for job default/urgent" in m for m in said
    ), said
