"""History from the ledger for the dashboard: waits, GPU-hours per queue per day, preemptions,
and fairness (each queue's average GPUs allocated against deserved, from the share samples).
Jobs still waiting count with their wait so far, as in `tephra report`; the rows say which of
their figures are therefore lower bounds (`at_least`).

Why this exists: the trends a team lead asks about are the ledger's report views
(`batch.ledger.reports`, the ones `tephra report` prints); this module only picks the window and
shapes the reports for the page. The queries are synchronous SQLAlchemy; the server runs them in
a worker thread and caches the answer for `TTL` seconds, so reloading a page does not rescan.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from batch.ledger.reports import Filters, Report, fairness, preemptions, usage, wait_times

__all__ = ["History"]

TTL = 15.0


def _problem(exc: SQLAlchemyError) -> str:
    """The driver's first line (not the SQL), and what to do about a missing schema."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    detail = lines[0] if lines else type(exc).__name__
    if "no such table" in detail or "does not exist" in detail:
        return f"the ledger has no schema yet ({detail}); run `tephra db upgrade`"
    return f"the ledger cannot be read: {detail}"


@dataclass
class History:
    """The ledger's reports over the last `days` days, cached for TTL seconds."""

    engine: Engine | None
    days: int = 7
    ttl: float = TTL
    #: the page's "now": the end of the window, and until when jobs still waiting have waited
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    _cache: tuple[float, dict[str, Any]] | None = field(default=None, repr=False)

    def read(self) -> dict[str, Any]:
        if self.engine is None:
            return {"ledger": False, "days": self.days}
        if self._cache is not None and time.monotonic() - self._cache[0] < self.ttl:
            return self._cache[1]
        try:
            answer = self._query()
        except SQLAlchemyError as exc:  # an unreachable or unmigrated ledger: say so on the page
            return {"ledger": False, "days": self.days, "error": _problem(exc)}
        self._cache = (time.monotonic(), answer)
        return answer

    def _query(self) -> dict[str, Any]:
        assert self.engine is not None
        until = self.clock()
        filters = Filters(since=until - dt.timedelta(days=self.days), until=until, now=until)
        with self.engine.connect() as conn:
            answer = {
                "ledger": True,
                "days": self.days,
                "since": filters.since.isoformat(timespec="seconds") if filters.since else None,
                "until": until.isoformat(timespec="seconds"),
                "wait_times": _marked(wait_times(conn, filters)),
                "usage": usage(conn, filters, by=("day", "queue")).as_dicts(),
                "preemptions": preemptions(conn, filters).as_dicts(),
                "fairness": _marked(fairness(conn, filters)),
            }
        return answer


def _marked(report: Report) -> list[dict[str, Any]]:
    """The report's rows, each with `at_least`: the figures that are lower bounds (they count
    jobs still waiting with their wait so far)."""
    marks = report.at_least or [frozenset()] * len(report.rows)
    return [{**row, "at_least": sorted(m)} for row, m in zip(report.as_dicts(), marks, strict=True)]
