"""Timestamps and Go durations as Kubernetes writes them (RFC 3339, `1m30s`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batch.api.durations import duration_or_none as parse_duration
from batch.api.mergepatch import merge_patch

# merge_patch and parse_duration (None when absent or invalid) are re-exported for the
# controllers; their homes are batch.api.mergepatch and batch.api.durations
__all__ = ["format_time", "merge_patch", "parse_duration", "parse_time", "seconds_between"]


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
