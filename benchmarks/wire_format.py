"""The apiserver's cost of a scheduler's two writes a pod, in JSON and in protobuf, paired.

Why this exists: `e2e_real.py --schedulers plain plain-protobuf` measures the wire format inside
a whole benchmark (emulated kubelets writing pod statuses, watches, a scheduler process) on a
shared two-core machine, where a run's pods/s moves by tens of percent with the load. This
isolates the two writes: one real control plane (etcd and kube-apiserver only), and rounds in
which `--pods` fresh unbound pods (created first, not measured) are bound and get their
`Scheduled` event through Tephra's own Binder and StatusWriter, as `tephra scheduler` sends
them: JSON and protobuf (`batch.kube.protobuf`) in alternating order (ABBA...), so a drift of
the machine's load weighs on both. Each round reports the apiserver's and etcd's CPU seconds
per 1,000 pods over the binds and events alone, this client's (the encoding's cost), and the
rate; the summary gives each format's median and the ratios.

    python benchmarks/wire_format.py [--pods 3000] [--rounds 3] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_real import cpu_seconds, kube_bin  # this script's directory is on sys.path

from batch.kube.binder import Binder, BindRequest
from batch.kube.client import RESOURCES, KubeClient
from batch.kube.config import load_access
from batch.kube.podcond import scheduled_event
from batch.kube.protobuf import ProtobufCreates
from batch.kube.status import StatusWriter
from batch.sandbox.control_plane import ControlPlane, control_plane

FORMATS = ("json", "protobuf")


@dataclass
class Round:
    fmt: str
    pods: int
    seconds: float
    apiserver: float  # CPU s per 1,000 pods
    etcd: float
    client: float

    @property
    def rate(self) -> float:
        return self.pods / self.seconds


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "wire"}},
        "spec": {
            "schedulerName": "nobody",
            "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        },
    }


async def _bounded(n: int, concurrency: int, fn: Any) -> list[Any]:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> Any:
        async with sem:
            return await fn(i)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def setup_namespace(client: KubeClient, ns: str, pods: int, concurrency: int) -> list[str]:
    """A namespace with its default ServiceAccount (no controller manager makes it) and
    `pods` unbound pods; their uids in order."""
    await client.create(RESOURCES["Namespace"], {"metadata": {"name": ns}})
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    await client.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body=sa)

    async def create(i: int) -> str:
        made = await client.create(RESOURCES["Pod"], pod(f"p-{i:05d}"), ns)
        return str(made["metadata"]["uid"])

    return await _bounded(pods, concurrency, create)


async def one_round(
    client: KubeClient, plane: ControlPlane, fmt: str, ns: str, args: argparse.Namespace
) -> Round:
    uids = await setup_namespace(client, ns, args.pods, args.concurrency)
    creates = ProtobufCreates(fmt == "protobuf")
    binder = Binder(client, concurrency=args.concurrency, protobuf=creates)
    events = StatusWriter(client, component="wire-format", protobuf=creates)
    pids = {name: p.pid for name, p in plane.processes.items()}

    async def bind(i: int) -> None:
        req = BindRequest(ns, f"p-{i:05d}", uids[i], f"node-{i % 100}")
        _, outcome, message = await binder.bind_one(req)
        if message:
            raise SystemExit(f"bind {req.pod}: {outcome} {message}")
        if not await events.post_event(scheduled_event(ns, req.pod, req.uid, req.node)):
            raise SystemExit(f"event of {req.pod} not posted")

    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    own0, t0 = time.process_time(), time.perf_counter()
    await _bounded(args.pods, args.concurrency, bind)
    seconds, own = time.perf_counter() - t0, time.process_time() - own0
    cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
    if fmt == "protobuf" and not creates.enabled:
        raise SystemExit("the apiserver refused protobuf (415)")
    per = 1000 / args.pods
    return Round(fmt, args.pods, seconds, cpu["kube-apiserver"] * per, cpu["etcd"] * per, own * per)


def order(rounds: int) -> list[str]:
    """JSON, protobuf, protobuf, JSON, ...: each format as often first as second."""
    pairs = [FORMATS if i % 2 == 0 else FORMATS[::-1] for i in range(rounds)]
    return list(itertools.chain.from_iterable(pairs))


def report(results: list[Round]) -> None:
    print(" round format     pods/s  apiserver  etcd  client  (CPU s per 1,000 pods)")
    for i, r in enumerate(results):
        print(
            f"{i + 1:>6} {r.fmt:<9} {r.rate:>7.1f} {r.apiserver:>10.2f} {r.etcd:>5.2f} "
            f"{r.client:>7.2f}"
        )
    med = {
        fmt: {
            key: statistics.median(getattr(r, key) for r in results if r.fmt == fmt)
            for key in ("rate", "apiserver", "etcd", "client")
        }
        for fmt in FORMATS
    }
    for fmt in FORMATS:
        m = med[fmt]
        print(
            f"median {fmt:<9} {m['rate']:>7.1f} {m['apiserver']:>10.2f} {m['etcd']:>5.2f} "
            f"{m['client']:>7.2f}"
        )
    j, p = med["json"], med["protobuf"]
    print(
        f"protobuf/JSON: pods/s {p['rate'] / j['rate']:.3f}, apiserver CPU "
        f"{p['apiserver'] / j['apiserver']:.3f}, client CPU {p['client'] / j['client']:.3f}"
    )


async def run(plane: ControlPlane, args: argparse.Namespace) -> list[Round]:
    results = []
    async with KubeClient(load_access(plane.kubeconfig), max_connections=args.concurrency + 8) as c:
        for i, fmt in enumerate(order(args.rounds)):
            results.append(await one_round(c, plane, fmt, f"wire-{i}", args))
            r = results[-1]
            print(
                f"[{time.strftime('%H:%M:%S')}] round {i + 1} {fmt}: {r.rate:.1f} pods/s, "
                f"apiserver {r.apiserver:.2f} s/1000 pods",
                file=sys.stderr,
                flush=True,
            )
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pods", type=int, default=3000, help="pods bound a round")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of rounds (JSON and protobuf)")
    ap.add_argument("--concurrency", type=int, default=64, help="binds in flight")
    args = ap.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="tephra-wire-") as tmp,
        control_plane(kube_bin(), Path(tmp), controller_manager=False) as plane,
    ):
        report(asyncio.run(run(plane, args)))


if __name__ == "__main__":
    main()
