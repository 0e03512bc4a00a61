"""Durations as Volcano's objects and arguments spell them: Go's ``time.ParseDuration``.

Why this exists: policy timeouts, CronJob intervals, the sla/minruntime/reservation plugin
arguments and the scheduler's command-line periods are all Go durations (``90s``, ``1h30m``,
``1.5h``, ``500ms``, ``0``); admission checks them and the controllers and plugins read them,
so the grammar is written once here. Extensions a caller may allow: ``d`` (a day, which Go
lacks but scheduler arguments accept), ``w`` (a week, for the ledger's ``--since 2w``) and a
bare number of seconds (``"120"``, ``120``).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "DurationError",
    "duration_or_none",
    "format_duration",
    "is_go_duration",
    "parse_duration",
]

_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DAY = 86400.0
_LONG = {"d": _DAY, "w": 7 * _DAY}  # units a caller must allow
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d|w)")


class DurationError(ValueError):
    """Not a duration; the message quotes the value and shows the expected spelling."""


def _go(text: str, *, long_units: str) -> float:
    """Seconds in an unsigned Go duration string (no surrounding space); ``long_units``: the
    units of ``_LONG`` allowed."""
    if text == "0":
        return 0.0
    pos = 0
    total = 0.0
    for m in _PART.finditer(text):
        unit = m.group(2)
        if m.start() != pos or (unit in _LONG and unit not in long_units):
            break
        total += float(m.group(1)) * (_LONG[unit] if unit in _LONG else _GO_UNITS[unit])
        pos = m.end()
    if pos == 0 or pos != len(text):
        raise DurationError(f"not a duration (use e.g. 90s, 5m, 1h30m): {text!r}")
    return total


def _bare_seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_duration(
    value: object,
    *,
    days: bool = False,
    weeks: bool = False,
    bare_seconds: bool = False,
    negative: bool = False,
) -> float:
    """Seconds in a Go duration (:class:`DurationError` when it is none).

    ``days``/``weeks``: accept the unit ``d``/``w``; ``bare_seconds``: accept a plain number (a
    string, or an int/float, which is always accepted); ``negative``: accept a leading sign as
    Go does. Surrounding whitespace is ignored.
    """
    if isinstance(value, bool):
        raise DurationError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        sign = -1.0 if text[0] == "-" else 1.0
        unsigned = text[1:] if text[0] in "+-" else text
        plain = _bare_seconds(text) if bare_seconds else None
        long_units = ("d" if days else "") + ("w" if weeks else "")
        seconds = plain if plain is not None else sign * _go(unsigned, long_units=long_units)
        if text[0] == "+" and not negative and plain is None:
            raise DurationError(f"not a duration (use e.g. 90s, 5m, 1h30m): {value!r}")
    else:
        raise DurationError(f"not a duration: {value!r}")
    if seconds < 0 and not negative:
        raise DurationError(f"duration must not be negative: {value!r}")
    return seconds


def duration_or_none(value: object, **options: bool) -> float | None:
    """:func:`parse_duration`, None when ``value`` is absent (None or ``""``) or invalid."""
    if value is None or value == "":
        return None
    try:
        return parse_duration(value, **options)
    except DurationError:
        return None


def is_go_duration(value: str) -> bool:
    """Whether ``value`` is exactly Go's ``time.ParseDuration`` grammar (sign allowed)."""
    if value != value.strip():
        return False
    return duration_or_none(value, negative=True) is not None


def format_duration(seconds: float) -> str:
    """Seconds as a short duration that :func:`parse_duration` (with ``days``) reads back,
    rounded to its two largest units: ``600`` -> ``10m``, ``5430`` -> ``1h30m``, ``45`` ->
    ``45s``, ``90061`` -> ``1d1h``."""
    left = max(round(seconds), 0)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        elif parts:
            parts.append("")
    return "".join(p for p in parts[:2] if p) or "0s"
