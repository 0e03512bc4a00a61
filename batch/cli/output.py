"""One output flag for every command that lists something: `-o/--output`, as kubectl spells it.

`table` (the default) is vcctl's columns; `wide` adds columns, as `kubectl get -o wide` does;
`json` and `yaml` print the objects themselves (a `v1 List` for a listing, as kubectl prints
one), for scripts. Commands whose rows are not Kubernetes objects (reports, what-if) print their
rows as JSON/YAML records instead. Ages and event times are written as kubectl writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import yaml

__all__ = [
    "OBJECT_FORMATS",
    "dump",
    "event_age",
    "event_source",
    "human_duration",
    "output_option",
    "print_list",
    "since",
]

F = TypeVar("F", bound=Callable[..., Any])

#: what every listing of Kubernetes objects accepts
OBJECT_FORMATS = ("table", "wide", "json", "yaml")


def output_option(formats: Sequence[str] = OBJECT_FORMATS) -> Callable[[F], F]:
    """`-o/--output FORMAT` (default `table`), the one spelling across the CLI."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(list(formats)),
        default="table",
        show_default=True,
        help="Output format: " + ", ".join(formats) + ".",
    )


def dump(value: Any, fmt: str) -> str:
    """`value` as JSON (kubectl's 4-space indent) or YAML (block style, keys in order)."""
    if fmt == "json":
        return json.dumps(value, indent=4)
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip("\n")


def print_list(items: Sequence[Mapping[str, Any]], fmt: str) -> None:
    """Objects as the `v1 List` kubectl prints for `get -o json|yaml`."""
    body = {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}
    click.echo(dump(body, fmt))


def _parse(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages: `45s`, `5m30s`, `3h20m`, `2d4h`, `400d`, `3y20d`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 120:
        return f"{max(s, 0)}s"
    minutes, hours, days = s // 60, s // 3600, s // 86_400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def since(stamp: Any, now: datetime | None = None) -> str:
    """The age of an RFC 3339 timestamp (`<unknown>` when there is none)."""
    when = _parse(stamp)
    if when is None:
        return "<unknown>"
    return human_duration(((now or datetime.now(UTC)) - when).total_seconds())


def event_age(event: Mapping[str, Any], now: datetime | None = None) -> str:
    """An event's Age column as `kubectl describe` writes it: `30s`, or `30s (x3 over 10m)` for a
    repeated event (last seen, count, first seen)."""
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or first
    count = int(event.get("count") or 1)
    if count > 1:
        return f"{since(last, now)} (x{count} over {since(first, now)})"
    return since(first, now)


def event_source(event: Mapping[str, Any]) -> str:
    """An event's From column: the source component (and host), else the reporting controller."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return ", ".join(p for p in (component, host) if p) or "<unknown>"
