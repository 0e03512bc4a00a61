"""Benchmark of the sandbox API server: pod creates/s, binds/s, watch events/s, RSS.

The server runs in its own process (`tephra sandbox up --no-components`), the load generator in
this one (asyncio + aiohttp, many concurrent requests), so on a 2-core machine each gets a core.

    .venv/bin/python benchmarks/sandbox_api.py                 # 5,000 nodes, 100,000 pods
    .venv/bin/python benchmarks/sandbox_api.py --nodes 500 --pods 10000 --binds 5000

Phases: create nodes; create pods (creates/s); bind pods round-robin to nodes (binds/s; each
bind also makes the node emulator write the pod's Running status); 4 watchers replay the pod
history from the resourceVersion before the creates (events/s per watcher and in total);
4 watchers receiving live events while pods are patched; RSS of the server process at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc), to express rates per CPU-second:
    on a shared machine wall-clock rates depend on the neighbours, CPU cost does not."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    kubeconfig = tmp / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batch.cli.main",
            "sandbox",
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--no-components",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"sandbox did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return proc, str(server)


class Conn:
    """One keep-alive HTTP/1.1 connection with a minimal response reader.

    A deliberately thin client: aiohttp's client costs more CPU per request than the server
    under test, and on 2 cores it would measure itself rather than the sandbox.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host  # the sandbox refuses a Host it does not serve (DNS rebinding)

    @classmethod
    async def open(cls, server: str) -> Conn:
        host, port = server.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, f"{host}:{port}")

    async def request(self, method: str, path: str, body: bytes, ctype: str) -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {ctype}\r\n"
            f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        chunked = False
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            key = key.strip().lower()
            if key == b"content-length":
                length = int(value)
            elif key == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if not chunked:
            return status, await self.reader.readexactly(length)
        data = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            data += await self.reader.readexactly(size + 2)
            if size == 0:
                return status, data

    def close(self) -> None:
        self.writer.close()


async def run_requests(
    server: str,
    requests: list[tuple[str, str, bytes]],
    concurrency: int,
    label: str,
    ctype: str = "application/json",
) -> float:
    """Send (method, path, body) requests over `concurrency` connections; return requests/s."""
    it = iter(requests)
    errors: dict[int, int] = {}
    done = 0
    total = len(requests)
    conns = [await Conn.open(server) for _ in range(concurrency)]
    began = time.perf_counter()

    async def worker(conn: Conn) -> None:
        nonlocal done
        for method, path, body in it:
            status, _ = await conn.request(method, path, body, ctype)
            if status >= 300:
                errors[status] = errors.get(status, 0) + 1
            done += 1
            if done % 20000 == 0:
                rate = done / (time.perf_counter() - began)
                print(f"  {label}: {done}/{total} ({rate:,.0f}/s)", file=sys.stderr, flush=True)

    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - began
    for c in conns:
        c.close()
    if errors:  # a rate of refused requests measures nothing
        raise SystemExit(f"{label}: {sum(errors.values())} of {total} requests failed: {errors}")
    return total / elapsed


async def watch_count(
    session: aiohttp.ClientSession, url: str, want: int, timeout: float
) -> tuple[int, float]:
    """Read a watch stream until `want` events arrived; return (events, seconds)."""
    got = 0
    began = time.perf_counter()
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines[-1]
            got += len(lines) - 1
            if got >= want:
                break
    return got, time.perf_counter() - began


def pod_body(i: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"bench-{i}",
                "namespace": "bench",
                "labels": {"app": "bench", "shard": str(i % 16)},
                "annotations": {"scheduling.k8s.io/group-name": f"pg-{i // 8}"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ],
            },
        }
    ).encode()


async def main_async(args: argparse.Namespace, server: str, pid: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        await run_requests(
            server,
            [("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": "bench"}}).encode())],
            1,
            "namespace",
        )
        nodes = [
            (
                "POST",
                "/api/v1/nodes",
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": f"n-{i}",
                            "labels": {"topology.tephra.io/rack": f"r{i % 50}"},
                        },
                        "status": {
                            "capacity": {
                                "cpu": "64",
                                "memory": "512Gi",
                                "nvidia.com/gpu": "8",
                                "pods": "110",
                            }
                        },
                    }
                ).encode(),
            )
            for i in range(args.nodes)
        ]
        out["node_creates_per_s"] = await run_requests(server, nodes, args.concurrency, "nodes")
        async with session.get(f"{server}/api/v1/namespaces/bench/pods?limit=1") as resp:
            rv0 = (await resp.json())["metadata"]["resourceVersion"]
        pods = [("POST", "/api/v1/namespaces/bench/pods", pod_body(i)) for i in range(args.pods)]
        cpu0 = cpu_seconds(pid)
        out["pod_creates_per_s"] = await run_requests(server, pods, args.concurrency, "creates")
        out["pod_creates_per_server_cpu_s"] = len(pods) / max(cpu_seconds(pid) - cpu0, 1e-9)
        # 4 watchers replay the history of pod creations (server-side watch delivery speed)
        url = (
            f"{server}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv0}"
            "&timeoutSeconds=600"
        )
        began = time.perf_counter()
        cpu0 = cpu_seconds(pid)
        results = await asyncio.gather(
            *(watch_count(session, url, args.pods, 600) for _ in range(args.watchers))
        )
        wall = time.perf_counter() - began
        out["watch_replay_events_per_s_per_watcher"] = min(n / s for n, s in results)
        out["watch_replay_events_per_s_total"] = sum(n for n, _ in results) / wall
        out["watch_replay_events_per_server_cpu_s"] = sum(n for n, _ in results) / max(
            cpu_seconds(pid) - cpu0, 1e-9
        )
        binds = [
            (
                "POST",
                f"/api/v1/namespaces/bench/pods/bench-{i}/binding",
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": f"bench-{i}"},
                        "target": {"kind": "Node", "name": f"n-{i % args.nodes}"},
                    }
                ).encode(),
            )
            for i in range(min(args.binds, args.pods))
        ]
        cpu0 = cpu_seconds(pid)
        out["binds_per_s"] = await run_requests(server, binds, args.concurrency, "binds")
        out["binds_per_server_cpu_s"] = len(binds) / max(cpu_seconds(pid) - cpu0, 1e-9)
        await asyncio.sleep(1.0)
        # live: 4 watchers receive patches as they happen
        async with session.get(f"{server}/api/v1/namespaces/bench/pods?limit=1") as resp:
            rv1 = (await resp.json())["metadata"]["resourceVersion"]
        n_live = args.live_events
        url = (
            f"{server}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv1}"
            "&timeoutSeconds=600"
        )
        watchers = [
            asyncio.create_task(watch_count(session, url, n_live, 600))
            for _ in range(args.watchers)
        ]
        await asyncio.sleep(0.5)
        patches = [
            (
                "PATCH",
                f"/api/v1/namespaces/bench/pods/bench-{i % args.pods}",
                json.dumps({"metadata": {"labels": {"round": str(i)}}}).encode(),
            )
            for i in range(n_live)
        ]
        began = time.perf_counter()
        patch_rate = await run_requests(
            server, patches, args.concurrency, "patches", ctype="application/merge-patch+json"
        )
        live = await asyncio.gather(*watchers)
        wall = time.perf_counter() - began
        out["live_patch_writes_per_s"] = patch_rate
        out["live_watch_events_per_s_total"] = sum(n for n, _ in live) / wall
        out["rss_mib"] = rss_mib(pid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--binds", type=int, default=100_000)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--live-events", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    load_before = f"{os.getloadavg()[0]:.1f}"
    with tempfile.TemporaryDirectory() as tmp:
        proc, server = start_server(Path(tmp))
        try:
            print(f"sandbox at {server} (pid {proc.pid}); {os.cpu_count()} cpus", file=sys.stderr)
            figures = asyncio.run(main_async(args, server, proc.pid))
        finally:
            proc.terminate()
            proc.wait(30)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"nodes={args.nodes} pods={args.pods} binds={min(args.binds, args.pods)} "
        f"watchers={args.watchers} concurrency={args.concurrency} "
        f"load average before/after: {load_before} / {os.getloadavg()[0]:.1f}"
    )
    for key, value in figures.items():
        print(f"{key:42s} {value:12,.0f}")


if __name__ == "__main__":
    main()
