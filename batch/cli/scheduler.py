"""`tephra scheduler`: run the scheduler service against a Kubernetes API server."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from batch.api.durations import DurationError, parse_duration
from batch.cli.kubecontext import context_option, with_context
from batch.cli.metrics import parse_bind_address, serve_metrics
from batch.kube.limits import BIND_CONCURRENCY
from batch.kube.protobuf import JSON, MEDIA_TYPE

if TYPE_CHECKING:
    from batch.kube.service import SchedulerOptions

__all__ = ["scheduler"]


def _duration(text: str) -> float:
    """Parse `1s`, `500ms`, `2m` or a bare number of seconds (a Go duration)."""
    try:
        return parse_duration(text, bare_seconds=True)
    except DurationError:
        raise click.BadParameter(f"not a duration (like 1s, 500ms): {text!r}") from None


@click.command("scheduler")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)",
)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="volcano-scheduler.conf (default: Tephra's built-in default)",
)
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=("volcano",),
    show_default=True,
    help="pods with this spec.schedulerName are ours (repeatable)",
)
@click.option(
    "--schedule-period", default="1s", show_default=True, help="time between scheduling sessions"
)
@click.option("--default-queue", default="default", show_default=True)
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True)
@click.option("--lease-namespace", default="kube-system", show_default=True)
@click.option("--metrics-port", type=int, default=8080, show_default=True)
@click.option(
    "--metrics-bind-address",
    default=None,
    help="Serve /metrics here instead: HOST:PORT, :PORT or 0 (off); default :<metrics-port>.",
)
@click.option("--healthz-port", type=int, default=11251, show_default=True)
@click.option(
    "--db",
    "db_url",
    envvar="TEPHRA_DB_URL",
    default=None,
    help="ledger database URL (records preemptions and queue usage)",
)
@click.option(
    "--bind-concurrency",
    type=int,
    default=BIND_CONCURRENCY,
    show_default=True,
    help="binds in flight at once",
)
@click.option(
    "--kube-api-content-type",
    type=click.Choice([MEDIA_TYPE, JSON]),
    default=MEDIA_TYPE,
    show_default=True,
    help="how Bindings and Events are sent; a 415 answer to protobuf turns to JSON",
)
@context_option
@click.option("-v", "--verbose", count=True)
def scheduler(
    kubeconfig: Path | None,
    scheduler_conf: Path | None,
    scheduler_names: tuple[str, ...],
    schedule_period: str,
    default_queue: str,
    leader_elect: bool,
    lease_namespace: str,
    metrics_port: int,
    metrics_bind_address: str | None,
    healthz_port: int,
    db_url: str | None,
    bind_concurrency: int,
    kube_api_content_type: str,
    kube_context: str | None,
    verbose: int,
) -> None:
    """Schedule pods gang-wise: watch the cluster, run a session every period, bind."""
    from batch.kube.config import KubeConfigError
    from batch.kube.service import SchedulerOptions
    from batch.scheduler.config import ConfigError

    logging.basicConfig(
        level=logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    options = SchedulerOptions(
        kubeconfig=with_context(kubeconfig, kube_context),
        scheduler_conf=scheduler_conf,
        scheduler_names=scheduler_names,
        schedule_period=_duration(schedule_period),
        default_queue=default_queue,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        metrics_port=None,  # served below, with the process collectors
        healthz_port=healthz_port,
        db_url=db_url,
        bind_concurrency=bind_concurrency,
        kube_api_content_type=kube_api_content_type,
    )
    address = metrics_bind_address or f":{metrics_port}"
    where = parse_bind_address(address)
    if where is not None and where[1] == healthz_port:
        options.metrics_port, address = healthz_port, "0"  # one port for both, as before
    try:
        _run(options, address)
    except (ConfigError, KubeConfigError) as exc:
        raise click.ClickException(str(exc)) from None


def _run(options: SchedulerOptions, metrics_address: str) -> None:
    """Run the scheduler service until SIGINT/SIGTERM, its metrics on `metrics_address`."""
    import asyncio
    import signal

    from batch.gcpause import space_collections
    from batch.kube.service import SchedulerService

    space_collections()  # the cluster cache is a large live model fed by bursts of events
    service = SchedulerService(options)
    serve_metrics(lambda: [service.metrics.registry], metrics_address)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await service.run(stop)

    asyncio.run(main())
    if service.lost_leadership:  # exit 1, as kube-scheduler does: restarted, it starts fresh
        raise click.ClickException("lost the leader lease: exiting to be restarted")
