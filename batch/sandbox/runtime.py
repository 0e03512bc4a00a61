"""Assembling and running a sandbox: API server, GC, node emulator, workload controllers.

`Sandbox` is the asyncio side (start/stop on a running loop). `SandboxThread` runs one on its
own event loop in a background thread, which is how both `tephra sandbox up` and the test helper
`run_sandbox` use it: the caller's thread stays free for components and tests, and `call()` runs
a function on the sandbox's loop when direct access to the store is needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from batch.api.yamlio import load_yaml_file
from batch.gcpause import space_collections
from batch.sandbox.core import Core
from batch.sandbox.crds import load_crds
from batch.sandbox.emulator_core import NodeEmulator
from batch.sandbox.errors import ApiError
from batch.sandbox.faults import Faults
from batch.sandbox.gc import GarbageCollector
from batch.sandbox.http import HttpApi
from batch.sandbox.loopthread import LoopThread
from batch.sandbox.options import SandboxOptions
from batch.sandbox.store import Obj, Store
from batch.sandbox.wire import WireServer

log = logging.getLogger(__name__)


def install_objects(core: Core, objs: Iterable[Obj]) -> None:
    """Create (or replace) objects given as manifests, resolving their kind via the registry."""
    for obj in objs:
        rt = core.by_kind.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
        if rt is None:
            raise ApiError(400, f"no kind {obj.get('kind')!r} in {obj.get('apiVersion')!r}")
        ns = (obj.get("metadata") or {}).get("namespace", "default") if rt.namespaced else ""
        name = (obj.get("metadata") or {}).get("name", "")
        old = core.find(rt, ns, name) if name else None
        if old is None:
            # a fixture may come from a read: the API would refuse its resourceVersion (500)
            meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
            created = core.create(rt, ns, {**obj, "metadata": meta})
            if "status" in obj and rt.status_subresource and rt.kind != "Node":
                core.write(rt, created, {**created, "status": obj["status"]}, subresource="status")
        else:
            core.write(
                rt, old, {**obj, "metadata": {**old["metadata"], **(obj.get("metadata") or {})}}
            )


class Sandbox:
    """One sandbox cluster on the current event loop."""

    def __init__(
        self, options: SandboxOptions | None = None, *, nodes: list[Obj] | None = None
    ) -> None:
        self.options = options or SandboxOptions()
        self.initial_nodes = list(nodes or [])
        self.core = Core(store=Store(history=self.options.watch_history), seed=self.options.seed)
        self.core.lookup.limits = self.options.admission_limits
        self.gc = GarbageCollector(self.core)
        self.emulator: NodeEmulator | None = None
        self.workloads: Any = None
        faults = Faults(self.options.faults) if self.options.faults.active else None
        self.http = HttpApi(
            self.core,
            faults=faults,
            bookmark_seconds=self.options.bookmark_seconds,
            drop_watch_every=self.options.faults.drop_watch_every,
            allowed_hosts=(*self.options.allowed_hosts, self.options.host),  # and its own
        )
        self._server: WireServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.options.host}:{self.port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        space_collections()  # a store of 100k pods is millions of long-lived dicts
        opts = self.options
        self.gc.start(loop)
        if opts.install_crds:
            install_objects(self.core, load_crds())
        if opts.default_queues:
            self._default_queues()
        if opts.emulator:
            self.emulator = NodeEmulator(
                self.core,
                max_grace_seconds=opts.max_grace_seconds,
                heartbeat_seconds=opts.heartbeat_seconds,
            )
            self.emulator.start(loop)
        if opts.workload_controllers:
            from batch.sandbox.workloads import WorkloadControllers

            self.workloads = WorkloadControllers(self.core)
            self.workloads.start(loop)
        nodes = list(self.initial_nodes)
        if opts.nodes_file is not None:
            nodes += [d for d in load_yaml_file(opts.nodes_file) if isinstance(d, dict)]
        install_objects(self.core, _flatten(nodes))
        self._server = WireServer(self.http.handle)
        self.port = await self._server.start(opts.host, opts.port)
        # let the emulator's call_soon work (nodes Ready) happen before callers proceed
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        log.info("sandbox API server serving on %s", self.url)

    def _default_queues(self) -> None:
        queues = self.core.types.get(("scheduling.volcano.sh", "v1beta1", "queues"))
        if queues is None:
            log.warning("no Queue CRD installed: queues root and default are not created")
            return
        for name in ("root", "default"):
            if self.core.find(queues, "", name) is not None:
                continue
            spec: Obj = {"weight": 1, "reclaimable": name != "root"}
            if name == "default":
                spec["parent"] = "root"
            created = self.core.create(
                queues,
                "",
                {
                    "apiVersion": queues.api_version,
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": spec,
                },
            )
            self.core.write(
                queues, created, {**created, "status": {"state": "Open"}}, subresource="status"
            )

    async def stop(self) -> None:
        self.http.close_watches()
        if self.emulator is not None:
            self.emulator.stop()
        if self.workloads is not None:
            self.workloads.stop()
        if self._server is not None:
            await asyncio.sleep(0)
            await self._server.stop()
            self._server = None


def _flatten(docs: Iterable[Obj]) -> list[Obj]:
    out: list[Obj] = []
    for d in docs:
        if d.get("kind") == "List" or (d.get("kind", "").endswith("List") and "items" in d):
            out += [i for i in d.get("items") or [] if isinstance(i, dict)]
        else:
            out.append(d)
    return out


class SandboxThread(LoopThread):
    """A sandbox on its own event loop in a daemon thread."""

    what = "the sandbox"

    def __init__(
        self, options: SandboxOptions | None = None, *, nodes: list[Obj] | None = None
    ) -> None:
        super().__init__("tephra-sandbox")
        self.options = options or SandboxOptions()
        self._nodes = nodes
        self.sandbox: Sandbox | None = None

    async def setup(self) -> None:
        self.sandbox = Sandbox(self.options, nodes=self._nodes)
        await self.sandbox.start()

    async def teardown(self) -> None:
        if self.sandbox is not None:
            await self.sandbox.stop()

    @property
    def url(self) -> str:
        assert self.sandbox is not None
        return self.sandbox.url
