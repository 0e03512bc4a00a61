"""Pod admission: Volcano's job-disruption-budget annotations.

`volcano.sh/jdb-min-available` and `volcano.sh/jdb-max-unavailable` are each a positive integer
or a percentage between 1% and 99%, and a pod may carry at most one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from batch.api.constants import ANN_JDB_MAX_UNAVAILABLE, ANN_JDB_MIN_AVAILABLE

from .common import Errors

__all__ = ["validate_pod"]

_INT = re.compile(r"[0-9]+")
_PERCENT = re.compile(r"([0-9]+)%")


def _check_int_or_percent(key: str, value: Any, errors: Errors) -> None:
    path = f"metadata.annotations[{key}]"
    if not isinstance(value, str):
        errors.add(path, "type", "annotation values must be strings")
        return
    if _INT.fullmatch(value):
        if int(value) <= 0:
            errors.add(path, "intOrPercent", f"{value!r} must be a positive integer")
        return
    m = _PERCENT.fullmatch(value)
    if m is None:
        errors.add(path, "intOrPercent", f"{value!r} is neither an integer nor a percentage")
    elif not 1 <= int(m.group(1)) <= 99:
        errors.add(path, "intOrPercent", f"{value!r} must be a percentage between 1% and 99%")


def validate_pod(obj: Mapping[str, Any], errors: Errors) -> None:
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        errors.add("metadata", "type", "metadata must be an object")
        return
    ann = (meta or {}).get("annotations")
    if ann is None:
        return
    if not isinstance(ann, Mapping):
        errors.add("metadata.annotations", "type", "annotations must be an object")
        return
    present = [k for k in (ANN_JDB_MIN_AVAILABLE, ANN_JDB_MAX_UNAVAILABLE) if k in ann]
    if len(present) == 2:
        errors.add(
            "metadata.annotations",
            "jdbExclusive",
            f"{ANN_JDB_MIN_AVAILABLE} and {ANN_JDB_MAX_UNAVAILABLE} must not both be set",
        )
    for key in present:
        _check_int_or_percent(key, ann[key], errors)
