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
    """At most `slots` admissions run (in threads), at most `waiting` more wait for one."""

    def __init__(self, *, slots: int, waiting: int) -> None:
        if slots < 1 or waiting < 0:
            raise ValueError(f"slots must be >= 1 and waiting >= 0, not {slots}, {waiting}")
        self.slots, self.waiting = slots, waiting
        self._free = asyncio.Semaphore(slots)
        self._queued = 0
        self.refused = 0

    async def run(self, budget: float, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in a worker thread once a slot is free; `Busy` when none is within
        `budget` seconds, or at once when `waiting` requests already wait."""
        if self._free.locked() and self._queued >= self.waiting:
            self.refused += 1
            raise Busy(f"{self.slots} admissions running and {self._queued} waiting")
        self._queued += 1
        try:
            await asyncio.wait_for(self._free.acquire(), budget)
        except TimeoutError:
            self.refused += 1
            raise Busy(f"no admission slot free within {budget:.1f} s") from None
        finally:
            self._queued -= 1
        # the slot is held until the thread is done, even when the request is cancelled
        done = asyncio.ensure_future(asyncio.to_thread(work, *args))
        done.add_done_callback(lambda _: self._free.release())
        return await asyncio.shield(done)
