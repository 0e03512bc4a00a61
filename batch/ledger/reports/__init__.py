"""The reports behind ``tephra report``: aggregations over the SQL views.

Every report reads one of the views created by migration 0002 (``report_*``), so what the CLI
shows is what a user gets by querying the view directly. Filters are applied to columns that
map straight onto indexed table columns (submission, finish, start times), so PostgreSQL can
answer over millions of rows without scanning them all. Percentiles come from
``percentile_cont`` on PostgreSQL and from the same linear interpolation in Python on SQLite.

One module per report (`waits`, `usage_hours`, `preempted`, `job_outcomes`, `queue_shares`) over
what they share (`shared`: `Report`, `Filters`, the window's whole days, SQL helpers);
`rendering` prints one.
This module is their public face and the registry `tephra report` picks from.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from batch.ledger.reports.job_outcomes import OUTCOMES, outcomes, outcomes_raw
from batch.ledger.reports.preempted import preemptions
from batch.ledger.reports.queue_shares import fairness
from batch.ledger.reports.rendering import render
from batch.ledger.reports.shared import GPU, PERCENTILES, Filters, Report, percentile
from batch.ledger.reports.usage_hours import USAGE_GROUPS, usage
from batch.ledger.reports.waits import WAIT_STATS, still_waiting, wait_times, wait_times_raw

__all__ = [
    "GPU",
    "OUTCOMES",
    "PERCENTILES",
    "REPORTS",
    "USAGE_GROUPS",
    "WAIT_STATS",
    "Filters",
    "Report",
    "fairness",
    "outcomes",
    "outcomes_raw",
    "percentile",
    "preemptions",
    "render",
    "still_waiting",
    "usage",
    "wait_times",
    "wait_times_raw",
]

REPORTS: dict[str, Callable[[Connection, Filters], Report]] = {
    "wait-times": wait_times,
    "usage": usage,
    "preemptions": preemptions,
    "outcomes": outcomes,
    "fairness": fairness,
}
