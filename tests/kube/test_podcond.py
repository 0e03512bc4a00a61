"""Pending pods' PodScheduled=False conditions and FailedScheduling events (batch.kube.podcond):
what kube-scheduler and Volcano write, on change only, coalesced per gang, bounded per round."""

from __future__ import annotations

import asyncio
from typing import Any

from batch.kube.dispatch import StatusQueue
from batch.kube.podcond import PodConditions, scheduled_event
from batch.kube.status import StatusWriter
from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from tests.scheduler.util import cluster, gang, run

from .test_dispatch import _Server

STAMP = "2026-01-01T00:00:00Z"


def _too_big(c: ClusterCache, name: str, size: int = 1) -> None:
    gang(c, name, size, cpu="64")  # 8-cpu nodes: never fits


def test_a_pending_gang_gets_cluster_autoscalers_condition_once() -> None:
    """Every pending pod gets PodScheduled False reason Unschedulable with the gang's reason;
    one FailedScheduling event per gang; nothing again while nothing changes."""
    c = cluster(1)
    _too_big(c, "big", 3)
    planner = PodConditions()
    patches, events = planner.plan(c, run(c), STAMP)
    assert sorted(name for _, name, _ in patches) == ["big-0", "big-1", "big-2"]
    [cond] = patches[0][2]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"]
    assert [(e.name, e.reason, e.type) for e in events] == [
        ("big-0", "FailedScheduling", "Warning")
    ]
    assert events[0].message == cond["message"]
    assert planner.plan(c, run(c), STAMP) == ([], [])


def test_a_restarted_scheduler_rewrites_no_condition_the_pod_has() -> None:
    c = cluster(1)
    _too_big(c, "big")
    patches, _ = PodConditions().plan(c, run(c), STAMP)
    [(_, _, status)] = patches
    pod = f.pod("big-0", group="big", cpu="64")
    pod["status"] = {**pod.get("status", {}), **status}
    c.apply("Pod", "MODIFIED", pod)
    assert PodConditions().plan(c, run(c), STAMP) == ([], [])


def test_a_new_reason_is_written_again_and_a_bound_pod_is_forgotten() -> None:
    c = cluster(1)
    _too_big(c, "big")
    planner = PodConditions()
    planner.plan(c, run(c), STAMP)
    c.apply("Node", "ADDED", f.node("huge", cpu="128", memory="256Gi"))
    d = run(c)
    assert [b.name for b in d.binds] == ["big-0"]
    planner.plan(c, d, STAMP)
    c.apply(
        "Pod", "MODIFIED", f.pod("big-0", group="big", cpu="64", node_name="huge", phase="Running")
    )
    planner.plan(c, run(c), STAMP)
    assert planner.sent == {} and planner.jobs == {}


def test_the_scheduled_event_says_what_kube_scheduler_says() -> None:
    ev = scheduled_event("ns", "p-0", "u1", "n3")
    assert (ev.kind, ev.reason, ev.type) == ("Pod", "Scheduled", "Normal")
    assert ev.message == "Successfully assigned ns/p-0 to n3"


def test_status_writes_for_2000_pending_pods_over_10_sessions_are_bounded() -> None:
    """2,000 pending single pods, 10 sessions: each pod's condition is written once (2,000
    writes, at most 500 a second, one session a second) and one FailedScheduling event per
    gang, posted with its condition; then nothing."""
    c = cluster(1)
    for i in range(2000):
        _too_big(c, f"s{i}")
    planner = PodConditions()
    server = _Server()
    writer = StatusWriter(server)  # type: ignore[arg-type]
    clock = [0.0]
    statuses = StatusQueue(writer, clock=lambda: clock[0])
    per_round: list[int] = []
    events_per_round: list[int] = []

    async def main() -> None:
        for _ in range(10):
            clock[0] += 1.0
            before = len(server.patches)
            patches, events = planner.plan(c, run(c), STAMP)
            statuses.offer(pod_conditions=patches, condition_events=events)
            await statuses.flush()
            per_round.append(len(server.patches) - before)
            events_per_round.append(len(server.events) - sum(events_per_round))
        await statuses.close(0.0)

    asyncio.run(main())
    assert per_round == [500, 500, 500, 500, 0, 0, 0, 0, 0, 0]
    assert len({name for name, _ in server.patches}) == 2000
    assert server.events.count("FailedScheduling") == 2000
    assert events_per_round == per_round  # each gang's event goes with its pod's condition
    body: dict[str, Any] = server.patches[0][1]
    assert body["conditions"][0]["reason"] == "Unschedulable"


def test_a_gang_still_short_of_pods_gets_no_condition_nor_event() -> None:
    """A gang with fewer pods than minMember fails JobValid (its job controller is still making
    them): Volcano drops such a job from the session before close, so its pods get no
    PodScheduled condition and no FailedScheduling event; neither do they here. Once its last
    pod exists and it still cannot run, they do."""
    c = cluster(1)
    gang(c, "big", 2, min_member=3, cpu="64")
    d = run(c)
    assert d.pending_reasons[next(iter(c.jobs))].kind == "InvalidJob"
    planner = PodConditions()
    assert planner.plan(c, d, STAMP) == ([], [])
    c.apply("Pod", "ADDED", f.pod("big-2", group="big", cpu="64"))
    patches, events = planner.plan(c, run(c), STAMP)
    assert sorted(name for _, name, _ in patches) == ["big-0", "big-1", "big-2"]
    assert [e.reason for e in events] == ["FailedScheduling"]
