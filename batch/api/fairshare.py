"""The scheduler's fair-share figures of a queue, as published on the Queue object.

Why this exists: a queue's deserved share is computed in one place only, the fair-share plugin
(proportion or capacity) of a scheduling session. The scheduler service publishes what the
session computed on the Queue as the annotation `tephra.io/fair-share` (a Tephra addition;
Volcano has no such field), and every surface that shows a deserved share (the dashboard, `tephra
queue`, `tephra job why`) reads it from there instead of working out a figure of its own. This
module is the annotation's one definition: its key, how its value is written and read, and when
two values say the same.

The value is compact JSON: `{"deserved": {RESOURCE: QUANTITY}, "allocated": {...}, "request":
{...}, "session": "<session uid>"}`, quantities in Kubernetes form; with proportion's
`usageHalfLife` also `"usage": {"effectiveWeight": W, "share": U}` (the weight the share was
computed with, and the queue's share of all queues' decayed usage).
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
    #: usageHalfLife: the weight the share was computed with, and the queue's usage share
    effective_weight: float | None = None
    usage_share: float | None = None

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
    usage: tuple[float, float] | None = None,
) -> str:
    """The annotation's value for these figures (internal amounts), compact JSON; ``usage``:
    the effective weight and usage share, when the usage-decayed fair share computed them."""
    body: dict[str, Any] = {
        "deserved": format_resource_list(deserved),
        "allocated": format_resource_list(allocated),
        "request": format_resource_list(request),
        "session": session,
    }
    if usage is not None:
        body["usage"] = {"effectiveWeight": round(usage[0], 4), "share": round(usage[1], 4)}
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
    return None if body is None else {k: body.get(k) for k in (*FIGURES, "usage")}


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
    weight, share = _usage(body.get("usage"))
    return FairShare(
        **amounts,
        session=session if isinstance(session, str) else "",
        effective_weight=weight,
        usage_share=share,
    )


def _usage(value: Any) -> tuple[float | None, float | None]:
    """The usage figures of the value (None each: absent or unreadable)."""
    if not isinstance(value, dict):
        return None, None
    got = [value.get(k) for k in ("effectiveWeight", "share")]
    ok = [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in got]
    return ok[0], ok[1]
