"""How many admissions the webhook works on at once, and the quick answer to the rest.

Why this exists: admission is CPU work in one Python process. Run on the event loop, one large
review held every other request behind it; eight 10,000-task VCJobs in parallel made an unrelated
review wait 9.2 s against the apiserver's 10 s timeout (issue 30 item 6). The gate runs at most
`slots` reviews at once, each in a worker thread so the loop keeps reading and answering (a small
review is interleaved with large ones instead of queued behind them), lets at most `waiting`
more wait for a slot, for no longer than the request's budget, and answers every other request
at once as busy. What "busy" means follows the webhook's failure policy (`busy_answer`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["AdmissionGate", "Busy"]

T = TypeVar("T")


class Busy(Exception):
    """No slot within the budget, or too many already waiting."""


class AdmissionGate:
    """At most `slots` admissions run (in threads), at most `waiting` more wait for one.

    Admissions are counted when they enter and when they leave, never read off the semaphore,
    whose state lags (Python 3.11's `wait_for` runs `acquire` as a task of its own): an
    admission that had taken its slot but not yet been handed it looked both running and
    waiting, so one within `slots + waiting` was refused; and admissions arriving before the
    first `acquire` ran all found the semaphore free, so more than `slots + waiting` got in.
    """

    def __init__(self, *, slots: int, waiting: int) -> None:
        if slots < 1 or waiting < 0:
            raise ValueError(f"slots must be >= 1 and waiting >= 0, not {slots}, {waiting}")
        self.slots, self.waiting = slots, waiting
        self._free = asyncio.Semaphore(slots)
        self._admitted = 0  # running or waiting for a slot
        self._running = 0
        self._change = asyncio.Event()
        self.refused = 0

    @property
    def running(self) -> int:
        """Admissions holding a slot (their worker thread started or about to)."""
        return self._running

    @property
    def queued(self) -> int:
        """Admissions let in that wait for a slot."""
        return self._admitted - self._running

    async def wait_until(self, *, running: int, queued: int) -> None:
        """Return once at least `running` admissions run and at least `queued` wait."""
        while self._running < running or self.queued < queued:
            await self._change.wait()

    def _changed(self) -> None:
        change, self._change = self._change, asyncio.Event()
        change.set()

    async def run(self, budget: float, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in a worker thread once a slot is free; `Busy` when none is within
        `budget` seconds, or at once when `slots` run and `waiting` already wait."""
        if self._admitted >= self.slots + self.waiting:
            self.refused += 1
            raise Busy(f"{self.running} admissions running and {self.queued} waiting")
        self._admitted += 1
        self._changed()
        try:
            await asyncio.wait_for(self._free.acquire(), budget)
        except BaseException as exc:  # no slot in time, or the request was cancelled
            self._admitted -= 1
            self._changed()
            if isinstance(exc, TimeoutError):
                self.refused += 1
                raise Busy(f"no admission slot free within {budget:.1f} s") from None
            raise
        self._running += 1
        self._changed()

        def finished(_: Any) -> None:
            self._running -= 1
            self._admitted -= 1
            self._free.release()
            self._changed()

        # the slot is held until the thread is done, even when the request is cancelled
        done = asyncio.ensure_future(asyncio.to_thread(work, *args))
        done.add_done_callback(finished)
        return await asyncio.shield(done)
