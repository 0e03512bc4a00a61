"""The apiserver's ceiling for a scheduler's writes: a "scheduler" that decides nothing.

`benchmarks/e2e_real.py --schedulers plain` runs this process beside (or instead of) the real
schedulers. It binds every pending pod whose schedulerName is `plain-binder` to the next node
in turn, as soon as the watch shows the pod, and posts kube-scheduler's `Scheduled` event with
each bind: the same two requests a pod costs kube-scheduler, through Tephra's own client,
binder and event writer, with no scheduling work and no PodGroup status at all. Its pods/s is
what the control plane, the emulated kubelets and the machine allow for that request mix; a
real scheduler's pods/s divided by it says how much of the ceiling the scheduler reaches.

Not a scheduler: no capacity check (round robin over the Nodes listed at the start; the
benchmark's nodes hold 110 pods each and it creates at most 20 a node), no gangs.

`--protobuf` sends the Binding and the Event as protobuf, as client-go does (the answers are
still read as JSON), through the same `ProtobufCreates` as `tephra scheduler`'s default: what
the wire format costs the apiserver, measured in one run against the JSON binder
(`e2e_real.py --schedulers plain plain-protobuf`).

    python benchmarks/plain_binder.py --kubeconfig K --port P [--concurrency 128] [--protobuf]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from typing import Any

from aiohttp import web

from batch.kube.binder import Binder, BindRequest
from batch.kube.client import KubeClient
from batch.kube.config import load_access
from batch.kube.informer import Reflector
from batch.kube.podcond import scheduled_event
from batch.kube.protobuf import ProtobufCreates
from batch.kube.resource import RESOURCES
from batch.kube.status import StatusWriter

NAME = "plain-binder"


async def serve_ready(port: int, ready: asyncio.Event) -> web.AppRunner:
    """/readyz answers 200 once the pods are listed (as the schedulers' do)."""

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(status=200 if ready.is_set() else 503, text="ok")

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def bind_all(client: KubeClient, concurrency: int, port: int, protobuf: bool) -> None:
    nodes = (await client.list(RESOURCES["Node"])).get("items") or []
    ring = itertools.cycle([str(n["metadata"]["name"]) for n in nodes])
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def sink(_kind: str, etype: str, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        if etype == "ADDED" and spec.get("schedulerName") == NAME and not spec.get("nodeName"):
            queue.put_nowait(pod)

    creates = ProtobufCreates(protobuf)
    binder = Binder(client, concurrency=concurrency, protobuf=creates)
    events = StatusWriter(client, component=NAME, protobuf=creates)

    async def worker() -> None:
        while True:
            meta = (await queue.get())["metadata"]
            req = BindRequest(meta["namespace"], meta["name"], meta["uid"], next(ring), "")
            await binder.bind_one(req)
            await events.post_event(scheduled_event(req.namespace, req.pod, req.uid, req.node))

    pods = Reflector(client, RESOURCES["Pod"], sink, params={"fieldSelector": "spec.nodeName="})
    watching = asyncio.create_task(pods.run())
    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    runner = await serve_ready(port, pods.synced)
    try:
        await asyncio.gather(watching, *workers)
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--port", type=int, required=True, help="serves /readyz")
    ap.add_argument("--concurrency", type=int, default=128, help="binds in flight")
    ap.add_argument("--protobuf", action="store_true", help="bind and post events as protobuf")
    args = ap.parse_args(argv)

    async def run() -> None:
        access = load_access(args.kubeconfig)
        async with KubeClient(access, max_connections=args.concurrency + 16) as client:
            await bind_all(client, args.concurrency, args.port, args.protobuf)

    asyncio.run(run())


if __name__ == "__main__":
    main()
