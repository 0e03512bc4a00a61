"""`tephra version`: the client's version and, as `kubectl version` does, the API server's.

The server is asked for `/version` through the kubeconfig (`--kubeconfig`, `$KUBECONFIG`,
`~/.kube/config`); `--client` skips it. An unreachable server is one line on stderr and exit
status 1, after the client's version is printed.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import click

import batch
from batch.cli.kube import Kube, kube_options
from batch.cli.output import dump, output_option


def _server(kubeconfig: Path | None) -> dict[str, Any]:
    """The server's `/version` as it answered (no client model: a field it leaves out is fine)."""
    kube = Kube(kubeconfig)
    info: dict[str, Any] = kube.call(
        "get the server version", lambda: kube.rest.request("GET", "/version")
    )
    return info


@click.command("version")
@kube_options
@click.option("--client", "client_only", is_flag=True, help="Only the client's version.")
@output_option(("table", "json", "yaml"))
def version(kubeconfig: Path | None, client_only: bool, output: str) -> None:
    """Print the client's and the API server's versions."""
    client_version = {"version": batch.__version__, "pythonVersion": platform.python_version()}
    if output == "table":
        click.echo(f"Client Version: {batch.__version__} (Python {platform.python_version()})")
        if not client_only:
            click.echo(f"Server Version: {_server(kubeconfig).get('gitVersion')}")
        return
    out: dict[str, Any] = {"clientVersion": client_version}
    if not client_only:
        out["serverVersion"] = _server(kubeconfig)
    click.echo(dump(out, output))
