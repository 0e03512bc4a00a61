"""`/metrics` of the commands that run Tephra's services: `sandbox up` and `controller`.

Why this exists: each service keeps its metrics in a private registry (several live in one
process: the sandbox, tests), so something must put them behind one endpoint. This serves the
union of the components' registries, plus the process and Python collectors (resident memory,
CPU seconds, open files, GC, `python_info`), on `--metrics-bind-address` as controller-runtime
spells it: `HOST:PORT`, `:PORT` (every interface) or `0` (off). The same port answers
`/healthz`: `ok` while the process serves, then one line per component whose ledger recorder
says how it is (`ledger up`, or `ledger down since ...`: the ledger never fails a probe, it
only records). Importing it turns off prometheus_client's `*_created` series, which only add
noise to every counter and histogram.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import click
import prometheus_client
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.core import Metric
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector

from batch.api.errors import UserError

__all__ = [
    "bind_address_option",
    "component_health",
    "component_registries",
    "exposition_registry",
    "parse_bind_address",
    "serve_metrics",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

Sources = Callable[[], Iterable[CollectorRegistry]]
Health = Callable[[], Iterable[str]]


class _Union(Collector):
    """The metrics of every registry `sources()` names at scrape time (components may start
    after the server does)."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        """Every family once: one that several components export (`tephra_ledger_up` with its
        `component` label) has all their samples."""
        families: dict[str, list[Metric]] = {}
        for registry in self._sources():
            for family in registry.collect():
                families.setdefault(family.name, []).append(family)
        for name, found in families.items():
            if len(found) == 1:
                yield found[0]
                continue
            first = found[0]
            merged = Metric(name, first.documentation, first.type, first.unit)
            merged.samples = [sample for family in found for sample in family.samples]
            yield merged


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


def component_health(components: Iterable[Any]) -> list[str]:
    """`<component>: <its ledger's health line>` for each running component that records (the
    controllers' `recorder`, the scheduler's `service.ledger.recorder`)."""
    lines = []
    for component in components:
        recorder = getattr(component, "recorder", None)
        if recorder is None:
            ledger = getattr(getattr(component, "service", None), "ledger", None)
            recorder = getattr(ledger, "recorder", None)
        health = getattr(recorder, "health", None)
        if callable(health):
            lines.append(f"{getattr(component, 'name', 'component')}: {health().line()}")
    return lines


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


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _app(registry: CollectorRegistry, health: Health) -> Callable[..., list[bytes]]:
    """`/healthz` (text, always 200 while serving), everything else the metrics."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/healthz":
            return list(metrics(environ, start_response))
        body = "\n".join(["ok", *health()]).encode() + b"\n"
        start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
        return [body]

    return app


def serve_metrics(sources: Sources, address: str, health: Health = lambda: ()) -> WSGIServer | None:
    """Serve `/metrics` and `/healthz` in a background thread; None when off. A port in use
    (or a host that does not resolve) is a warning: the service still runs, as the
    scheduler's own metrics port does."""
    where = parse_bind_address(address)
    if where is None:
        return None
    host, port = where
    app = _app(exposition_registry(sources), health)
    try:

        class Server(ThreadingWSGIServer):  # IPv4 or IPv6, as the host is
            address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

        server = make_server(host, port, app, Server, _Quiet)
    except OSError as exc:
        click.echo(f"warning: metrics not served on {address}: {exc.strerror or exc}", err=True)
        return None
    threading.Thread(target=server.serve_forever, name="tephra-metrics", daemon=True).start()
    return server


def bind_address_option(default: str, *, free: str | None = None) -> Callable[[Any], Any]:
    """``--metrics-bind-address``; ``free``: how the help names port 0 when it is the default."""
    where = "HOST:PORT, :PORT (all interfaces) or 0 (off)"
    if free is not None:
        where = f"HOST:PORT (port 0: {free}), :PORT (all interfaces) or 0 (off)"
    return click.option(
        "--metrics-bind-address",
        default=default,
        show_default=True,
        help=f"Serve Prometheus /metrics here: {where}.",
    )


def metrics_url(server: WSGIServer) -> str:
    """Where ``server`` (from :func:`serve_metrics`) answers, with the port it really bound."""
    host, port = (str(part) for part in server.server_address[:2])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"
