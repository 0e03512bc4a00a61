"""`/metrics` of the commands that run Tephra's services: `sandbox up` and `controller`.

Why this exists: each service keeps its metrics in a private registry (several live in one
process: the sandbox, tests), so something must put them behind one endpoint. This serves the
union of the components' registries, plus the process and Python collectors (resident memory,
CPU seconds, open files, GC, `python_info`), on `--metrics-bind-address` as controller-runtime
spells it: `HOST:PORT`, `:PORT` (every interface) or `0` (off). Importing it turns off
prometheus_client's `*_created` series, which only add noise to every counter and histogram.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import click
import prometheus_client
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from batch.api.errors import UserError

__all__ = [
    "bind_address_option",
    "component_registries",
    "exposition_registry",
    "parse_bind_address",
    "serve_metrics",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

Sources = Callable[[], Iterable[CollectorRegistry]]


class _Union(Collector):
    """The metrics of every registry `sources()` names at scrape time (components may start
    after the server does)."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        for registry in self._sources():
            yield from registry.collect()


def component_registries(components: Iterable[Any]) -> list[CollectorRegistry]:
    """The registries of running components: the scheduler's (`service.metrics`) and the
    controllers' (`manager.metrics`); a component not started yet has none."""
    found = []
    for component in components:
        for owner in ("service", "manager"):
            metrics = getattr(getattr(component, owner, None), "metrics", None)
            registry = getattr(metrics, "registry", None)
            if isinstance(registry, CollectorRegistry):
                found.append(registry)
    return found


def exposition_registry(sources: Sources) -> CollectorRegistry:
    """One registry: the process and Python collectors and the components' own registries."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    registry.register(_Union(sources))
    return registry


def parse_bind_address(text: str) -> tuple[str, int] | None:
    """`127.0.0.1:8080` -> ("127.0.0.1", 8080); `:8080` -> ("0.0.0.0", 8080); `0` -> None."""
    text = text.strip()
    if text in ("0", ""):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(f"--metrics-bind-address {text!r}: expected HOST:PORT, :PORT or 0 (off)")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve_metrics(sources: Sources, address: str) -> Any | None:
    """Serve `/metrics` in a background thread; None when off. A port in use is a warning (the
    service still runs), as the scheduler's own metrics port is."""
    where = parse_bind_address(address)
    if where is None:
        return None
    host, port = where
    try:
        server, _thread = prometheus_client.start_http_server(
            port, addr=host, registry=exposition_registry(sources)
        )
    except OSError as exc:
        click.echo(f"warning: metrics not served on {address}: {exc.strerror or exc}", err=True)
        return None
    return server


def bind_address_option(default: str) -> Callable[[Any], Any]:
    return click.option(
        "--metrics-bind-address",
        default=default,
        show_default=True,
        help="Serve Prometheus /metrics here: HOST:PORT, :PORT (all interfaces) or 0 (off).",
    )
