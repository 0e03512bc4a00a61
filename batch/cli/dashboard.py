"""`tephra dashboard`: serve the read-only web UI and JSON API (batch.dashboard) until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import click

from batch.api.errors import UserError
from batch.cli.db import db_option


@contextlib.contextmanager
def serve_beside(kubeconfig: Path, db_url: str | None, port: int = 0) -> Iterator[str]:
    """The dashboard on 127.0.0.1:`port` (0: a free one) in a thread of this process, reading
    the cluster of `kubeconfig` and the ledger at `db_url` (None: no history), while the block
    runs; yields its URL. For `tephra demo` and `tephra sandbox up`."""
    from batch.dashboard.history import History
    from batch.dashboard.server import Dashboard, DashboardThread
    from batch.kube.config import load_access
    from batch.ledger.db import make_engine

    engine = make_engine(db_url) if db_url else None
    server = DashboardThread(Dashboard(load_access(kubeconfig), History(engine)), port=port)
    server.start()
    try:
        yield server.url + "/"
    finally:
        server.stop()
        if engine is not None:
            engine.dispose()


def _token(path: Path | None, host: str) -> tuple[str | None, bool]:
    """The token (from the file; made up when bound beyond loopback without one; else None)
    and whether it was made up here (then it is printed, once)."""
    from batch.dashboard.guard import is_loopback

    if path is None:
        return (None, False) if is_loopback(host) else (secrets.token_urlsafe(32), True)
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise UserError(f"{path}: the token file is empty")
    return token, False


def _allowed(host: str, extra: tuple[str, ...]) -> tuple[str, ...]:
    """The names the dashboard answers besides loopback ones: the one it is bound to (unless a
    wildcard address) and `--allowed-host`."""
    bound = () if host in ("", "0.0.0.0", "::") else (host,)
    return (*bound, *extra)


async def _serve(host: str, port: int, app: object, made_token: str | None) -> None:
    from aiohttp import web

    assert isinstance(app, web.Application)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        url = f"http://{host}:{runner.addresses[0][1]}/"
        click.echo(f"dashboard: {url}", err=True)
        if made_token is not None:
            click.echo(
                f"dashboard: token (made up for this run, shown once): {made_token}\n"
                f"dashboard: open {url}?token={made_token} to log in a browser (sets a cookie)",
                err=True,
            )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


@click.command("dashboard")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster).",
)
@click.option("--context", default=None, help="The kubeconfig context to use.")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8090, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Require this bearer token (the file's content) on every request. Bound beyond "
    "loopback without one, the dashboard makes one up and prints it once.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A Host name to answer besides localhost, IP addresses and --host (repeatable; `*`: "
    "any). Other names are refused: they are how DNS rebinding reaches a dashboard.",
)
@click.option("--history-days", default=7, show_default=True, type=click.IntRange(1, 366))
@click.option(
    "--allow-whatif",
    is_flag=True,
    help="Serve the what-if form: replays of the ledger (CPU-heavy) that anyone who may use "
    "the dashboard can start (by POST from its own page).",
)
def dashboard(
    kubeconfig: Path | None,
    context: str | None,
    db_url: str | None,
    host: str,
    port: int,
    token_file: Path | None,
    allowed_hosts: tuple[str, ...],
    history_days: int,
    allow_whatif: bool,
) -> None:
    """Serve a read-only web dashboard: nodes, queues, jobs (with `job why`) and ledger history.

    Live state comes from watches on the cluster; history from the ledger's report views.
    """
    from batch.dashboard.history import History
    from batch.dashboard.server import Dashboard, make_app
    from batch.dashboard.whatif import WhatIfRuns
    from batch.kube.config import load_access
    from batch.ledger.db import make_engine, resolve_url

    token, made = _token(token_file, host)
    access = load_access(kubeconfig, context=context)
    engine = make_engine(db_url, create_dirs=False)
    runs = WhatIfRuns(resolve_url(db_url), since=f"{history_days}d") if allow_whatif else None
    dash = Dashboard(
        access,
        History(engine, days=history_days),
        token=token,
        whatif=runs,
        allowed_hosts=_allowed(host, allowed_hosts),
    )
    try:
        asyncio.run(_serve(host, port, make_app(dash), token if made else None))
    finally:
        engine.dispose()
