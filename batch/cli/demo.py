"""`tephra demo`: play Tephra's story on the embedded sandbox (see `batch.sandbox.demo`)."""

from __future__ import annotations

import logging

import click

__all__ = ["demo"]


@click.command("demo")
@click.option("-v", "--verbose", is_flag=True, help="Show the components' logs too.")
def demo(verbose: bool) -> None:
    """Gang scheduling, topology, preemption, fair shares and the ledger, in about a minute."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.ERROR,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # kopf's watch generators complain when their loop is stopped at the end; not news.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    from batch.sandbox.demo import run_demo

    raise SystemExit(run_demo())
