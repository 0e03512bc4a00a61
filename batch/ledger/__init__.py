"""The job ledger: SQLAlchemy models, the idempotent recorder, reports and retention.

What callers use:

* ``Recorder`` (``batch.ledger.recorder``) — ``record(events)`` / ``record_one(event)``,
  ``flush()``, ``close()``, ``start_usage_sampler(source)``;
* the event classes (``batch.ledger.events``) and the converters from raw Kubernetes objects
  (``batch.ledger.convert``: ``events_from_job``, ``events_from_podgroup``, ``events_from_pod``,
  ``events_from_queue``, ``usage_samples_from_queues``);
* ``batch.ledger.migrate`` (``upgrade``/``downgrade``/``current_revision``) and
  ``batch.ledger.db`` (URL resolution: ``--db``, ``TEPHRA_DB_URL``, default SQLite file).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batch.ledger.convert import (
        events_from_job,
        events_from_pod,
        events_from_podgroup,
        events_from_queue,
        usage_samples_from_queues,
    )
    from batch.ledger.db import default_url, make_engine, resolve_url
    from batch.ledger.events import (
        JobObserved,
        JobPhaseChanged,
        LedgerEvent,
        PodAttempt,
        QueueConfigChanged,
        QueueUsageSample,
        SchedulingEvent,
    )
    from batch.ledger.recorder import Recorder, RecorderStats
    from batch.ledger.sampler import UsageSource

#: where each name of `__all__` lives: imported on first use, so that a command that needs one
#: module of the ledger (`tephra report` its queries) does not import the recorder, its writer
#: and the PostgreSQL driver too
_HOMES = {
    **dict.fromkeys(
        (
            "events_from_job",
            "events_from_pod",
            "events_from_podgroup",
            "events_from_queue",
            "usage_samples_from_queues",
        ),
        "batch.ledger.convert",
    ),
    **dict.fromkeys(("default_url", "make_engine", "resolve_url"), "batch.ledger.db"),
    **dict.fromkeys(
        (
            "JobObserved",
            "JobPhaseChanged",
            "LedgerEvent",
            "PodAttempt",
            "QueueConfigChanged",
            "QueueUsageSample",
            "SchedulingEvent",
        ),
        "batch.ledger.events",
    ),
    **dict.fromkeys(("Recorder", "RecorderStats"), "batch.ledger.recorder"),
    "UsageSource": "batch.ledger.sampler",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "JobObserved",
    "JobPhaseChanged",
    "LedgerEvent",
    "PodAttempt",
    "QueueConfigChanged",
    "QueueUsageSample",
    "Recorder",
    "RecorderStats",
    "SchedulingEvent",
    "UsageSource",
    "default_url",
    "events_from_job",
    "events_from_pod",
    "events_from_podgroup",
    "events_from_queue",
    "make_engine",
    "resolve_url",
    "usage_samples_from_queues",
]
