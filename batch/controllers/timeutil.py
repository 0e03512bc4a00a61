"""Timestamps and Go durations as Kubernetes writes them (RFC 3339, `1m30s`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from batch.api.durations import duration_or_none as parse_duration
from batch.api.mergepatch import merge_patch
from batch.api.timestamps import format_time, parse_time

# merge_patch, parse_duration (None when absent or invalid), parse_time and format_time are
# re-exported for the controllers; their homes are batch.api.mergepatch, .durations, .timestamps
__all__ = ["format_time", "merge_patch", "parse_duration", "parse_time", "seconds_between"]


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start) / timedelta(seconds=1)
