"""`--context` for the services (`tephra scheduler`, `tephra controller`).

The services take a kubeconfig path (the scheduler's asyncio client and kopf's login both read
it), so a chosen context is handed to them as its own kubeconfig: the minified view of that
context (`kubectl config view --minify`, `batch.kube.config.minified`) in a private temporary
file that lives as long as the command.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
import yaml

from batch.kube.config import minified

__all__ = ["context_option", "kubeconfig_for", "with_context"]

context_option = click.option(
    "--context",
    "kube_context",
    default=None,
    help="The kubeconfig context to use (default: its current-context).",
)


@contextlib.contextmanager
def kubeconfig_for(kubeconfig: Path | None, context: str | None) -> Iterator[Path | None]:
    """`kubeconfig` itself, or with `context` a private file holding only that context."""
    if not context:
        yield kubeconfig
        return
    doc = minified(kubeconfig, context=context)
    with tempfile.TemporaryDirectory(prefix="tephra-kube-") as tmp:
        path = Path(tmp) / "kubeconfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(doc, handle, sort_keys=False)
        yield path


def with_context(kubeconfig: Path | None, context: str | None) -> Path | None:
    """`kubeconfig_for` held open until the running click command ends."""
    return click.get_current_context().with_resource(kubeconfig_for(kubeconfig, context))
