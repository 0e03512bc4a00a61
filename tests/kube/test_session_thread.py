"""The session runs in a thread of its own, beside the event loop (issue 33).

A 20,000-job session held the event loop for 4 s: no bind answer, event or status write moved
meanwhile. The pure session now runs in a worker thread; what would change the cache while it
reads it (watch events, bind answers, usage reads) is held back and applied once the session's
decisions are dispatched. Counts and order only, no wall-clock bound.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from batch.kube.config import ClusterAccess
from batch.kube.dispatch import InFlight, StatusQueue
from batch.kube.service import Outbox, SchedulerOptions, SchedulerService
from batch.kube.status import StatusWriter
from batch.model import fixtures
from batch.sandbox.nodes import make_nodes
from batch.scheduler.framework.decisions import Decisions
from batch.scheduler.framework.session import Session
from tests.kube.answers import wait_amid_answers


def test_the_loop_runs_and_the_cache_holds_still_while_a_session_runs() -> None:
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    inside, go = threading.Event(), threading.Event()
    seen: list[int] = []  # the cache's generation as the session began and as it ended
    run_once = service.scheduler.run_once

    def session(now: float) -> Decisions:
        seen.append(service.cache.generation)
        inside.set()
        go.wait(30)
        seen.append(service.cache.generation)
        return run_once(now)

    service.scheduler.run_once = session  # type: ignore[method-assign]

    async def main() -> tuple[int, bool]:
        out = Outbox(
            binder=None,  # type: ignore[arg-type]
            evictor=None,  # type: ignore[arg-type]
            requests=InFlight(workers=1, limit=2),
            statuses=StatusQueue(StatusWriter(None)),  # type: ignore[arg-type]
        )
        running = asyncio.create_task(service.run_once(out))
        ticks = 0
        try:
            while not inside.is_set():
                await asyncio.sleep(0.01)
            for node in make_nodes(count=3):
                service._sink("Node", "ADDED", node)  # a watch event, while the session runs
            for _ in range(10):
                await asyncio.sleep(0)
                ticks += 1  # the loop goes on meanwhile
            held = not service.cache.nodes.by_name
        finally:
            go.set()
        await running
        await out.statuses.close(0)
        return ticks, held

    ticks, held = asyncio.run(main())
    assert ticks == 10
    assert held, "a watch event changed the cache under a running session"
    assert seen[0] == seen[1]
    assert len(service.cache.nodes.by_name) == 3  # applied once the session was over
    assert service.sessions == 1


def test_a_session_comes_between_binds_that_answer_all_the_time() -> None:
    """While binds are queued, `_room` lets a session through once `BUSY_SESSION_GAP` times
    the last session's length has passed, however often binds answer meanwhile. It used to
    cancel `room()` with an outer `asyncio.wait_for`, whose cancellation Python 3.11 swallowed
    whenever an answer woke the inner wait at once: on the real apiserver one session ran in
    four minutes of 20,000 binds (issue 33). Liveness only: it must return."""
    service = SchedulerService(
        SchedulerOptions(schedule_period=0.05), access=ClusterAccess(server="http://x")
    )
    service.session_seconds = 0.02

    async def main() -> bool:
        flight = InFlight(workers=1, limit=1)
        never = asyncio.Event()
        flight.submit(never.wait, lambda: None, kind="bind")  # on the wire for good
        out = Outbox(
            binder=None,  # type: ignore[arg-type]
            evictor=None,  # type: ignore[arg-type]
            requests=flight,
            statuses=StatusQueue(StatusWriter(None)),  # type: ignore[arg-type]
        )
        room = await wait_amid_answers(flight, service._room(out, asyncio.Event()))
        never.set()
        await flight.close(1.0)
        return room is not None

    assert asyncio.run(main()), "no session while binds kept answering"


class _BindsOnTheWire:
    """A binder whose binds are never answered: every bind stays on its way."""

    def __init__(self) -> None:
        self.sent = 0

    async def bind_one(self, req: Any, guard: Any = None) -> Any:
        self.sent += 1
        await asyncio.Event().wait()


def test_a_session_beside_the_binds_does_not_admit_their_jobs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PodGroup's status is not written while its binds are on their way, so the watch
    shows it Pending until long after; every session beside 20,000 binds admitted (enqueue)
    all 20,000 jobs again, which changed every job and took seconds (issue 33). The phases a
    session decides are assumed in the cache until the watch shows them: the next session
    admits none of them again. Counts only."""
    jobs = 12
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    for node in make_nodes(count=2, gpus=0, cpu="64", memory="256Gi"):
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        service._sink("Node", "ADDED", node)
    for q in ("root", "default"):
        service._sink("Queue", "ADDED", fixtures.queue(q))
    for i in range(jobs):
        service._sink("PodGroup", "ADDED", fixtures.podgroup(f"j{i}"))
        service._sink("Pod", "ADDED", fixtures.pod(f"j{i}", group=f"j{i}", cpu="1"))
    admitted: list[str] = []
    set_phase = Session.set_phase

    def counted(self: Session, job: Any, phase: str) -> None:
        admitted.append(phase)
        set_phase(self, job, phase)

    monkeypatch.setattr(Session, "set_phase", counted)
    binder = _BindsOnTheWire()

    async def main() -> list[int]:
        out = Outbox(
            binder=binder,  # type: ignore[arg-type]
            evictor=None,  # type: ignore[arg-type]
            requests=InFlight(workers=jobs, limit=jobs + 1),
            statuses=StatusQueue(StatusWriter(None), allowed=lambda: False),  # type: ignore[arg-type]
        )
        counts = []
        for _ in range(2):
            await service.run_once(out)
            counts.append(len(admitted))
            await asyncio.sleep(0)
        await out.requests.close(0)
        await out.statuses.close(0)
        return counts

    first, second = asyncio.run(main())
    assert binder.sent == jobs  # every job bound in the first session, no bind seen yet
    assert first == jobs  # the first session admitted each job once
    phases = {job.phase for job in service.cache.jobs.values()}
    assert phases == {"Inqueue"}, phases  # as the first session decided, not yet written
    assert second == first, admitted  # the second admitted none again
    assert service.sessions == 2
