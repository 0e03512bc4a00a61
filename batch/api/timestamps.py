"""Kubernetes timestamps (RFC 3339, ``2026-12-01T10:00:00Z``): read and written one way.

Why this exists: controllers, the scheduler's model, the ledger and the kube layer all read
``creationTimestamp``, ``lastTransitionTime``, lease and credential times; a missing or
malformed one must mean "unknown" everywhere, never a traceback in a controller.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["epoch_seconds", "format_epoch", "format_time", "parse_time"]


def parse_time(value: object) -> dt.datetime | None:
    """An RFC 3339 timestamp (or a datetime) as an aware UTC datetime; None when missing or
    malformed. A time without an offset is taken as UTC."""
    if not value:
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    else:
        text = str(value)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


_epoch_cache: dict[str, float] = {}


def epoch_seconds(value: object) -> float:
    """:func:`parse_time` as seconds since the epoch, 0.0 when missing or malformed (memoised:
    the scheduler's cache reads the same few timestamps of many pods)."""
    if not isinstance(value, str) or not value:
        return 0.0
    seconds = _epoch_cache.get(value)
    if seconds is None:
        parsed = parse_time(value)
        seconds = parsed.timestamp() if parsed is not None else 0.0
        if len(_epoch_cache) < 100_000:
            _epoch_cache[value] = seconds
    return seconds


def format_time(when: dt.datetime) -> str:
    """RFC 3339 in UTC to the second, as the API server writes ``metav1.Time``."""
    return when.astimezone(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


#: day number since the epoch -> its "YYYY-MM-DDT" (``format_epoch``)
_DAYS: dict[int, str] = {}


def format_epoch(ts: float) -> str:
    """Epoch seconds ``ts`` as RFC 3339 seconds in UTC, as ``datetime.fromtimestamp(ts,
    UTC).strftime`` gives it (every scheduler session close asks: the date part is kept per
    day, the time worked out). A fraction within a microsecond of the next second (which
    ``datetime`` rounds up) and times before the epoch take ``datetime`` itself."""
    sec = int(ts)
    if ts < 0 or ts - sec >= 0.999999:
        return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    day, rest = divmod(sec, 86400)
    date = _DAYS.get(day)
    if date is None:
        if len(_DAYS) > 4096:
            _DAYS.clear()
        date = _DAYS[day] = dt.datetime.fromtimestamp(day * 86400, tz=dt.UTC).strftime("%Y-%m-%dT")
    hour, rest = divmod(rest, 3600)
    return f"{date}{hour:02d}:{rest // 60:02d}:{rest % 60:02d}Z"
