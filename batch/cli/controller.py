"""`tephra controller`: run the job, queue, PodGroup and command controllers against a cluster."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

import click


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
@click.option("--db", "db_url", default=None, help="Ledger database URL (optional).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=8081,
    show_default=True,
    help="Serve Prometheus metrics on this port (0 = off).",
)
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def controller(
    kubeconfig: Path | None,
    scheduler_names: tuple[str, ...],
    workers: int,
    db_url: str | None,
    metrics_port: int,
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

    stop = threading.Event()

    def _on_signal(_sig: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    component = ControllerComponent(scheduler_names=scheduler_names, workers=workers, db_url=db_url)
    component.start(kubeconfig=kubeconfig, stop=stop)
    if not component.wait_ready(60):
        click.echo("error: controllers did not become ready within 60 s", err=True)
        component.stop()
        sys.exit(1)
    if metrics_port and component.manager is not None:
        try:
            component.manager.metrics.serve(metrics_port)
        except OSError as exc:
            click.echo(f"warning: metrics not served on :{metrics_port}: {exc}", err=True)
    click.echo("controllers ready", err=True)
    while not stop.wait(0.5):
        pass
    component.stop()
