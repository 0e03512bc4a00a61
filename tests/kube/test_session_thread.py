"""The session runs in a thread of its own, beside the event loop (issue 33).

A 20,000-job session held the event loop for 4 s: no bind answer, event or status write moved
meanwhile. The pure session now runs in a worker thread; what would change the cache while it
reads it (watch events, bind answers, usage reads) is held back and applied once the session's
decisions are dispatched. Counts and order only, no wall-clock bound.
"""

from __future__ import annotations

import asyncio
import threading

from batch.kube.config import ClusterAccess
from batch.kube.dispatch import InFlight, StatusQueue
from batch.kube.service import Outbox, SchedulerOptions, SchedulerService
from batch.kube.status import StatusWriter
from batch.sandbox.nodes import make_nodes
from batch.scheduler.framework.decisions import Decisions


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
        answering = True

        async def answers() -> None:  # another bind answered at every turn of the loop
            while answering:
                flight._changed.set()
                await asyncio.sleep(0)

        churn = asyncio.create_task(answers())
        room = asyncio.create_task(service._room(out, asyncio.Event()))
        done, _ = await asyncio.wait({room}, timeout=30)
        answering = False
        await churn
        never.set()
        await flight.close(1.0)
        return room in done

    assert asyncio.run(main()), "no session while binds kept answering"
