"""Template state kept across sessions decides exactly what state computed from scratch does.

``placement.KeptTemplates`` keeps, per task template, the static mask, the scores and the fit
masks over all nodes in ``ClusterCache.derived`` and refreshes only the nodes whose columns
changed since (``NodeArrays.touched_since``) or that the session changed itself. These tests
drive two caches through the same random history (nodes changing capacity, taints, labels and
readiness, leaving and coming back; pods of a few repeating shapes binding, running, being
deleted (Releasing), finishing and leaving; binds and evictions dispatched between sessions),
one ``Scheduler`` on each, with ``placement.KEEP_TEMPLATES`` and ``nodes.KEEP`` (FutureIdle's
presence and the allocatable total answered from generations) on for one and off for the other,
and demand the same binds, pipelines, evictions, statuses, reasons and events (in order) from
every session.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, Scheduler, apply_decisions, load_config
from batch.scheduler.config import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework import nodes, placement

from .test_incremental import _with_events
from .util import NOW, switched

#: nodeorder with every dynamic score on and soft taints weighed (static scores)
SCORED = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
    arguments:
      mostrequested.weight: 2
      tainttoleration.weight: 3
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
"""
CONFIGS = [
    load_config(HELM_DEFAULT_CONFIG),
    # without the actions' time budgets (0: none), which a loaded machine could run out of in
    # one of the two runs compared
    load_config(
        re.sub(r"timeBudgetSeconds: [0-9.]+", "timeBudgetSeconds: 0", TEPHRA_DEFAULT_CONFIG)
    ),
    load_config(SCORED),
]
QUEUES = ["qa", "qb"]
GROUPS = [f"g{i}" for i in range(6)]
NODE_NAMES = [f"n{i}" for i in range(7)]
#: pod shapes (cpu, gpu, zone selector): few, so templates repeat
SHAPES = [("1", None, None), ("2", 1, None), ("1", 2, None), ("3", None, "a"), ("1", 1, "b")]

Event = tuple[str, str, dict[str, Any]]


def _node(draw: st.DrawFn, name: str, etype: str) -> Event:
    taint = draw(st.sampled_from([None, "NoSchedule", "PreferNoSchedule"]))
    return (
        "Node",
        etype,
        f.node(
            name,
            cpu=draw(st.sampled_from(["2", "4", "8"])),
            memory=draw(st.sampled_from(["8Gi", "16Gi"])),
            gpu=draw(st.sampled_from([None, 1, 2, 4])),
            labels={"kubernetes.io/hostname": name, "zone": draw(st.sampled_from("ab"))},
            taints=[{"key": "t", "value": "x", "effect": taint}] if taint else None,
            ready=draw(st.booleans()) or taint is not None,
        ),
    )


def _base() -> list[Event]:
    events: list[Event] = [("Queue", "ADDED", f.queue("root"))]
    events += [("Queue", "ADDED", f.queue(q, weight=i + 1)) for i, q in enumerate(QUEUES)]
    for i, name in enumerate(NODE_NAMES):
        labels = {"kubernetes.io/hostname": name, "zone": "ab"[i % 2]}
        events.append(("Node", "ADDED", f.node(name, cpu="8", gpu=4, labels=labels)))
    events += [
        ("PodGroup", "ADDED", f.podgroup(g, queue=QUEUES[i % 2], phase="Inqueue", min_member=1))
        for i, g in enumerate(GROUPS)
    ]
    return events


@st.composite
def step(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(["pod"] * 8 + ["delete-pod", "podgroup", "node"]))
    if kind == "node":
        name = draw(st.sampled_from(NODE_NAMES))
        etype = draw(st.sampled_from(["MODIFIED", "MODIFIED", "MODIFIED", "DELETED", "ADDED"]))
        return _node(draw, name, etype)
    group = draw(st.sampled_from(GROUPS))
    if kind == "podgroup":
        pg = f.podgroup(
            group,
            min_member=draw(st.integers(1, 2)),
            queue=draw(st.sampled_from(QUEUES)),
            phase=draw(st.sampled_from(["Pending", "Inqueue", "Running"])),
        )
        return ("PodGroup", draw(st.sampled_from(["ADDED", "MODIFIED"])), pg)
    name = f"{group}-{draw(st.integers(0, 3))}"
    if kind == "delete-pod":
        return ("Pod", "DELETED", f.pod(name, group=group))
    phase = draw(st.sampled_from(["Pending", "Pending", "Running", "Running", "Succeeded"]))
    node = None if phase == "Pending" else draw(st.sampled_from(NODE_NAMES))
    cpu, gpu, zone = draw(st.sampled_from(SHAPES))
    spec = {"nodeSelector": {"zone": zone}} if zone else None
    deleting = phase == "Running" and draw(st.booleans())  # Releasing: FutureIdle differs
    pod = f.pod(
        name,
        group=group,
        cpu=cpu,
        gpu=gpu,
        phase=phase,
        node_name=node,
        spec=spec,
        deleting=deleting,
    )
    return ("Pod", "MODIFIED", pod)


def _keeping(on: bool) -> AbstractContextManager[None]:
    return switched(on, (placement, "KEEP_TEMPLATES"), (nodes, "KEEP"))


def _history(steps: list[tuple[Event, bool, int]], config_index: int, keep: bool) -> list[Any]:
    """Every session's comparable output along ``steps`` (event, dispatch?, idle sessions)."""
    cache = ClusterCache()
    for event in _base():
        cache.apply(*event)
    sched = Scheduler(cache, CONFIGS[config_index])
    out: list[Any] = []
    with _keeping(keep):
        for i, (event, dispatch, idle) in enumerate(steps):
            cache.apply(*event)
            d: Decisions | None = None
            for k in range(idle + 1):
                d = sched.run_once(NOW + i + k / 10)
                out.append(_with_events(d))
            if dispatch and d is not None:
                apply_decisions(cache, d)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 1)), min_size=1, max_size=30),
    config_index=st.integers(0, len(CONFIGS) - 1),
)
def test_kept_templates_decide_as_templates_from_scratch(
    steps: list[tuple[Event, bool, int]], config_index: int
) -> None:
    kept = _history(steps, config_index, keep=True)
    fresh = _history(steps, config_index, keep=False)
    for i, (a, b) in enumerate(zip(kept, fresh, strict=True)):
        assert a == b, i


def test_a_repeated_template_refreshes_only_the_changed_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second session computes nothing from scratch: it refreshes the node a pod left."""
    fresh: list[int] = []
    refreshed: list[set[int]] = []
    real_fresh, real_refresh = placement.Placer.fresh_state, placement.Placer.refresh

    def spy_fresh(self: placement.Placer, tmpl: Any) -> placement.TemplateState:
        fresh.append(tmpl.tid)
        return real_fresh(self, tmpl)

    def spy_refresh(self: placement.Placer, st: placement.TemplateState, idx: set[int]) -> None:
        refreshed.append(set(idx))
        real_refresh(self, st, idx)

    monkeypatch.setattr(placement.Placer, "fresh_state", spy_fresh)
    monkeypatch.setattr(placement.Placer, "refresh", spy_refresh)
    cache = ClusterCache()
    for event in _base():
        cache.apply(*event)
    # a pod placed in every session (its bind is never dispatched)
    cache.apply("Pod", "ADDED", f.pod("g0-0", group="g0", cpu="1"))
    cache.apply("Pod", "ADDED", f.pod("g1-0", group="g1", cpu="1", phase="Running", node_name="n3"))
    sched = Scheduler(cache, CONFIGS[0])
    sched.run_once(NOW)
    assert len(fresh) == 1
    cache.apply("Pod", "DELETED", f.pod("g1-0", group="g1"))
    refreshed.clear()
    sched.run_once(NOW + 1)
    assert len(fresh) == 1
    assert {cache.nodes.by_name["n3"]} in refreshed
    assert all(len(r) <= 1 for r in refreshed)


def test_a_node_changed_in_the_cache_and_in_the_session_is_refreshed_later() -> None:
    """A node the cache changed before a session and the session changed before the template
    was looked at stays marked as not refreshed: a later session that leaves it alone must
    not read its kept entry from before the cache's change (here: n3 filled up, so ``b``
    must not go there)."""
    created = "2026-01-01T00:00:0{}Z"
    events: list[list[Event]] = [
        [
            ("Queue", "ADDED", f.queue("root")),
            ("Queue", "ADDED", f.queue("qa")),
            *[("Node", "ADDED", f.node(f"n{i}", cpu="8")) for i in range(4)],
            ("PodGroup", "ADDED", f.podgroup("bg", queue="qa", phase="Running")),
            *[
                ("Pod", "ADDED", f.pod(f"bg-{i}", group="bg", cpu="4", node_name=f"n{i}"))
                for i in range(3)
            ],
            ("PodGroup", "ADDED", f.podgroup("b", queue="qa", created=created.format(5))),
            ("Pod", "ADDED", f.pod("b-0", group="b", cpu="2", created=created.format(5))),
        ],
        [
            ("Pod", "ADDED", f.pod("bg-3", group="bg", cpu="7", node_name="n3")),
            ("PodGroup", "ADDED", f.podgroup("a", queue="qa", created=created.format(1))),
            (
                "Pod",
                "ADDED",
                f.pod(
                    "a-0",
                    group="a",
                    cpu="1",
                    created=created.format(1),
                    spec={"nodeSelector": {"kubernetes.io/hostname": "n3"}},
                ),
            ),
        ],
        [("Pod", "DELETED", f.pod("a-0", group="a"))],
    ]

    def run(keep: bool) -> list[Any]:
        cache = ClusterCache()
        sched = Scheduler(cache, CONFIGS[0])
        out = []
        with _keeping(keep):
            for i, batch in enumerate(events):
                for event in batch:
                    cache.apply(*event)
                out.append(_with_events(sched.run_once(NOW + i)))
        return out

    fresh = run(keep=False)
    assert [b for b in fresh[2]["binds"] if b[0] == "b-0"] == [("b-0", "n0")]
    assert run(keep=True) == fresh


def test_a_pod_turning_releasing_between_sessions_is_pipelined_on() -> None:
    """FutureIdle's presence is kept by generation: a session after a pod began releasing
    pipelines onto what it frees, as a session computing it afresh does."""

    def run(keep: bool) -> list[Any]:
        cache = ClusterCache()
        for event in [
            ("Queue", "ADDED", f.queue("root")),
            ("Queue", "ADDED", f.queue("qa")),
            ("Node", "ADDED", f.node("n0", cpu="4")),
            ("PodGroup", "ADDED", f.podgroup("bg", queue="qa", phase="Running")),
            ("Pod", "ADDED", f.pod("bg-0", group="bg", cpu="4", node_name="n0", phase="Running")),
        ]:
            cache.apply(*event)
        sched = Scheduler(cache, CONFIGS[0])
        out = []
        with _keeping(keep):
            out.append(_with_events(sched.run_once(NOW)))
            deleting = f.pod("bg-0", group="bg", cpu="4", node_name="n0", phase="Running")
            deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
            cache.apply("Pod", "MODIFIED", deleting)
            cache.apply("PodGroup", "ADDED", f.podgroup("w", queue="qa", phase="Inqueue"))
            cache.apply("Pod", "ADDED", f.pod("w-0", group="w", cpu="2"))
            out.append(_with_events(sched.run_once(NOW + 1)))
        return out

    fresh = run(keep=False)
    assert fresh[1]["pipelines"] == [("w-0", "n0")]
    assert run(keep=True) == fresh


@settings(max_examples=60, deadline=None)
@given(
    changes=st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.integers(1, 8)), max_size=12)
)
def test_kept_node_sums_match_the_masked_sums(changes: list[tuple[int, bool, int]]) -> None:
    """``alloc_total`` and ``valid_sum`` answer as the sum over the schedulable nodes' columns
    while nodes turn ready and not ready, change capacity and hold pods."""
    cache = ClusterCache()
    cache.apply("Queue", "ADDED", f.queue("root"))
    cache.apply("PodGroup", "ADDED", f.podgroup("bg", phase="Running"))
    for i in range(5):
        cache.apply("Node", "ADDED", f.node(f"n{i}", cpu="8"))
        pod = f.pod(f"bg-{i}", group="bg", cpu="1", node_name=f"n{i}", phase="Running")
        cache.apply("Pod", "ADDED", pod)
    for i, ready, cpu in [(0, True, 8), *changes]:
        cache.apply("Node", "MODIFIED", f.node(f"n{i}", cpu=str(cpu), ready=ready))
        nd = nodes.SessionNodes(cache)
        valid = nd.valid
        assert (nd.alloc_total() == nd.alloc[:, valid].sum(axis=1)).all()
        assert (nd.valid_sum(nd.used) == nd.used[:, valid].sum(axis=1)).all()
