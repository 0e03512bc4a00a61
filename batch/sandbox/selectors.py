"""Label and field selectors, parsed once per request and matched per object.

Grammar as in `k8s.io/apimachinery/pkg/labels` (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`) and `fields` (`a=b`, `a==b`, `a!=b`, comma = and). Field selectors only
accept the fields a real API server accepts for the kind (400 otherwise), so code written against
the sandbox also works on a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from batch.sandbox.errors import ApiError

Matcher = Callable[[Mapping[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_.\-/]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def _req_eq(key: str, value: str, equal: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (labels.get(key) == value) == equal

    return req


def _req_in(key: str, values: frozenset[str], inside: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (labels.get(key) in values) == inside

    return req


def _req_exists(key: str, exists: bool) -> Matcher:
    def req(labels: Mapping[str, Any]) -> bool:
        return (key in labels) == exists

    return req


def parse_label_selector(text: str | None) -> Matcher | None:
    """A predicate over a labels mapping, or None for "everything"."""
    if not text or not text.strip():
        return None
    reqs: list[Callable[[Mapping[str, Any]], bool]] = []
    for part in _split_top(text):
        op = None
        for candidate in ("!=", "==", "="):
            if candidate in part:
                op = candidate
                break
        if op is not None and "(" not in part:
            key, _, value = part.partition(op)
            key, value = key.strip(), value.strip()
            if not key:
                raise ApiError(400, f"unable to parse requirement: {part!r}")
            reqs.append(_req_eq(key, value, op != "!="))
            continue
        m = _SET_RE.match(part)
        if not m:
            raise ApiError(400, f"unable to parse requirement: {part!r}")
        neg, key, setop, values = m.groups()
        if setop:
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            reqs.append(_req_in(key, vals, setop == "in"))
        else:
            reqs.append(_req_exists(key, not neg))

    def match(labels: Mapping[str, Any]) -> bool:
        return all(r(labels) for r in reqs)

    return match


def selector_from_label_selector(sel: Mapping[str, Any] | None) -> Matcher | None:
    """A predicate from a `LabelSelector` object (matchLabels + matchExpressions)."""
    if not sel:
        return None
    ml = dict(sel.get("matchLabels") or {})
    exprs = list(sel.get("matchExpressions") or [])

    def match(labels: Mapping[str, Any]) -> bool:
        for k, v in ml.items():
            if labels.get(k) != v:
                return False
        for e in exprs:
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and labels.get(key) in values:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
        return True

    return match


def get_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _field_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):  # events' source is "component" in selectors
        return str(value.get("component", ""))
    return str(value)


def parse_field_selector(
    text: str | None, *, allowed: tuple[str, ...], kind: str
) -> Matcher | None:
    """A predicate over a whole object, or None for "everything"."""
    if not text or not text.strip():
        return None
    reqs: list[tuple[str, bool, str]] = []
    for part in _split_top(text):
        if "!=" in part:
            key, _, value = part.partition("!=")
            eq = False
        elif "==" in part:
            key, _, value = part.partition("==")
            eq = True
        elif "=" in part:
            key, _, value = part.partition("=")
            eq = True
        else:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{part}'")
        key = key.strip()
        if key not in allowed:
            raise ApiError(
                400,
                f'field label not supported: "{key}" (for {kind}: {", ".join(allowed)})',
            )
        reqs.append((key, eq, value.strip()))

    def match(obj: Mapping[str, Any]) -> bool:
        for key, eq, value in reqs:
            actual = _field_str(get_path(obj, key))
            if (actual == value) != eq:
                return False
        return True

    return match
