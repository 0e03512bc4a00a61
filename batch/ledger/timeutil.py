"""Parsing the times and durations users type: ``7d``, ``12h``, ``2026-12-01``, ``now``.

Shared by ``tephra report --since/--until`` and ``tephra db prune --older-than`` so that both
accept the same spellings and fail with the same one-line message.
"""

from __future__ import annotations

import datetime as dt
import re

from batch.api.errors import UserError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class TimeSpecError(UserError):
    """A time or duration the user typed is not understood."""


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` (a number and one unit)."""
    match = _DURATION.match(text)
    if not match:
        raise TimeSpecError(
            f"{text!r} is not a duration (use a number and a unit: 30m, 12h, 7d, 2w)"
        )
    return dt.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2).lower()])


def parse_when(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An absolute time (ISO date or timestamp, UTC unless an offset is given), ``now``, or a
    duration meaning that long ago (``7d`` = seven days before now)."""
    current = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    value = text.strip()
    if value.lower() == "now":
        return current
    if _DURATION.match(value):
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
