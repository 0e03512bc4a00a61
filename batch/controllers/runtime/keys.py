"""Keys of work: the de-duplicating work queue, and the timers that put a key back on it.

A key names what to reconcile: (kind, namespace, name), kind one of `job`, `queue`, `pod`,
`pg` or the CronJob key. Delayed work (policy timeouts, `ttlSecondsAfterFinished`, retries) is
scheduled with APScheduler, whose jobs put the key back on the queue from the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

Key = tuple[str, str, str]  # (kind, namespace, name)


class WorkQueue:
    """De-duplicating keyed queue; one in-flight run per key."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._running: set[Key] = set()
        self._again: set[Key] = set()

    def add(self, key: Key) -> None:
        if key in self._running:
            self._again.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    async def get(self) -> Key:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if key in self._running:
                self._again.add(key)
                continue
            self._running.add(key)
            return key

    def done(self, key: Key) -> None:
        self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def idle(self) -> bool:
        return not self._queued and not self._running and not self._again


class Keys:
    """The work queue (None until the manager runs) and the timers (None until it works)."""

    def __init__(self) -> None:
        self.queue: WorkQueue | None = None
        #: APScheduler's AsyncIOScheduler while the manager works
        self.timers: Any = None

    def enqueue(self, key: Key) -> None:
        if self.queue is not None:
            self.queue.add(key)

    async def _enqueue_due(self, key: Key) -> None:
        # A coroutine, so APScheduler's AsyncIOExecutor runs it on the event loop: the work
        # queue (an asyncio.Queue and plain sets) must never be touched from its thread pool.
        self.enqueue(key)

    def enqueue_later(self, key: Key, seconds: float) -> None:
        self.call_later(self._enqueue_due, max(0.05, seconds), args=[key], job_id="/".join(key))

    def call_later(
        self, func: Callable[..., Any], seconds: float, *, args: Sequence[Any], job_id: str
    ) -> None:
        """Run ``func(*args)`` in ``seconds`` (replacing the timer ``job_id`` had)."""
        if self.timers is None:
            return
        self.timers.add_job(
            func,
            "date",
            run_date=datetime.now(UTC) + timedelta(seconds=seconds),
            args=list(args),
            id=job_id,
            replace_existing=True,
            misfire_grace_time=None,
        )

    def start_timers(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.timers = AsyncIOScheduler(timezone=UTC)
        self.timers.start()

    def stop_timers(self) -> None:
        with contextlib.suppress(Exception):
            self.timers.shutdown(wait=False)

    def idle(self) -> bool:
        return self.queue is None or self.queue.idle()
