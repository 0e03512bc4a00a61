"""End-to-end scheduling throughput on the sandbox: create gangs as fast as possible, time binds.

Three processes, as on a real cluster: the sandbox API server (with its node emulator), the
scheduler (`tephra scheduler`), and this driver, which creates PodGroups and pods through HTTP
with many concurrent requests and watches pods to see when each is bound. It prints pods bound
per second, create-to-bound latency percentiles, and the CPU seconds each process used.

    .venv/bin/python benchmarks/e2e_sandbox.py --nodes 1000 --gangs 500 --gang-size 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.config import load_access

ROOT = Path(__file__).resolve().parents[1]
TEPHRA = str(Path(sys.executable).with_name("tephra"))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def node_yaml(count: int) -> str:
    docs = []
    for i in range(count):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:05d}",
                    "labels": {
                        "kubernetes.io/hostname": f"node-{i:05d}",
                        "topology.tephra.io/rack": f"rack-{i // 16}",
                    },
                },
                "status": {
                    "capacity": {
                        "cpu": "32",
                        "memory": "256Gi",
                        "pods": "110",
                        "nvidia.com/gpu": "8",
                    },
                    "allocatable": {
                        "cpu": "32",
                        "memory": "256Gi",
                        "pods": "110",
                        "nvidia.com/gpu": "8",
                    },
                },
            }
        )
    return yaml.safe_dump_all(docs)


def wait_file(path: Path, proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} not ready after {timeout}s")
        time.sleep(0.05)


async def drive(kubeconfig: Path, args: argparse.Namespace) -> dict[str, Any]:
    access = load_access(kubeconfig)
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    restarts: dict[str, Any] = {
        "watch": 0,
        "watch_410": 0,
        "events": 0,
        "stalls": 0,
        "watch_errors": [],
    }
    total = args.gangs * args.gang_size
    async with KubeClient(access, max_connections=args.concurrency + 4) as client:
        listing = await client.list(RESOURCES["Pod"], namespace="bench")
        rv = listing["metadata"]["resourceVersion"]
        done = asyncio.Event()

        def seen(obj: dict[str, Any]) -> None:
            restarts["events"] += 1
            name = obj["metadata"]["name"]
            if obj.get("spec", {}).get("nodeName") and name not in bound:
                bound[name] = time.perf_counter()
                if len(bound) >= total:
                    done.set()

        async def watch() -> None:
            version = rv
            while not done.is_set():
                stream = client.watch(
                    RESOURCES["Pod"], resource_version=version, timeout_seconds=600
                ).__aiter__()
                try:
                    while True:
                        try:
                            # A watchdog: a stream silent for 3 s is resumed from the last
                            # version seen (counted in "stalls").
                            _etype, obj = await asyncio.wait_for(stream.__anext__(), 3.0)
                        except TimeoutError:
                            restarts["stalls"] += 1
                            break
                        except StopAsyncIteration:
                            break
                        version = obj["metadata"].get("resourceVersion") or version
                        if _etype != "BOOKMARK":
                            seen(obj)
                        if done.is_set():
                            return
                except (aiohttp.ClientError, ValueError) as exc:
                    restarts["watch_errors"].append(repr(exc)[:200])
                    continue
                except ApiError as exc:
                    if exc.status != 410:
                        raise
                    restarts["watch_410"] += 1
                    page = await client.list(RESOURCES["Pod"], namespace="bench")
                    for obj in page["items"]:
                        seen(obj)
                    version = page["metadata"]["resourceVersion"]
                restarts["watch"] += 1

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)
        sem = asyncio.Semaphore(args.concurrency)

        async def create(path: str, body: dict[str, Any], key: str | None = None) -> None:
            async with sem:
                for attempt in range(5):
                    try:
                        await client.request("POST", path, body=body)
                        break
                    except (aiohttp.ClientError, OSError):
                        await asyncio.sleep(0.1 * (attempt + 1))
                if key:
                    created[key] = time.perf_counter()

        t0 = time.perf_counter()
        pg_path = RESOURCES["PodGroup"].path(namespace="bench")
        pod_path = RESOURCES["Pod"].path(namespace="bench")
        jobs = []
        for g in range(args.gangs):
            name = f"gang-{g:05d}"
            jobs.append(
                create(
                    pg_path,
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "bench"},
                        "spec": {"minMember": args.gang_size, "queue": "default"},
                    },
                )
            )
            for i in range(args.gang_size):
                pod = f"{name}-{i}"
                jobs.append(
                    create(
                        pod_path,
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {
                                "name": pod,
                                "namespace": "bench",
                                "annotations": {"scheduling.k8s.io/group-name": name},
                            },
                            "spec": {
                                "schedulerName": "volcano",
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "busybox",
                                        "resources": {
                                            "requests": {
                                                "cpu": "1",
                                                "memory": "1Gi",
                                                "nvidia.com/gpu": "1",
                                            },
                                            "limits": {"nvidia.com/gpu": "1"},
                                        },
                                    }
                                ],
                            },
                        },
                        key=pod,
                    )
                )
        await asyncio.gather(*jobs)
        t_created = time.perf_counter()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(done.wait(), args.timeout)
        watcher.cancel()
    t_end = max(bound.values()) if bound else time.perf_counter()
    latencies = sorted(bound[p] - created[p] for p in bound if p in created)

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0

    return {
        "pods": total,
        "bound": len(bound),
        "create_seconds": round(t_created - t0, 2),
        "creates_per_s": round(total / max(t_created - t0, 1e-9), 1),
        "first_create_to_last_bind_s": round(t_end - t0, 2),
        "pods_bound_per_s": round(len(bound) / max(t_end - t0, 1e-9), 1),
        "first_to_last_bind_s": round(t_end - min(bound.values()), 2) if bound else None,
        "binds_per_s_while_binding": round(len(bound) / max(t_end - min(bound.values()), 1e-9), 1)
        if bound
        else None,
        "latency_p50_s": round(pct(0.50), 3),
        "latency_p99_s": round(pct(0.99), 3),
        "driver_watch": restarts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--gang-size", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--schedule-period", default="0.5s")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tephra-e2e-"))
    nodes = tmp / "nodes.yaml"
    nodes.write_text(node_yaml(args.nodes))
    kubeconfig = tmp / "kubeconfig"
    print(f"starting sandbox with {args.nodes} nodes ...", flush=True)
    sandbox = subprocess.Popen(
        [
            TEPHRA,
            "sandbox",
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            str(nodes),
            "--no-components",
        ],
        cwd=ROOT,
    )
    scheduler: subprocess.Popen[bytes] | None = None
    try:
        wait_file(kubeconfig, sandbox, 120, "sandbox")
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
            input=json.dumps(ns).encode(),
            check=True,
            capture_output=True,
        )
        sandbox_cpu0 = cpu_seconds(sandbox.pid)
        scheduler = subprocess.Popen(
            [
                TEPHRA,
                "scheduler",
                "--kubeconfig",
                str(kubeconfig),
                "--schedule-period",
                args.schedule_period,
                "--metrics-port",
                "0",
                "--healthz-port",
                "0",
            ],
            cwd=ROOT,
        )
        time.sleep(2.0)  # initial list of the nodes
        sched_cpu0 = cpu_seconds(scheduler.pid)
        sandbox_cpu0 = cpu_seconds(sandbox.pid)
        driver_cpu0 = time.process_time()
        print(f"creating {args.gangs} gangs of {args.gang_size} pods ...", flush=True)
        result = asyncio.run(drive(kubeconfig, args))
        result["cpu_s_scheduler"] = round(cpu_seconds(scheduler.pid) - sched_cpu0, 2)
        result["cpu_s_apiserver_and_emulator"] = round(cpu_seconds(sandbox.pid) - sandbox_cpu0, 2)
        result["cpu_s_driver"] = round(time.process_time() - driver_cpu0, 2)
        result["nodes"] = args.nodes
        print(json.dumps(result, indent=2))
    finally:
        for proc in (scheduler, sandbox):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
