"""`tephra cluster up`: a real control plane (etcd, kube-apiserver, kube-controller-manager)
on 127.0.0.1, built from the pinned Go modules, with Tephra's node emulator as its kubelets,
until SIGINT/SIGTERM.

The binaries come from `--bin-dir` or `scripts/build-kube.sh`'s cache (`make kube` builds them
once). The emulator (`batch.sandbox.emulator_http`, the sandbox's kubelet logic over HTTP)
registers `--nodes` Nodes shaped by `--node-*`, keeps them Ready with leases and runs the pods
bound to them by the `sandbox.tephra.io/*` annotations. The admin kubeconfig is written to
`--kubeconfig` once the apiserver serves and every Node is Ready and untainted, so a caller can
wait for the file.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from batch.kube.config import ClusterAccess
from batch.sandbox.control_plane import ControlPlane, ControlPlaneError, control_plane
from batch.sandbox.emulator_http import EmulatorThread


def _default_bin_dir() -> Path | None:
    cache = Path.home() / ".cache" / "tephra"
    built = sorted(cache.glob("kube-v*/kube-apiserver"), key=lambda p: p.stat().st_mtime)
    return built[-1].parent if built else None


@click.group("cluster")
def cluster() -> None:
    """Run a real Kubernetes control plane built from Go modules (the sandbox's oracle)."""


@dataclass(frozen=True)
class Emulation:
    """What `cluster up` asks of the node emulator: the Nodes and the kubelets' timings."""

    nodes: int
    gpus: int
    cpu: str
    memory: str
    pods: int
    prefix: str
    max_grace_seconds: float
    heartbeat_seconds: float


def _emulate(plane: ControlPlane, emulation: Emulation) -> EmulatorThread:
    """Attach the node emulator and register the Nodes (returns once they are schedulable)."""
    emulator = EmulatorThread(
        ClusterAccess(plane.server, plane.ssl_context()),
        max_grace_seconds=emulation.max_grace_seconds,
        heartbeat_seconds=emulation.heartbeat_seconds,
    ).start()
    try:
        if emulation.nodes:
            emulator.create_nodes(
                emulation.nodes,
                gpus=emulation.gpus,
                cpu=emulation.cpu,
                memory=emulation.memory,
                pods=emulation.pods,
                prefix=emulation.prefix,
            )
    except BaseException:
        emulator.stop()
        raise
    return emulator


@cluster.command("up")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--bin-dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--controller-manager/--no-controller-manager", default=True, show_default=True)
@click.option("--emulator/--no-emulator", default=True, show_default=True)
@click.option("--nodes", type=click.IntRange(min=0), default=4, show_default=True)
@click.option("--node-gpus", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--node-cpu", default="64", show_default=True)
@click.option("--node-memory", default="512Gi", show_default=True)
@click.option("--node-pods", type=click.IntRange(min=1), default=110, show_default=True)
@click.option("--node-prefix", default="node", show_default=True)
@click.option("--max-grace-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True)
@click.option(
    "--heartbeat-seconds", type=click.FloatRange(min=0.1), default=10.0, show_default=True
)
def up(
    kubeconfig: Path,
    bin_dir: Path | None,
    workdir: Path | None,
    controller_manager: bool,
    emulator: bool,
    nodes: int,
    node_gpus: int,
    node_cpu: str,
    node_memory: str,
    node_pods: int,
    node_prefix: str,
    max_grace_seconds: float,
    heartbeat_seconds: float,
) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager and the node emulator; stop them on
    SIGINT/SIGTERM."""
    bin_dir = bin_dir or _default_bin_dir()
    if bin_dir is None:
        raise click.UsageError("no built control plane found: run `make kube` or pass --bin-dir")
    if emulator and nodes and not controller_manager:
        raise click.UsageError(
            "--nodes needs the controller manager: its node lifecycle controller lifts the "
            "not-ready taint of new Nodes (pass --nodes 0 or drop --no-controller-manager)"
        )
    emulation = Emulation(
        nodes,
        node_gpus,
        node_cpu,
        node_memory,
        node_pods,
        node_prefix,
        max_grace_seconds,
        heartbeat_seconds,
    )
    _serve(kubeconfig, bin_dir, workdir, controller_manager, emulation if emulator else None)


def _serve(
    kubeconfig: Path,
    bin_dir: Path,
    workdir: Path | None,
    controller_manager: bool,
    emulation: Emulation | None,
) -> None:
    work = workdir or Path(tempfile.mkdtemp(prefix="tephra-cluster-"))
    stop = threading.Event()

    def _on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        with control_plane(bin_dir, work, controller_manager=controller_manager) as plane:
            kubelets = _emulate(plane, emulation) if emulation else None
            try:
                shutil.copyfile(plane.kubeconfig, kubeconfig)
                kubeconfig.chmod(0o600)
                what = f"{emulation.nodes} emulated nodes" if emulation else "no node emulator"
                click.echo(
                    f"control plane ready at {plane.server} ({what}); kubeconfig {kubeconfig}"
                )
                stop.wait()
            finally:
                if kubelets is not None:
                    kubelets.stop()
    except (ControlPlaneError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from None
