"""`tephra webhook`: serve Tephra's mutating and validating admission webhooks over HTTPS."""

from __future__ import annotations

import asyncio
import logging
import signal
import tempfile
from pathlib import Path

import click

from batch.api.admission import AdmissionLimits
from batch.cli.limits import limit_options


@click.command("webhook")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8443, show_default=True)
@click.option(
    "--cert-file",
    "--tls-cert-file",
    "cert_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
)
@click.option(
    "--key-file",
    "--tls-key-file",
    "key_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
)
@click.option(
    "--self-signed",
    is_flag=True,
    help="Generate a development certificate (written to --cert-dir or a temp dir).",
)
@click.option("--cert-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--san",
    "sans",
    multiple=True,
    default=("localhost", "127.0.0.1"),
    show_default=True,
    help="Subject alternative names of the self-signed certificate (repeatable).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read queues/namespaces from this cluster for the rules that need them.",
)
@click.option("--assume-queues", is_flag=True, help="Do not read the cluster; every queue exists.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Large reviews (over 64 KiB) worked on at once, in threads; four times as many may "
    "wait, the rest are answered busy. Small ones are answered at once.",
)
@limit_options
def webhook(
    host: str,
    port: int,
    cert_file: Path | None,
    key_file: Path | None,
    self_signed: bool,
    cert_dir: Path | None,
    sans: tuple[str, ...],
    kubeconfig: Path | None,
    assume_queues: bool,
    concurrency: int,
    limits: AdmissionLimits,
) -> None:
    """Serve AdmissionReview v1 endpoints (/jobs/validate, /jobs/mutate, ...) until SIGTERM."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from batch.controllers.webhook import (
        ClusterFacts,
        self_signed as make_self_signed,
        serve,
        server_ssl_context,
    )

    if self_signed:
        directory = cert_dir or Path(tempfile.mkdtemp(prefix="tephra-webhook-"))
        cert_file, key_file = make_self_signed(directory, hosts=list(sans))
        click.echo(f"self-signed certificate: {cert_file} (use it as the caBundle)", err=True)
    if cert_file is None or key_file is None:
        raise click.UsageError("give --cert-file and --key-file, or --self-signed")
    ctx = server_ssl_context(cert_file, key_file)
    facts = None if assume_queues else ClusterFacts(kubeconfig)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(
            host=host,
            port=port,
            ssl_context=ctx,
            facts=facts,
            stop=stop,
            limits=limits,
            concurrency=concurrency,
            on_ready=lambda p: click.echo(f"webhook listening on https://{host}:{p}", err=True),
        )

    asyncio.run(_main())
