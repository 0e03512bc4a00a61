"""Periodic queue usage samples, scheduled with apscheduler.

The fairness report compares what each queue got with what it deserved over time; that needs a
regular time series, not just change events. The scheduler service provides a callable returning
the current ``QueueUsageSample`` per queue (from its cache: allocated, deserved, pending demand);
this job calls it every interval and hands the result to the recorder. Sample times are rounded
down to the interval so that two processes (or a restart) sampling in the same slot produce the
same identity and the recorder keeps one.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from apscheduler.schedulers.background import BackgroundScheduler

from batch.ledger.events import LedgerEvent

log = logging.getLogger(__name__)


class UsageSource(Protocol):
    """Returns the current queue usage samples (the scheduler service's cache provides them)."""

    def __call__(self, at: dt.datetime) -> Iterable[LedgerEvent]: ...


class SampleSink(Protocol):
    """Where samples go (the ledger's ``Recorder``)."""

    def record(self, events: Iterable[LedgerEvent]) -> Any: ...


def slot_time(now: dt.datetime, interval_seconds: float) -> dt.datetime:
    """``now`` rounded down to a multiple of the interval since the epoch (UTC)."""
    step = max(1, round(interval_seconds))
    epoch = int(now.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % step, tz=dt.UTC)


class UsageSampler:
    """Calls ``source(at)`` every ``interval_seconds`` and records the samples."""

    def __init__(
        self, recorder: SampleSink, source: UsageSource, *, interval_seconds: float = 60.0
    ) -> None:
        self.recorder = recorder
        self.source = source
        self.interval_seconds = interval_seconds
        self._scheduler: Any = None

    def sample_now(self, now: dt.datetime | None = None) -> int:
        """Take one sample immediately; returns the number of events recorded."""
        at = slot_time(now or dt.datetime.now(dt.UTC), self.interval_seconds)
        try:
            samples = list(self.source(at))
        except Exception:
            log.exception("queue usage source failed; sample at %s skipped", at.isoformat())
            return 0
        self.recorder.record(samples)
        return len(samples)

    def start(self) -> None:
        if self._scheduler is not None:
            return
        scheduler = BackgroundScheduler(timezone=dt.UTC)
        scheduler.add_job(
            self.sample_now,
            "interval",
            seconds=self.interval_seconds,
            id="tephra-ledger-usage-sample",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(self.interval_seconds)),
        )
        scheduler.start()
        self._scheduler = scheduler

    def shutdown(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
