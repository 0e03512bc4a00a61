"""`tephra sandbox`: run the embedded cluster (`up`) and print Node manifests (`nodes`)."""

from __future__ import annotations

import ipaddress
import logging
import math
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click
import yaml

from batch.api.admission import AdmissionLimits
from batch.api.errors import UserError, one_line
from batch.api.yamlio import load_yaml_file
from batch.cli.controller import queue_command_namespace_option
from batch.cli.limits import limit_options, pod_batch_option
from batch.cli.metrics import (
    bind_address_option,
    component_health,
    component_registries,
    metrics_url,
    parse_bind_address,
    serve_metrics,
)
from batch.cli.serving import component_options, dashboard_beside, dashboard_options

if TYPE_CHECKING:
    from batch.sandbox.components import Component
    from batch.sandbox.options import SandboxOptions
    from batch.sandbox.runtime import SandboxThread


@click.group("sandbox")
def sandbox() -> None:
    """The embedded Kubernetes API server, node emulator, controllers and scheduler."""


@sandbox.command("up")
@click.option(
    "--kubeconfig",
    "kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Write a kubeconfig here once everything is ready.",
)
@click.option("--port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--insecure-listen-anywhere",
    is_flag=True,
    help="Allow a --host other than loopback: the sandbox has no authentication, so anyone "
    "who reaches it controls it.",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Answer this Host name (and web pages from it) besides loopback ones; `*`: any.",
)
@click.option(
    "--nodes",
    "nodes_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML file of v1 Node objects (see `tephra sandbox nodes`).",
)
@component_options("volcano-scheduler.conf for the scheduler component.")
@click.option(
    "--max-grace-seconds",
    type=float,
    default=2.0,
    show_default=True,
    help="Cap on pod termination grace periods.",
)
@click.option(
    "--heartbeat-seconds",
    type=float,
    default=10.0,
    show_default=True,
    help="Node lease renewal period.",
)
@click.option("--fail-rate", type=float, default=0.0, help="Fraction of writes failed with 500.")
@click.option(
    "--throttle-rate",
    type=float,
    default=0.0,
    help="Fraction of writes answered 429 Too Many Requests.",
)
@click.option("--latency", type=float, default=0.0, help="Seconds added to every request.")
@click.option("--jitter", type=float, default=0.0, help="Up to this many extra seconds.")
@click.option(
    "--drop-watch-every",
    type=float,
    default=0.0,
    help="Drop every watch stream this many seconds after it opens.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of fault injection and generated names.",
)
@click.option("--no-components", is_flag=True, help="Serve only the API server and node emulator.")
@dashboard_options
@bind_address_option("127.0.0.1:0", free="a free port")
@pod_batch_option
@limit_options
@queue_command_namespace_option
@click.option("-v", "--verbose", is_flag=True)
def up(
    kubeconfig: Path,
    port: int,
    host: str,
    insecure_listen_anywhere: bool,
    allowed_hosts: tuple[str, ...],
    nodes_file: Path | None,
    scheduler_conf: Path | None,
    schedule_period: float,
    db_url: str | None,
    no_ledger: bool,
    max_grace_seconds: float,
    heartbeat_seconds: float,
    fail_rate: float,
    throttle_rate: float,
    latency: float,
    jitter: float,
    drop_watch_every: float,
    seed: int,
    no_components: bool,
    no_dashboard: bool,
    dashboard_port: int,
    metrics_bind_address: str,
    pod_batch: int,
    limits: AdmissionLimits,
    queue_command_namespace: str | None,
    verbose: bool,
) -> None:
    """Serve a sandbox cluster until SIGINT/SIGTERM; write KUBECONFIG once it is ready."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from batch.sandbox.options import FaultOptions, SandboxOptions

    began = time.monotonic()
    faults = FaultOptions(
        error_rate=fail_rate,
        throttle_rate=throttle_rate,
        latency=latency,
        jitter=jitter,
        drop_watch_every=drop_watch_every,
        seed=seed,
    )
    options = SandboxOptions(
        host=host,
        port=port,
        nodes_file=nodes_file,
        scheduler_conf=scheduler_conf,
        schedule_period=schedule_period,
        db_url=db_url,
        max_grace_seconds=max_grace_seconds,
        heartbeat_seconds=heartbeat_seconds,
        seed=seed,
        admission_limits=limits,
        pod_batch=pod_batch,
        allowed_hosts=allowed_hosts,
        faults=faults,
        queue_command_namespace=queue_command_namespace,
    )
    try:
        _check_startup(
            options,
            insecure=insecure_listen_anywhere,
            metrics=metrics_bind_address,
            ledger=not no_ledger and not no_components,
        )
    except UserError as exc:
        raise StartupError(one_line(exc)) from None
    _serve(
        options,
        kubeconfig,
        components=not no_components,
        metrics=metrics_bind_address,
        dashboard=None if no_dashboard else dashboard_port,
        began=began,
    )


def _check_startup(options: SandboxOptions, *, insecure: bool, metrics: str, ledger: bool) -> None:
    """Refuse (UserError) what would only fail once something runs; resolve the ledger's URL."""
    faults = options.faults
    numbers = {
        "--schedule-period": (options.schedule_period, False),
        "--max-grace-seconds": (options.max_grace_seconds, True),
        "--heartbeat-seconds": (options.heartbeat_seconds, False),
        "--latency": (faults.latency, True),
        "--jitter": (faults.jitter, True),
        "--drop-watch-every": (faults.drop_watch_every, True),
    }
    rates = {"--fail-rate": faults.error_rate, "--throttle-rate": faults.throttle_rate}
    _check_options(options.port, numbers, rates)
    _check_host(options.host, insecure=insecure)
    _check_inputs(options.nodes_file, options.scheduler_conf)
    parse_bind_address(metrics)
    if ledger:
        options.db_url = _ledger_url(options.db_url)


def _ledger_url(db_url: str | None) -> str:
    """The ledger's database URL (--db, else the environment's); a bad one is a UserError."""
    from batch.ledger.db import resolve_url

    return resolve_url(db_url)


def _serve(
    options: SandboxOptions,
    kubeconfig: Path,
    *,
    components: bool,
    metrics: str,
    dashboard: int | None,
    began: float,
) -> None:
    """Start the sandbox, its components and the dashboard (on port `dashboard`; None: not),
    write KUBECONFIG, and serve until a signal."""
    from batch.sandbox.components import default_components, stop_all
    from batch.sandbox.kubeconfig import write_kubeconfig

    stop = _stop_on_signals()
    thread = _start_sandbox(options)
    running = default_components(options) if components else []
    with tempfile.TemporaryDirectory(prefix="tephra-sandbox-") as tmp:
        internal = Path(tmp) / "kubeconfig"
        _start_components(running, thread, internal, options)
        served = serve_metrics(
            lambda: component_registries(running), metrics, lambda: component_health(running)
        )
        beside = write_kubeconfig(internal, thread.url)
        with dashboard_beside(beside, options.db_url, dashboard) as url:
            write_kubeconfig(kubeconfig, thread.url)
            names = ", ".join(c.name for c in running) or "no components"
            click.echo(
                f"sandbox ready at {thread.url} in {time.monotonic() - began:.2f}s "
                f"({names}); kubeconfig: {kubeconfig}",
                err=True,
            )
            if served is not None:
                click.echo(f"metrics: {metrics_url(served)}", err=True)
            if url is not None:
                click.echo(f"dashboard: {url}", err=True)
            sys.stderr.flush()
            while not stop.wait(0.5):
                pass
            click.echo("sandbox stopping", err=True)
        if served is not None:
            served.shutdown()
        stop_all(running)
        thread.stop()
    kubeconfig.unlink(missing_ok=True)


def _stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


def _start_sandbox(options: SandboxOptions) -> SandboxThread:
    from batch.sandbox.runtime import SandboxThread

    try:
        return SandboxThread(options).start()
    except (RuntimeError, OSError, yaml.YAMLError) as exc:
        raise click.ClickException(f"sandbox: {one_line(exc)}") from None


def _start_components(
    components: list[Component], thread: SandboxThread, internal: Path, options: SandboxOptions
) -> None:
    """Start the components against the sandbox (through the kubeconfig written to `internal`);
    on a failure the sandbox stops too."""
    from batch.sandbox.components import start_all
    from batch.sandbox.kubeconfig import write_kubeconfig

    try:
        start_all(components, kubeconfig=write_kubeconfig(internal, thread.url), options=options)
    except (RuntimeError, OSError) as exc:
        thread.stop()
        raise click.ClickException(f"sandbox: {one_line(exc)}") from None


class StartupError(click.ClickException):
    """A bad option or file of `sandbox up`, found before anything starts: one line, exit 2."""

    exit_code = 2


def _check_options(
    port: int, seconds: dict[str, tuple[float, bool]], rates: dict[str, float]
) -> None:
    """Numbers that would only fail once the server or a component runs (`--port -5` failed in
    bind() after the emulator had started; `--schedule-period nan` never scheduled)."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port: {port} is not a port (0..65535; 0 picks a free one)")
    for flag, (value, zero_ok) in seconds.items():
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            bound = ">= 0" if zero_ok else "> 0"
            raise UserError(f"{flag}: {value} must be a finite number of seconds {bound}")
    for flag, rate in rates.items():
        if not 0 <= rate <= 1:  # false for nan too
            raise UserError(f"{flag}: {rate} must be a fraction between 0 and 1")


def _check_host(host: str, *, insecure: bool) -> None:
    """The sandbox authenticates nobody: listening beyond loopback needs an explicit flag."""
    if _is_loopback(host):
        return
    if not insecure:
        raise UserError(
            f"--host {host}: the sandbox has no authentication, so it listens on loopback "
            "addresses only; add --insecure-listen-anywhere to listen there anyway"
        )
    click.echo(
        f"warning: listening on {host} without authentication: anyone who can reach it "
        "controls this cluster",
        err=True,
    )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_inputs(nodes_file: Path | None, scheduler_conf: Path | None) -> None:
    """Read the files `up` was given before anything starts: a mistake in one is one line
    at once, not a failure inside a component that is already running."""
    from batch.kube.service import load_scheduler_conf

    if nodes_file is not None:
        load_yaml_file(nodes_file)
    if scheduler_conf is not None:
        load_scheduler_conf(scheduler_conf)


@sandbox.command("nodes")
@click.option("--count", type=int, default=1, show_default=True)
@click.option("--gpus", type=int, default=0, show_default=True, help="nvidia.com/gpu per node.")
@click.option("--cpu", default="64", show_default=True)
@click.option("--memory", default="512Gi", show_default=True)
@click.option("--pods", type=int, default=110, show_default=True)
@click.option("--topology", default=None, help="racks=N[,spines=M]")
@click.option("--prefix", default="node", show_default=True)
def nodes(
    count: int, gpus: int, cpu: str, memory: str, pods: int, topology: str | None, prefix: str
) -> None:
    """Print Node manifests (multi-document YAML) for `sandbox up --nodes` or `kubectl apply`."""
    from batch.api.quantity import QuantityError, parse_quantity
    from batch.sandbox.nodes import make_nodes, parse_topology

    try:
        topo = parse_topology(topology)
        parse_quantity(cpu)
        parse_quantity(memory)
    except (ValueError, QuantityError) as exc:
        raise click.ClickException(str(exc)) from None
    if count < 1:
        raise click.ClickException("--count must be at least 1")
    docs = make_nodes(
        count=count,
        gpus=gpus,
        cpu=cpu,
        memory=memory,
        pods=pods,
        racks=topo.get("racks", 0),
        spines=topo.get("spines", 0),
        prefix=prefix,
    )
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)
