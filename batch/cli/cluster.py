"""`tephra cluster up`: a real control plane (etcd, kube-apiserver, kube-controller-manager)
on 127.0.0.1, built from the pinned Go modules, until SIGINT/SIGTERM.

The binaries come from `--bin-dir` or `scripts/build-kube.sh`'s cache (`make kube` builds them
once). The admin kubeconfig is written to `--kubeconfig` once the apiserver is ready, so a caller
can wait for the file. Tephra's node emulator is not attached yet: Nodes and pods need another
kubelet stand-in on this tier (see docs/sandbox.md).
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType

import click

from batch.sandbox.control_plane import ControlPlaneError, control_plane


def _default_bin_dir() -> Path | None:
    cache = Path.home() / ".cache" / "tephra"
    built = sorted(cache.glob("kube-v*/kube-apiserver"), key=lambda p: p.stat().st_mtime)
    return built[-1].parent if built else None


@click.group("cluster")
def cluster() -> None:
    """Run a real Kubernetes control plane built from Go modules (the sandbox's oracle)."""


@cluster.command("up")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--bin-dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--controller-manager/--no-controller-manager", default=True, show_default=True)
def up(
    kubeconfig: Path, bin_dir: Path | None, workdir: Path | None, controller_manager: bool
) -> None:
    """Start etcd, kube-apiserver and kube-controller-manager; stop them on SIGINT/SIGTERM."""
    bin_dir = bin_dir or _default_bin_dir()
    if bin_dir is None:
        raise click.UsageError("no built control plane found: run `make kube` or pass --bin-dir")
    work = workdir or Path(tempfile.mkdtemp(prefix="tephra-cluster-"))
    stop = threading.Event()

    def _on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        with control_plane(bin_dir, work, controller_manager=controller_manager) as plane:
            shutil.copyfile(plane.kubeconfig, kubeconfig)
            kubeconfig.chmod(0o600)
            click.echo(f"control plane ready at {plane.server}; kubeconfig {kubeconfig}")
            stop.wait()
    except ControlPlaneError as exc:
        raise click.ClickException(str(exc)) from None
