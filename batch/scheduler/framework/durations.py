"""Durations in scheduler arguments and annotations, and how long a pod has been running.

``parse_duration`` reads the forms the time-based plugins accept (``90s``, ``5m``, ``1h30m``,
``2.5m``, plain seconds); ``task_start`` is when a pod started running, as minruntime and
reservation measure it.
"""

from __future__ import annotations

import re

from batch.model.info import TaskInfo
from batch.model.parse import parse_time

_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> float:
    """``"1h30m"`` / ``"90s"`` / ``"2.5m"`` / ``"120"`` / ``120`` -> seconds (ValueError)."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"duration must not be negative: {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a duration: {value!r}")
    s = value.strip()
    try:
        f = float(s)
    except ValueError:
        pass
    else:
        if f < 0:
            raise ValueError(f"duration must not be negative: {value!r}")
        return f
    pos = 0
    total = 0.0
    for m in _DUR.finditer(s):
        if m.start() != pos:
            raise ValueError(f"not a duration: {value!r}")
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError(f"not a duration (use e.g. 90s, 5m, 1h30m): {value!r}")
    return total


def task_start(task: TaskInfo) -> float:
    """When the pod started running: ``status.startTime``, else its creation time."""
    raw = task.raw
    if raw is not None:
        status = raw.get("status")
        if isinstance(status, dict):
            t = parse_time(status.get("startTime"))
            if t:
                return t
    return task.creation
