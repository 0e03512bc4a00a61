"""`tephra demo`: play Tephra's story on the embedded sandbox (see `batch.sandbox.demo`)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import click

__all__ = ["demo"]


def _dashboard(kubeconfig: Path, db_url: str, port: int) -> contextlib.AbstractContextManager[str]:
    """The web dashboard (batch.dashboard) on the demo's sandbox and ledger."""
    from batch.cli.dashboard import serve_beside

    return serve_beside(kubeconfig, db_url, port)


@click.command("demo")
@click.option("-v", "--verbose", is_flag=True, help="Show the components' logs too.")
@click.option("--keep", is_flag=True, help="Keep the sandbox and dashboard up until Ctrl-C.")
@click.option(
    "--dashboard-port",
    default=8090,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port of the web dashboard on 127.0.0.1 (0: any free port).",
)
def demo(verbose: bool, keep: bool, dashboard_port: int) -> None:
    """Gang scheduling, topology, preemption, fair shares and the ledger, in about a minute."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.ERROR,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # kopf's watch generators complain when their loop is stopped at the end; not news.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    from batch.sandbox.demo import run_demo

    def beside(kubeconfig: Path, db_url: str) -> contextlib.AbstractContextManager[str]:
        return _dashboard(kubeconfig, db_url, dashboard_port)

    raise SystemExit(run_demo(keep=keep, beside=beside))
