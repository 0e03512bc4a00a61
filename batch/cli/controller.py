"""`tephra controller`: run the job, queue, PodGroup and command controllers against a cluster."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from batch.api.admission import AdmissionLimits
from batch.cli.kubecontext import context_option, with_context
from batch.cli.limits import limit_options, pod_batch_option
from batch.cli.metrics import (
    component_health,
    component_registries,
    parse_bind_address,
    serve_metrics,
)

F = TypeVar("F", bound=Callable[..., Any])


def _namespace_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from batch.api.admission.common import is_dns1123_label

    if value and not is_dns1123_label(value):
        raise click.BadParameter(f"{value!r} is not a namespace name (a DNS-1123 label)")
    return value or None


def queue_command_namespace_option(fn: F) -> F:
    """Add `--queue-command-namespace` (a `queue_command_namespace: str | None` argument)."""
    return click.option(
        "--queue-command-namespace",
        default=None,
        metavar="NAMESPACE",
        callback=_namespace_name,
        help="Execute OpenQueue/CloseQueue Commands from this namespace only; refuse others "
        "(default: any namespace, the webhook checking who may update the queue).",
    )(fn)


@click.command("controller")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).",
)
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=("volcano", "tephra"),
    show_default=True,
    help="Pods with this schedulerName get PodGroups (repeatable).",
)
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option(
    "--db",
    "db_url",
    envvar="TEPHRA_DB_URL",
    default=None,
    help="Ledger database URL (optional; env TEPHRA_DB_URL).",
)
@click.option("--leader-elect", is_flag=True, help="Run as one of several replicas (Lease).")
@click.option("--lease-namespace", default="default", show_default=True)
@click.option("--lease-name", default="tephra-controllers", show_default=True)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=8081,
    show_default=True,
    help="Serve Prometheus metrics on this port (0 = off).",
)
@click.option(
    "--metrics-bind-address",
    default=None,
    help="Serve /metrics here instead: HOST:PORT, :PORT or 0 (off); default :<metrics-port>.",
)
@context_option
@pod_batch_option
@limit_options
@queue_command_namespace_option
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def controller(
    kubeconfig: Path | None,
    scheduler_names: tuple[str, ...],
    workers: int,
    db_url: str | None,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    metrics_port: int,
    metrics_bind_address: str | None,
    kube_context: str | None,
    pod_batch: int,
    limits: AdmissionLimits,
    queue_command_namespace: str | None,
    verbose: int,
) -> None:
    """Run Tephra's controllers until SIGINT/SIGTERM."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if kubeconfig is not None and not kubeconfig.exists():
        raise click.BadParameter(
            f"kubeconfig {kubeconfig} does not exist", param_hint="--kubeconfig"
        )
    from batch.controllers.runner import ControllerComponent
    from batch.kube.config import KubeConfigError, load_access

    address = metrics_bind_address or (f":{metrics_port}" if metrics_port else "0")
    try:
        parse_bind_address(address)
        kubeconfig = with_context(kubeconfig, kube_context)
        load_access(kubeconfig)  # a broken kubeconfig is one line now, not a thread's traceback
    except KubeConfigError as exc:
        raise click.ClickException(str(exc)) from None

    stop = threading.Event()

    def _on_signal(_sig: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    component = ControllerComponent(
        scheduler_names=scheduler_names,
        workers=workers,
        db_url=db_url,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        pod_batch=pod_batch,
        limits=limits,
        queue_command_namespace=queue_command_namespace,
    )
    component.start(kubeconfig=kubeconfig, stop=stop)
    serve_metrics(
        lambda: component_registries([component]), address, lambda: component_health([component])
    )
    deadline = time.monotonic() + 60
    while not component.wait_ready(0.5):
        if stop.is_set() or not component.alive():
            break
        if component.standby.is_set():
            deadline = time.monotonic() + 60  # a standby replica waits for the Lease
        elif time.monotonic() > deadline:
            click.echo("error: controllers did not become ready within 60 s", err=True)
            component.stop()
            sys.exit(1)
    if component.failed is None and not stop.is_set():
        click.echo("controllers ready", err=True)
        while not stop.wait(0.5) and component.alive():
            pass
    component.stop()
    if component.failed is not None:
        click.echo(f"error: controllers stopped: {component.failed}", err=True)
        sys.exit(1)
