"""`tephra crds`: write (or check) the CustomResourceDefinitions generated from batch.api."""

from __future__ import annotations

from pathlib import Path

import click

from batch.api.crdgen import generate_crds, render_crd, write_crds


@click.command("crds")
@click.option(
    "--out",
    "out_dir",
    default="crds",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write one CRD YAML per served kind into.",
)
@click.option("--check", is_flag=True, help="Only compare with DIR; exit 1 when out of date.")
def crds(out_dir: Path, check: bool) -> None:
    """Generate apiextensions.k8s.io/v1 CRDs for every kind Tephra serves."""
    if check:
        stale = []
        for name, crd in sorted(generate_crds().items()):
            path = out_dir / name
            try:
                current = path.read_text(encoding="utf-8")
            except OSError:
                current = None
            if current != render_crd(crd):
                stale.append(name)
        if stale:
            click.echo(f"out of date in {out_dir}: {', '.join(stale)} (run `make crds`)", err=True)
            raise SystemExit(1)
        click.echo(f"{out_dir}: CRDs up to date")
        return
    try:
        written = write_crds(out_dir)
    except OSError as exc:
        click.echo(f"error: cannot write CRDs to {out_dir}: {exc.strerror or exc}", err=True)
        raise SystemExit(1) from None
    for path in written:
        click.echo(str(path))
