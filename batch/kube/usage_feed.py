"""Keeps the cache's decayed queue usage (`ClusterCache.queue_usage`) fresh from the ledger.

Why this exists: proportion's `usageHalfLife` (docs/scheduler.md#usage-decayed-fair-share)
reads what each queue used lately, and the scheduler core does no I/O. The scheduler service
asks the ledger (`Recorder.decayed_usage`, one SQL query) every `period` seconds, never every
session, on a worker thread; the answer is put on the cache on the event loop, the only thread
that changes the cache. The ledger is the memory, so a restarted scheduler has the same usage
after its first refresh. No ledger, or the ledger unreadable: no usage on the cache, so the
plain weights decide; said once in the log and by `tephra_queue_usage_available` (0).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Protocol

from batch.model.cache import ClusterCache
from batch.model.usage import REFRESH_SECONDS, QueueUsage
from batch.scheduler.framework.conf import SchedulerConfig
from batch.scheduler.plugins.proportion.usage import UsageDecay, configured_decay

__all__ = ["UsageFeed"]

log = logging.getLogger(__name__)

#: seconds between ledger reads, and before trying again after a failed one
PERIOD = REFRESH_SECONDS
RETRY = 5.0


class UsageReader(Protocol):
    """What the feed asks (the scheduler's ledger recorder)."""

    def decayed_usage(self, half_life: float) -> QueueUsage | None: ...


class UsageFeed:
    """Refreshes one cache's usage figures from a reader, at most every ``period`` seconds."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        period: float = PERIOD,
        on_state: Callable[[bool | None], None] = lambda _: None,
        change: Callable[[Callable[[], None]], None] = lambda apply: apply(),
    ) -> None:
        self.cache = cache
        #: makes a change to the cache (the scheduler service holds it back while a session
        #: reads the cache in its thread)
        self.change = change
        self.period = period
        self.on_state = on_state  # True: figures current, False: unavailable, None: not asked
        self._due = 0.0
        self._reading: asyncio.Future[QueueUsage | None] | None = None
        self._available: bool | None = None
        self._config: tuple[SchedulerConfig, UsageDecay | None] | None = None
        self.reads = 0

    def tick(self, config: SchedulerConfig, reader: UsageReader | None) -> None:
        """Before a session: start a read when one is due (never more than one at a time)."""
        if self._config is None or self._config[0] is not config:
            self._config = (config, configured_decay(config))
        decay = self._config[1]
        if decay is None or reader is None:
            self._state(None if decay is None else False, "no ledger (--db) to read usage from")
            self.cache.set_queue_usage(None)
            return
        now = time.monotonic()
        if self._reading is not None or now < self._due:
            return
        self._due = now + self.period
        loop = asyncio.get_running_loop()
        self._reading = loop.run_in_executor(None, reader.decayed_usage, decay.half_life)
        self._reading.add_done_callback(self._read)

    async def settled(self) -> None:
        """Wait for the read in progress, if any, to reach the cache."""
        reading = self._reading
        if reading is not None:
            await asyncio.wait([reading])
            await asyncio.sleep(0)  # the done callback runs on the loop

    def _read(self, fut: asyncio.Future[QueueUsage | None]) -> None:
        self._reading = None
        self.reads += 1
        usage = None if fut.cancelled() or fut.exception() is not None else fut.result()
        if usage is None:
            self._due = min(self._due, time.monotonic() + RETRY)
            self._state(False, "the ledger cannot be read now")
        else:
            self._state(True, "")
        self.change(functools.partial(self.cache.set_queue_usage, usage))

    def _state(self, available: bool | None, why: str) -> None:
        if available == self._available:
            return
        if available is False:
            log.warning("usage-decayed fair share off, plain queue weights: %s", why)
        elif available and self._available is False:
            log.info("usage-decayed fair share on again: queue usage read from the ledger")
        self._available = available
        self.on_state(available)
