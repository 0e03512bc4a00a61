"""`run_sandbox`: an in-process sandbox for tests (real HTTP on 127.0.0.1, port 0 by default).

    with run_sandbox(nodes=make_nodes(count=2, gpus=8)) as sb:
        api = sb.api_client()          # kubernetes.client.ApiClient, loaded from sb.kubeconfig_path
        kubernetes.client.CoreV1Api(api).list_node()

Start-up takes a few tens of milliseconds. Components (controllers, scheduler) given in
`components` are started against the kubeconfig and waited for before the handle is returned.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from batch.sandbox.components import Component, start_all, stop_all
from batch.sandbox.kubeconfig import write_kubeconfig
from batch.sandbox.options import FaultOptions, SandboxOptions
from batch.sandbox.runtime import SandboxThread
from batch.sandbox.store import Obj

T = TypeVar("T")


class SandboxHandle:
    """What `run_sandbox` yields."""

    def __init__(
        self,
        thread: SandboxThread,
        kubeconfig_path: Path,
        components: Sequence[Component],
        tmpdir: Path | None,
    ) -> None:
        self._thread = thread
        self.kubeconfig_path = kubeconfig_path
        self.components = list(components)
        self._tmpdir = tmpdir
        self._stopped = False

    @property
    def url(self) -> str:
        return self._thread.url

    @property
    def options(self) -> SandboxOptions:
        return self._thread.options

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` configured from this sandbox's kubeconfig."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig_path), client_configuration=cfg
        )
        return client.ApiClient(configuration=cfg)

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run fn on the sandbox's event loop (direct access to `self.core`)."""
        return self._thread.call(fn, timeout)

    def apply(self, *objs: Obj) -> None:
        """Create (or update) manifests in-process, without HTTP: fast fixture setup (nodes,
        namespaces, ...). Same defaulting and admission as a request."""
        from batch.sandbox.runtime import install_objects

        docs = copy.deepcopy(list(objs))
        self.call(lambda: install_objects(self.core, docs))

    @property
    def core(self) -> Any:
        assert self._thread.sandbox is not None
        return self._thread.sandbox.core

    @property
    def sandbox(self) -> Any:
        return self._thread.sandbox

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        stop_all(self.components)
        self._thread.stop()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)


@contextmanager
def run_sandbox(
    *,
    nodes: list[Obj] | None = None,
    port: int = 0,
    components: Sequence[Component] = (),
    options: SandboxOptions | None = None,
    faults: FaultOptions | None = None,
    max_grace_seconds: float | None = None,
    install_crds: bool | None = None,
    kubeconfig_path: Path | None = None,
    ready_timeout: float = 60.0,
) -> Iterator[SandboxHandle]:
    """Run a sandbox in a background thread for the duration of the block."""
    opts = options or SandboxOptions()
    opts.port = port or opts.port
    if faults is not None:
        opts.faults = faults
    if max_grace_seconds is not None:
        opts.max_grace_seconds = max_grace_seconds
    if install_crds is not None:
        opts.install_crds = install_crds
    thread = SandboxThread(opts, nodes=nodes).start()
    tmpdir: Path | None = None
    if kubeconfig_path is None:
        tmpdir = Path(tempfile.mkdtemp(prefix="tephra-sandbox-"))
        kubeconfig_path = tmpdir / "kubeconfig"
    write_kubeconfig(kubeconfig_path, thread.url)
    handle = SandboxHandle(thread, kubeconfig_path, components, tmpdir)
    try:
        if components:
            start_all(components, kubeconfig=kubeconfig_path, options=opts, timeout=ready_timeout)
        yield handle
    finally:
        handle.stop()
