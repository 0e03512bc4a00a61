"""Whether the ledger takes writes now: one answer for health endpoints and metrics.

Why this exists: the ledger is a recorder, so the controllers and the scheduler run on while its
database is unreachable or its schema is not at head, and their records wait in a spill file.
That must be visible without reading logs: `Recorder.health()` says so as a `LedgerHealth`, the
services' `/healthz` print its `line()`, and `LedgerCollector` exports it as the gauge
`tephra_ledger_up{component=...}` (1 up, 0 down), for an alert on a ledger down too long.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["HasHealth", "LedgerCollector", "LedgerHealth"]


@dataclass(frozen=True, slots=True)
class LedgerHealth:
    """``up``: the last write (or schema check) succeeded; else why not, since when, and where
    the records wait meanwhile."""

    up: bool
    url: str  # password hidden
    spill_path: Path
    reason: str | None = None
    since: dt.datetime | None = None

    def line(self) -> str:
        if self.up:
            return f"ledger up ({self.url})"
        since = f" since {self.since.isoformat(timespec='seconds')}" if self.since else ""
        return f"ledger down{since} ({self.url}: {self.reason}); recording to {self.spill_path}"


class HasHealth(Protocol):
    def health(self) -> LedgerHealth: ...


class LedgerCollector(Collector):
    """``tephra_ledger_up{component}`` read from the recorder at scrape time."""

    def __init__(self, source: HasHealth, component: str) -> None:
        self._source = source
        self._component = component

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "tephra_ledger_up",
            "1 while the ledger database takes this component's records; 0 while it is "
            "unreachable or its schema is not at head (records wait in the spill file)",
            labels=["component"],
        )
        gauge.add_metric([self._component], 1.0 if self._source.health().up else 0.0)
        yield gauge
