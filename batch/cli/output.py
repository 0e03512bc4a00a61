"""One output flag for every command that lists something: `-o/--output`, as kubectl spells it.

`table` (the default) is vcctl's columns; `wide` adds columns, as `kubectl get -o wide` does;
`json` and `yaml` print the objects themselves (a `v1 List` for a listing, as kubectl prints
one), for scripts; `name` prints `kind.group/name`, one a line, as `kubectl get -o name`. Commands
whose rows are not Kubernetes objects (reports, what-if) print their rows as JSON/YAML records
instead, and have no `name`. `--watch` prints a listing, then a line (or object) for each change,
as `kubectl get --watch`. Ages and event times are written as kubectl writes them.
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
    "RECORD_FORMATS",
    "Columns",
    "by_namespace_name",
    "dump",
    "event_age",
    "event_source",
    "human_duration",
    "object_name",
    "output_option",
    "print_list",
    "print_listing",
    "print_names",
    "print_watched",
    "since",
    "watch_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: what every listing of records that are not Kubernetes objects accepts
RECORD_FORMATS = ("table", "wide", "json", "yaml")
#: what every get, list or view of Kubernetes objects accepts
OBJECT_FORMATS = (*RECORD_FORMATS, "name")


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


def watch_options(fn: F) -> F:
    """`-w/--watch` and `--request-timeout`, as kubectl's `get` takes them."""
    fn = click.option(
        "--request-timeout",
        "request_timeout",
        type=click.IntRange(min=1),
        default=None,
        help="With --watch: stop watching after this many seconds (default: never).",
    )(fn)
    return click.option(
        "-w",
        "--watch",
        is_flag=True,
        help="After listing, print each change as it happens (Ctrl-C stops).",
    )(fn)


def object_name(obj: Mapping[str, Any], resource: str) -> str:
    """`kind.group/name` as `kubectl get -o name` prints it (`resource` is `kind.group`)."""
    return f"{resource}/{(obj.get('metadata') or {}).get('name')}"


def print_names(items: Sequence[Mapping[str, Any]], resource: str) -> None:
    for obj in items:
        click.echo(object_name(obj, resource))


class Columns:
    """A table whose later rows (a watch's) keep the widths of the first listing."""

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        cells = [list(map(str, headers)), *[list(map(str, r)) for r in rows]]
        self.widths = [max(len(r[i]) for r in cells) + 2 for i in range(len(headers))]
        self.lines = [self.line(r) for r in cells]
        #: whether the header was printed (not over an empty listing)
        self.shown = bool(rows)

    def line(self, row: Sequence[Any]) -> str:
        return "".join(str(v).ljust(w) for v, w in zip(row, self.widths, strict=True)).rstrip()


def by_namespace_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """The order of every listing: by namespace, then name."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def print_listing(
    items: Sequence[Mapping[str, Any]], output: str, resource: str, columns: Columns
) -> Columns:
    """A listing of objects in `output`'s format; the table's `columns` are returned for the
    rows a watch prints after it."""
    if output in ("json", "yaml"):
        print_list(items, output)
    elif output == "name":
        print_names(items, resource)
    elif not items:
        click.echo("No resources found")
    else:
        click.echo("\n".join(columns.lines))
    return columns


def print_watched(
    obj: Mapping[str, Any], fmt: str, resource: str, line: str, columns: Columns
) -> None:
    """One change seen by `--watch`: its row (under the header, printed now if the listing was
    empty), its object or its name."""
    if fmt == "name":
        click.echo(object_name(obj, resource))
    elif fmt == "json":
        click.echo(dump(obj, fmt))
    elif fmt == "yaml":
        click.echo("---\n" + dump(obj, fmt))
    else:
        if not columns.shown:
            click.echo(columns.lines[0])
            columns.shown = True
        click.echo(line)


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
