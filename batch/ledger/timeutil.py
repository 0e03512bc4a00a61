"""Parsing the times and durations users type: ``7d``, ``12h``, ``2026-12-01``, ``now``.

Shared by ``tephra report --since/--until`` and ``tephra db prune --older-than`` so that both
accept the same spellings and fail with the same one-line message.
"""

from __future__ import annotations

import datetime as dt

from batch.api import durations
from batch.api.errors import UserError


class TimeSpecError(UserError):
    """A time or duration the user typed is not understood."""


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``12h``, ``1d12h``, ``30m``, ``2w``: Go's grammar with days and weeks."""
    try:
        seconds = durations.parse_duration(text, days=True, weeks=True)
    except durations.DurationError:
        raise TimeSpecError(
            f"{text!r} is not a duration (use a number and a unit: 30m, 12h, 1d12h, 7d, 2w)"
        ) from None
    return dt.timedelta(seconds=seconds)


def parse_when(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An absolute time (ISO date or timestamp, UTC unless an offset is given), ``now``, or a
    duration meaning that long ago (``7d`` = seven days before now)."""
    current = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    value = text.strip()
    if value.lower() == "now":
        return current
    if durations.duration_or_none(value, days=True, weeks=True) is not None:
        return current - parse_duration(value)
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise TimeSpecError(
            f"{text!r} is not a time (use 2026-12-01, 2026-12-01T10:00:00Z, now, or 7d for "
            "seven days ago)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)
