"""The scheduler's fair-share figures of a queue, as published on the Queue object.

Why this exists: a queue's deserved share is computed in one place only, the fair-share plugin
(proportion or capacity) of a scheduling session. The scheduler service publishes what the
session computed on the Queue as the annotation `tephra.io/fair-share` (a Tephra addition;
Volcano has no such field), and every surface that shows a deserved share (the dashboard, `tephra
queue`, `tephra job why`) reads it from there instead of working out a figure of its own. This
module is the annotation's one definition: its key, how its value is written and read, and when
two values say the same.

The value is compact JSON: `{"deserved": {RESOURCE: QUANTITY}, "allocated": {...}, "request":
{...}, "session": "<session uid>"}`, quantities in Kubernetes form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batch.api.resources import format_resource_list, parse_resource_list

__all__ = [
    "FAIR_SHARE_ANNOTATION",
    "FIGURES",
    "FairShare",
    "fair_share_value",
    "read_fair_share",
    "same_figures",
]

FAIR_SHARE_ANNOTATION = "tephra.io/fair-share"
#: the resource maps of the value, in the order they are written
FIGURES = ("deserved", "allocated", "request")
#: the scheduler's session uids: `session-<cache generation>-<epoch milliseconds>`
_SESSION_UID = re.compile(r"^session-\d+-(\d+)$")


@dataclass(frozen=True, slots=True)
class FairShare:
    """A queue's figures as the scheduler published them (internal amounts per resource)."""

    deserved: dict[str, int]
    allocated: dict[str, int]
    request: dict[str, int]
    session: str

    @property
    def session_time(self) -> float | None:
        """When the session that computed these figures ran (epoch seconds), if its uid says."""
        found = _SESSION_UID.match(self.session)
        return int(found.group(1)) / 1000 if found else None


def fair_share_value(
    *,
    deserved: Mapping[str, int],
    allocated: Mapping[str, int],
    request: Mapping[str, int],
    session: str,
) -> str:
    """The annotation's value for these figures (internal amounts), compact JSON."""
    body = {
        "deserved": format_resource_list(deserved),
        "allocated": format_resource_list(allocated),
        "request": format_resource_list(request),
        "session": session,
    }
    return json.dumps(body, separators=(",", ":"))


def _body(value: str | None) -> dict[str, Any] | None:
    """The value's JSON (None: absent, or not this annotation's JSON)."""
    if not value:
        return None
    try:
        body = json.loads(value)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _figures(value: str | None) -> dict[str, Any] | None:
    body = _body(value)
    return None if body is None else {k: body.get(k) for k in FIGURES}


def same_figures(a: str | None, b: str | None) -> bool:
    """Whether two values say the same figures (the session uid aside)."""
    return _figures(a) == _figures(b)


def read_fair_share(queue: Mapping[str, Any]) -> FairShare | None:
    """The figures published on a Queue object (None: none published, or unreadable)."""
    annotations = (queue.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(FAIR_SHARE_ANNOTATION)
    body = _body(value if isinstance(value, str) else None)
    if body is None:
        return None
    try:
        amounts = {k: parse_resource_list(body.get(k) or {}) for k in FIGURES}
    except (ValueError, TypeError):  # a QuantityError, or a map that is not one
        return None
    session = body.get("session")
    return FairShare(**amounts, session=session if isinstance(session, str) else "")
