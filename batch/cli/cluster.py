"""`tephra cluster up`: a real control plane (etcd, kube-apiserver, kube-controller-manager)
on 127.0.0.1, built from the pinned Go modules, with Tephra's node emulator as its kubelets and
Tephra's components (or Volcano's) beside it, until SIGINT/SIGTERM.

It takes `tephra sandbox up`'s interface, so a harness written for the sandbox runs on the real
thing: `--nodes FILE` (Node objects; or a count of Nodes shaped by `--node-*`),
`--scheduler-conf`, `--schedule-period`, `--db`/`--no-ledger`, `--port` (0: a free one), the
kubeconfig written once everything is ready and removed on a clean stop.

The binaries come from `--bin-dir` or `scripts/build-kube.sh`'s cache (`make kube` builds them
once). The emulator (`batch.sandbox.emulator_http`, the sandbox's kubelet logic over HTTP)
registers the Nodes, keeps them Ready with leases and runs the pods bound to them by the
`sandbox.tephra.io/*` annotations. `--components tephra` (the default) installs Tephra's CRDs and
runs its controllers, scheduler and webhook (registered with the apiserver) in this process;
`--components volcano` installs Volcano v1.10's CRDs and runs its built vc-controller-manager and
vc-scheduler (`make oracles`); `none` runs the plane alone. See
`batch.sandbox.real_components`. Tephra's webhook includes the pod webhooks (gang injection for
framework pods in namespaces that opted in). The web dashboard runs beside it as beside the
sandbox (`--no-dashboard`, `--dashboard-port`; its URL printed as `dashboard: URL`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from batch.api.errors import UserError, one_line
from batch.api.yamlio import load_yaml_file
from batch.cli.sandbox import (
    StartupError,
    _check_inputs,
    _check_options,
    _ledger_url,
    _stop_on_signals,
)
from batch.cli.serving import component_options, dashboard_beside, dashboard_options
from batch.kube.config import ClusterAccess
from batch.sandbox.control_plane import ControlPlane, control_plane
from batch.sandbox.emulator_http import EmulatorThread
from batch.sandbox.options import SandboxOptions

COMPONENTS = ("tephra", "volcano", "none")


def _default_bin_dir() -> Path | None:
    cache = Path.home() / ".cache" / "tephra"
    built = sorted(cache.glob("kube-v*/kube-apiserver"), key=lambda p: p.stat().st_mtime)
    return built[-1].parent if built else None


@click.group("cluster")
def cluster() -> None:
    """Run a real Kubernetes control plane built from Go modules (the sandbox's oracle)."""


@dataclass(frozen=True)
class Emulation:
    """What `cluster up` asks of the node emulator: the Nodes (`objects` as given, else `nodes`
    of them shaped by the rest) and the kubelets' timings."""

    nodes: int
    gpus: int
    cpu: str
    memory: str
    pods: int
    prefix: str
    max_grace_seconds: float
    heartbeat_seconds: float
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.objects) if self.objects else self.nodes


def _emulate(plane: ControlPlane, emulation: Emulation) -> EmulatorThread:
    """Attach the node emulator and register the Nodes (returns once they are schedulable)."""
    emulator = EmulatorThread(
        ClusterAccess(plane.server, plane.ssl_context()),
        max_grace_seconds=emulation.max_grace_seconds,
        heartbeat_seconds=emulation.heartbeat_seconds,
    ).start()
    try:
        if emulation.objects:
            emulator.register_nodes(emulation.objects)
        elif emulation.nodes:
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


class NodesParam(click.ParamType[int | Path, Any]):
    """`--nodes`: a YAML file of Node objects (as `sandbox up` takes), or a count of Nodes."""

    name = "FILE|N"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | Path:
        if isinstance(value, int | Path):
            return value
        text = str(value)
        if text.isdigit():
            return int(text)
        path = Path(text)
        if not path.is_file():
            self.fail(f"{text!r} is neither a file of Node objects nor a count of Nodes")
        return path


def load_nodes(path: Path) -> list[dict[str, Any]]:
    """The Node objects of a YAML file (a List's items too); UserError for anything else."""
    nodes: list[dict[str, Any]] = []
    for index, doc in enumerate(load_yaml_file(path)):
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and "items" in doc else [doc]
        for item in items or []:
            if not isinstance(item, dict) or item.get("kind") != "Node":
                kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
                raise UserError(f"--nodes {path}: document {index + 1} is a {kind}, not a Node")
            if not (item.get("metadata") or {}).get("name"):
                raise UserError(f"--nodes {path}: document {index + 1}: a Node without a name")
            nodes.append(item)
    if not nodes:
        raise UserError(f"--nodes {path}: no Node objects in the file")
    return nodes


@cluster.command("up")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Write the admin kubeconfig here once everything is ready.",
)
@click.option(
    "--port",
    type=int,
    default=0,
    show_default=True,
    help="The apiserver's port on 127.0.0.1; 0 picks a free one.",
)
@click.option("--bin-dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--components",
    type=click.Choice(COMPONENTS),
    default="tephra",
    show_default=True,
    help="What runs beside the plane: Tephra's controllers, scheduler and webhook; the built "
    "Volcano's scheduler and controller-manager; or nothing.",
)
@click.option("--no-components", is_flag=True, help="Same as --components none.")
@click.option(
    "--volcano-bin-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The built Volcano (vc-scheduler, vc-controller-manager, crds/) for --components "
    "volcano (default: $TEPHRA_VOLCANO_BIN, else `make oracles`' cache).",
)
@component_options(
    "volcano-scheduler.conf for the scheduler (default: Tephra's; Volcano's Helm one for "
    "--components volcano)."
)
@click.option("--controller-manager/--no-controller-manager", default=True, show_default=True)
@click.option("--emulator/--no-emulator", default=True, show_default=True)
@click.option(
    "--nodes",
    type=NodesParam(),
    default=4,
    show_default=True,
    help="YAML file of v1 Node objects (see `tephra sandbox nodes`), or a count of Nodes "
    "shaped by --node-*.",
)
@click.option("--node-gpus", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--node-cpu", default="64", show_default=True)
@click.option("--node-memory", default="512Gi", show_default=True)
@click.option("--node-pods", type=click.IntRange(min=1), default=110, show_default=True)
@click.option("--node-prefix", default="node", show_default=True)
@click.option("--max-grace-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True)
@click.option(
    "--heartbeat-seconds", type=click.FloatRange(min=0.1), default=10.0, show_default=True
)
@dashboard_options
@click.option("-v", "--verbose", is_flag=True)
def up(
    kubeconfig: Path,
    port: int,
    bin_dir: Path | None,
    workdir: Path | None,
    components: str,
    no_components: bool,
    volcano_bin_dir: Path | None,
    scheduler_conf: Path | None,
    schedule_period: float,
    db_url: str | None,
    no_ledger: bool,
    controller_manager: bool,
    emulator: bool,
    nodes: int | Path,
    node_gpus: int,
    node_cpu: str,
    node_memory: str,
    node_pods: int,
    node_prefix: str,
    max_grace_seconds: float,
    heartbeat_seconds: float,
    no_dashboard: bool,
    dashboard_port: int,
    verbose: bool,
) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager, the node emulator and the
    components; write KUBECONFIG once all are ready; stop them on SIGINT/SIGTERM."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    began = time.monotonic()
    if no_components:
        components = "none"
    bin_dir = bin_dir or _default_bin_dir()
    if bin_dir is None:
        raise click.UsageError("no built control plane found: run `make kube` or pass --bin-dir")
    options = SandboxOptions(
        port=port,
        scheduler_conf=scheduler_conf,
        schedule_period=schedule_period,
        db_url=db_url,
        max_grace_seconds=max_grace_seconds,
        heartbeat_seconds=heartbeat_seconds,
    )
    try:
        objects = _check_up(options, components, nodes, ledger=not no_ledger)
    except UserError as exc:
        raise StartupError(one_line(exc)) from None
    if emulator and (objects or nodes) and not controller_manager:
        raise click.UsageError(
            "--nodes needs the controller manager: its node lifecycle controller lifts the "
            "not-ready taint of new Nodes (pass --nodes 0 or drop --no-controller-manager)"
        )
    volcano = _volcano_dir(volcano_bin_dir) if components == "volcano" else None
    emulation = Emulation(
        nodes if isinstance(nodes, int) else 0,
        node_gpus,
        node_cpu,
        node_memory,
        node_pods,
        node_prefix,
        max_grace_seconds,
        heartbeat_seconds,
        objects,
    )
    plane = Plane(
        bin_dir, workdir, controller_manager, port, None if no_dashboard else dashboard_port
    )
    _serve(kubeconfig, plane, emulation if emulator else None, components, options, volcano, began)


def _check_up(
    options: SandboxOptions, components: str, nodes: int | Path, *, ledger: bool
) -> list[dict[str, Any]]:
    """Refuse (UserError) what would only fail once the plane runs; the Nodes of a --nodes
    file; the ledger's URL resolved into `options` (Tephra's components record one)."""
    seconds = {
        "--schedule-period": (options.schedule_period, False),
        "--max-grace-seconds": (options.max_grace_seconds, True),
        "--heartbeat-seconds": (options.heartbeat_seconds, False),
    }
    _check_options(options.port, seconds, {})
    if components == "volcano":
        if options.db_url:
            raise UserError("--db: Volcano's components keep no ledger (drop --db)")
        if options.scheduler_conf is not None:
            load_yaml_file(options.scheduler_conf)
    else:
        _check_inputs(None, options.scheduler_conf)
    if components == "tephra" and ledger:
        options.db_url = _ledger_url(options.db_url)
    else:
        options.db_url = None
    return load_nodes(nodes) if isinstance(nodes, Path) else []


def _volcano_dir(given: Path | None) -> Path:
    from batch.sandbox.real_components import ComponentError, find_volcano

    try:
        return find_volcano(given)
    except ComponentError as exc:
        raise click.ClickException(str(exc)) from None


@dataclass(frozen=True)
class Plane:
    """Where the control plane's binaries are and how to start it."""

    bin_dir: Path
    workdir: Path | None
    controller_manager: bool
    port: int
    #: the dashboard's port beside it (0: a free one; None: no dashboard)
    dashboard: int | None = None


def _serve(
    kubeconfig: Path,
    plane_args: Plane,
    emulation: Emulation | None,
    components: str,
    options: SandboxOptions,
    volcano: Path | None,
    began: float,
) -> None:
    work = plane_args.workdir or Path(tempfile.mkdtemp(prefix="tephra-cluster-"))
    stop = _stop_on_signals()
    try:
        with contextlib.ExitStack() as stack:
            plane = stack.enter_context(
                control_plane(
                    plane_args.bin_dir,
                    work,
                    controller_manager=plane_args.controller_manager,
                    port=plane_args.port,
                )
            )
            if emulation is not None:
                stack.callback(_emulate(plane, emulation).stop)
            names = stack.enter_context(_components(plane, components, options, volcano, work))
            beside = dashboard_beside(plane.kubeconfig, options.db_url, plane_args.dashboard)
            url = stack.enter_context(beside)
            _publish(plane.kubeconfig, kubeconfig)
            stack.callback(kubeconfig.unlink, missing_ok=True)
            what = f"{emulation.count} emulated nodes" if emulation else "no node emulator"
            click.echo(
                f"control plane ready at {plane.server} in {time.monotonic() - began:.2f}s "
                f"({what}; {', '.join(names) or 'no components'}); kubeconfig {kubeconfig}"
            )
            if url is not None:
                click.echo(f"dashboard: {url}", err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            while not stop.wait(0.5):
                pass
            click.echo("control plane stopping")
    except (RuntimeError, OSError, TimeoutError) as exc:
        kept = f" (logs in {work})" if plane_args.workdir is None else ""
        raise click.ClickException(one_line(exc) + kept) from None
    if plane_args.workdir is None:  # a directory of our own: etcd's data and logs go with it
        shutil.rmtree(work, ignore_errors=True)


def _publish(source: Path, kubeconfig: Path) -> None:
    """Copy the admin kubeconfig to KUBECONFIG at once (a caller waiting for the file never
    reads half of it), readable by its owner only."""
    tmp = kubeconfig.with_name(f".{kubeconfig.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o600)
    os.replace(tmp, kubeconfig)


@contextlib.contextmanager
def _components(
    plane: ControlPlane,
    components: str,
    options: SandboxOptions,
    volcano: Path | None,
    work: Path,
) -> Iterator[list[str]]:
    """What runs beside the plane (`--components`): the names of what was started."""
    from batch.sandbox import real_components as real

    if components == "tephra":
        with real.tephra_components(plane, options, work) as names:
            yield names
    elif components == "volcano":
        assert volcano is not None
        real.install_crds(plane, real.volcano_crds(volcano))
        conf = options.scheduler_conf
        if conf is None:
            from batch.scheduler.config import HELM_DEFAULT_CONFIG

            conf = work / "volcano-scheduler.conf"
            conf.write_text(HELM_DEFAULT_CONFIG)
        with real.volcano_components(
            volcano, plane.kubeconfig, work, conf, schedule_period=options.schedule_period
        ) as procs:
            real.wait_queue_open(plane)
            yield [p.label for p in procs]
    else:
        yield []
