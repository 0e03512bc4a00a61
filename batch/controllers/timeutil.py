"""Timestamps and Go durations as Kubernetes writes them (RFC 3339, `1m30s`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from batch.api.mergepatch import merge_patch

# merge_patch is re-exported for the job controller; its home is batch.api.mergepatch
__all__ = ["format_time", "merge_patch", "parse_duration", "parse_time", "seconds_between"]

_DUR = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: Any) -> float | None:
    """Seconds in a Go duration string (`90s`, `1m30s`, `1h`), or None when absent/invalid."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    s = str(value).strip()
    if s == "0":
        return 0.0
    parts = _DUR.findall(s)
    if not parts or "".join(n + u for n, u in parts) != s:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    s = str(value)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def format_time(dt: datetime) -> str:
    return dt.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start) / timedelta(seconds=1)
