"""Tephra vs kube-scheduler vs Volcano on a real kube-apiserver: pods bound per second,
create-to-bound.

One run, per cluster size: a real control plane (etcd, kube-apiserver, kube-controller-manager
built by `scripts/build-kube.sh`), Tephra's HTTP node emulator in its own process as the
kubelets of `--nodes` Nodes, and this driver, which creates the same pods once per scheduler of
`--schedulers`: `tephra scheduler`, the built `kube-scheduler` and, when asked for, Volcano
v1.10's `vc-scheduler` (built by `scripts/build-oracle.sh volcano`), each a process of its own
started just before its pods and stopped after them; `plain` (benchmarks/plain_binder.py) binds
each pod to the next node as soon as it sees it, with no scheduling work: the ceiling the
machine and the control plane put on a scheduler's binds and `Scheduled` events (`tephra` and
`plain-protobuf` send those two as protobuf, as client-go does; `tephra-json` and `plain` as
JSON). Workloads:
`--gangs` gangs of `--gang-size` pods (a PodGroup each for Tephra and Volcano, created before
the clock starts as Volcano's controller would; plain pods for kube-scheduler: no gang, its best
case) and `--pods` single pods (a one-member PodGroup each, as Volcano's controller makes for
bare pods).

Each of Tephra and Volcano runs on its own CRDs: Tephra's (crds/) at first; before Volcano's
runs, which come last, Tephra's CRDs are deleted, Volcano's installed and its `default` Queue
created Open (vc-controller-manager is not run: the scheduler alone, as Tephra's is). vc-scheduler
runs Volcano's Helm default configuration with Tephra's `--schedule-period`, and is ready when it
logs "Scheduler completes Initialization"; Tephra and kube-scheduler when /readyz answers.

Two modes. `--mode backlog` (the default) creates every pod first, then starts the scheduler:
pods/s is bound pods over the time from the scheduler's readiness (its caches synced) to the
last bind, latency runs from that start to each pod's bind; this is the schedulers' own
throughput, whatever the apiserver's create rate. `--mode stream` starts the scheduler first and
the clock at the first create: latency runs from the answer to each pod's create to the watch
event that shows it bound, pods/s is bound pods over first create to last bind (capped by the
create rate the apiserver sustains). The driver creates with `--concurrency` requests in flight
and watches bound pods (`spec.nodeName!=`).

No client is rate limited: kube-scheduler's configuration raises its client QPS/burst; Tephra,
the emulator and the driver have no limiter and wide connection pools (`--bind-concurrency`,
`--emulator-connections`, `--concurrency`). The emulator renews its Nodes' Leases over a pool
of its own (`--emulator-node-connections`), as each real kubelet has its own connection: a
scheduler with hundreds of binds in flight cannot crowd the renewals out until the Leases lapse
and the node lifecycle controller marks the Nodes NotReady. Between runs every pod and
PodGroup is deleted, so each scheduler starts on an empty cluster.

    .venv/bin/python benchmarks/e2e_real.py                     # 1,000 and 5,000 nodes
    .venv/bin/python benchmarks/e2e_real.py --nodes 1000 --pods 5000 --gangs 100
    .venv/bin/python benchmarks/e2e_real.py --quick             # 20 nodes, 100 pods: a smoke run
    .venv/bin/python benchmarks/e2e_real.py --schedulers tephra kube-scheduler volcano

`TEPHRA_BENCH_PROFILE=DIR` runs `tephra scheduler` under cProfile, one `.prof` per run in DIR.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from plain_binder import NAME as PLAIN_NAME  # this script's directory is on sys.path

from batch.api.timestamps import epoch_seconds
from batch.api.yamlio import load_yaml_file
from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.config import load_access
from batch.kube.limits import BIND_CONCURRENCY
from batch.sandbox.control_plane import ControlPlane, control_plane
from batch.sandbox.emulator_http import ApiEmulator, schedulable
from batch.sandbox.real_components import (
    VOLCANO_READY,
    ComponentError,
    ComponentProcess,
    create_open_queue,
    delete_crds,
    find_volcano,
    install_crds,
    volcano_crds,
    volcano_scheduler_args,
)
from batch.scheduler import HELM_DEFAULT_CONFIG

ROOT = Path(__file__).resolve().parents[1]
TEPHRA = str(Path(sys.executable).with_name("tephra"))
CRDS = ROOT / "crds"
POD = RESOURCES["Pod"]
EVENT = RESOURCES["Event"]
PODGROUP = RESOURCES["PodGroup"]
NODE = RESOURCES["Node"]
NODE_SHAPE: dict[str, Any] = {"cpu": "32", "memory": "256Gi", "pods": 110}
REQUESTS = {"cpu": "100m", "memory": "128Mi"}
SCHEDULERS = ("tephra", "tephra-json", "kube", "volcano", "plain", "plain-protobuf")
#: how the report names each (and `--schedulers` takes either)
NAMES = {
    "tephra": "tephra",
    "tephra-json": "tephra (JSON)",
    "kube": "kube-scheduler",
    "volcano": "volcano",
    "plain": PLAIN_NAME,
    "plain-protobuf": f"{PLAIN_NAME} (protobuf)",
}
#: the pods' schedulerName (Tephra and Volcano both answer to "volcano")
POD_SCHEDULER = {"kube": "default-scheduler", "plain": PLAIN_NAME, "plain-protobuf": PLAIN_NAME}


def grouped(scheduler: str) -> bool:
    """Whether the scheduler's pods come in PodGroups (kube-scheduler's and the plain
    binder's do not)."""
    return scheduler in ("tephra", "tephra-json", "volcano")


@dataclass(frozen=True)
class Workload:
    """`groups` groups of `size` pods (Tephra's PodGroups ask for all `size`)."""

    name: str
    groups: int
    size: int

    @property
    def pods(self) -> int:
        return self.groups * self.size


@dataclass
class Result:
    """One scheduler's run of one workload at one size."""

    nodes: int
    workload: str
    scheduler: str
    mode: str
    pods: int
    bound: int = 0
    create_s: float = 0.0
    total_s: float = 0.0
    pods_per_s: float = 0.0
    p50_s: float = 0.0
    p99_s: float = 0.0
    scheduler_cpu_s: float = 0.0
    apiserver_cpu_s: float = 0.0
    load: list[float] = field(default_factory=list)
    #: CPU seconds per component during the run (scheduler, kube-apiserver, etcd, ...)
    cpu: dict[str, float] = field(default_factory=dict)
    #: the apiserver's requests during the run, "VERB resource[/subresource]" -> count
    requests: dict[str, int] = field(default_factory=dict)
    #: the same two from the start to `--settle` seconds after the last bind
    settled_cpu: dict[str, float] = field(default_factory=dict)
    settled_requests: dict[str, int] = field(default_factory=dict)
    #: what trails the binds: pods' `Scheduled` events and PodGroups' Running status
    trail: Trail | None = None
    #: pods/s by the apiserver's clock: to the last pod's PodScheduled transition (1 s steps),
    #: and how long after it the driver's watch showed the last pod bound (`bind_clock`)
    api_pods_per_s: float = 0.0
    watch_lag_s: float = 0.0


@dataclass
class Trail:
    """The writes that follow the binds, as the driver's watches saw them: per bound pod, its
    `Scheduled` event (events/pod) and its PodGroup's phase Running (PodGroups/group), at the
    last bind and `settle` s later; seconds from the last bind until every bound pod had its
    event (`events_s`) and every PodGroup was Running (`podgroups_s`), -1 when not within
    `--trail-timeout`; p50/p99 of each pod's bind-to-event seconds."""

    settle: float = 0.0
    events_at_bind: float = 0.0
    events_settled: float = 0.0
    podgroups_at_bind: float = 0.0
    podgroups_settled: float = 0.0
    events_s: float = -1.0
    podgroups_s: float = -1.0
    event_p50_s: float = 0.0
    event_p99_s: float = 0.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def component_cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


_LABEL = re.compile(r'(\w+)="([^"]*)"')


def apiserver_requests(plane: ControlPlane, save: Path | None = None) -> Counter[str]:
    """The apiserver's `apiserver_request_total` by "VERB resource[/subresource]" (every
    client's: the emulator's lease renewals and pod statuses too); its whole `/metrics` also
    go to `save` when given (for `benchmarks/apiserver_split.py`)."""
    counts: Counter[str] = Counter()
    try:
        with urllib.request.urlopen(
            f"{plane.server}/metrics", context=plane.ssl_context(), timeout=30
        ) as answer:
            text = answer.read().decode()
    except OSError as exc:
        log(f"  apiserver metrics unavailable: {exc!r}")
        return counts
    if save is not None:
        save.write_text(text)
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line.rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        what = labels.get("resource", "")
        if labels.get("subresource"):
            what += "/" + labels["subresource"]
        counts[f"{labels.get('verb', '')} {what}"] += int(float(value))
    return counts


def apiserver_profile(plane: ControlPlane, seconds: int, path: Path) -> None:
    """The apiserver's CPU profile over the next `seconds` (`go tool pprof` reads it)."""
    url = f"{plane.server}/debug/pprof/profile?seconds={seconds}"
    try:
        with urllib.request.urlopen(url, context=plane.ssl_context(), timeout=seconds + 30) as a:
            path.write_bytes(a.read())
    except OSError as exc:
        log(f"  apiserver profile unavailable: {exc!r}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kube_bin() -> Path:
    env = os.environ.get("TEPHRA_KUBE_BIN")
    if env:
        return Path(env)
    built = subprocess.run(
        [str(ROOT / "scripts" / "build-kube.sh")], capture_output=True, text=True, check=True
    )
    return Path(built.stdout.strip())


# ---------------------------------------------------------------------------- objects
def pod_body(name: str, scheduler: str, group: str | None) -> dict[str, Any]:
    """The benchmark's pod: identical for every scheduler but for schedulerName and the group
    (Tephra and Volcano both answer to "volcano")."""
    meta: dict[str, Any] = {"name": name, "labels": {"app": "bench"}}
    if group is not None:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": POD_SCHEDULER.get(scheduler, "volcano"),
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [
                {"name": "main", "image": "busybox:1.36", "resources": {"requests": REQUESTS}}
            ],
        },
    }


def podgroup_body(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def pods_of(workload: Workload, scheduler: str) -> list[dict[str, Any]]:
    out = []
    for g in range(workload.groups):
        group = f"{workload.name}-{g:05d}"
        for i in range(workload.size):
            name = f"{group}-{i}" if workload.size > 1 else group
            out.append(pod_body(name, scheduler, group if grouped(scheduler) else None))
    return out


# ---------------------------------------------------------------------------- the emulator
def serve_emulator(args: argparse.Namespace) -> None:
    """The child process: the HTTP node emulator with `args.nodes[0]` Nodes until SIGTERM."""

    async def main() -> None:
        emulator = ApiEmulator(
            load_access(args.serve_emulator),
            max_grace_seconds=1.0,
            heartbeat_seconds=args.heartbeat_seconds,
            max_connections=args.emulator_connections,
            node_connections=args.emulator_node_connections,
        )
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await emulator.start(timeout=300)
        await emulator.create_nodes(args.nodes[0], concurrency=64, **NODE_SHAPE)
        Path(args.ready_file).write_text("ok")
        await stop.wait()
        await emulator.stop()

    asyncio.run(main())


@contextlib.contextmanager
def emulator_process(plane: ControlPlane, nodes: int, args: argparse.Namespace) -> Iterator[int]:
    """Run the emulator in its own process (its CPU is not the driver's); yields its pid."""
    ready = plane.workdir / "emulator.ready"
    cmd = [sys.executable, __file__, "--serve-emulator", str(plane.kubeconfig)]
    cmd += ["--ready-file", str(ready), "--nodes", str(nodes)]
    cmd += ["--heartbeat-seconds", str(args.heartbeat_seconds)]
    cmd += ["--emulator-connections", str(args.emulator_connections)]
    cmd += ["--emulator-node-connections", str(args.emulator_node_connections)]
    with (plane.workdir / "emulator.log").open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (plane.workdir / "emulator.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"node emulator failed (exit {proc.returncode}):\n{tail}")
            time.sleep(0.2)
        yield proc.pid
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_schedulable(client: KubeClient, count: int, timeout: float = 900.0) -> None:
    """Wait until 99 % of `count` Nodes are Ready and untainted at once (a LIST every 5 s). Under
    load a few leases renew late and their Nodes flap: both schedulers see the same ones."""
    deadline = time.monotonic() + timeout
    while True:
        page = await client.list(NODE)
        ready = sum(1 for n in page["items"] if schedulable(n))
        if ready >= 0.99 * count:
            log(f"  {ready}/{count} nodes schedulable")
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {ready}/{count} nodes schedulable after {timeout:.0f} s")
        log(f"  {ready}/{count} nodes schedulable ...")
        await asyncio.sleep(5.0)


# ---------------------------------------------------------------------------- the schedulers
def tephra_command(
    plane: ControlPlane, port: int, args: argparse.Namespace, tag: str, *, json: bool = False
) -> list[str]:
    """`tephra scheduler`; `json`: its Bindings and Events as JSON, not protobuf (`tephra-json`)."""
    cmd = [TEPHRA, "scheduler", "--kubeconfig", str(plane.kubeconfig)]
    if json:
        cmd += ["--kube-api-content-type", "application/json"]
    cmd += ["--schedule-period", args.schedule_period, "--bind-concurrency"]
    cmd += [str(args.bind_concurrency), "--metrics-port", str(port), "--healthz-port", str(port)]
    profile = os.environ.get("TEPHRA_BENCH_PROFILE")
    if profile:
        Path(profile).mkdir(parents=True, exist_ok=True)
        out = Path(profile) / f"tephra-{tag}.prof"
        cmd = [sys.executable, "-m", "cProfile", "-o", str(out), *cmd]
    return cmd


def plain_command(
    plane: ControlPlane, port: int, args: argparse.Namespace, *, protobuf: bool
) -> list[str]:
    """The plain binder (benchmarks/plain_binder.py): the apiserver's ceiling for the binds and
    events, with Tephra's bind concurrency."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "plain_binder.py")]
    cmd += ["--kubeconfig", str(plane.kubeconfig), "--port", str(port)]
    cmd += ["--concurrency", str(args.bind_concurrency)]
    return [*cmd, "--protobuf"] if protobuf else cmd


def kube_command(plane: ControlPlane, port: int, args: argparse.Namespace) -> list[str]:
    """kube-scheduler with its own configuration: client QPS/burst raised, no leader election."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(plane.kubeconfig),
            "qps": args.kube_qps,
            "burst": args.kube_qps * 2,
        },
        "leaderElection": {"leaderElect": False},
    }
    path = plane.workdir / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return [
        str(args.bin_dir / "kube-scheduler"),
        f"--config={path}",
        f"--kubeconfig={plane.kubeconfig}",
        f"--authentication-kubeconfig={plane.kubeconfig}",
        f"--authorization-kubeconfig={plane.kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--v=1",
    ]


def start_volcano(plane: ControlPlane, args: argparse.Namespace, tag: str) -> ComponentProcess:
    """vc-scheduler with Volcano's Helm default configuration and Tephra's period, once it logs
    that it has initialized (its caches synced). The configuration file has a directory of its
    own: vc-scheduler reloads it on every change in its directory, the logs' writes included."""
    conf = plane.workdir / "volcano-conf" / "scheduler.conf"
    conf.parent.mkdir(exist_ok=True)
    conf.write_text(HELM_DEFAULT_CONFIG)
    argv = volcano_scheduler_args(plane.kubeconfig, conf, args.schedule_period)
    log_path = plane.workdir / f"volcano-{tag}.log"
    proc = ComponentProcess(log_path, args.volcano_bin_dir / "vc-scheduler", *argv, cwd=ROOT)
    try:
        proc.wait_for(VOLCANO_READY, timeout=120)
    except ComponentError as exc:
        proc.stop()
        raise SystemExit(f"volcano not ready: {exc}; see {log_path}") from exc
    return proc


def start_scheduler(
    plane: ControlPlane, scheduler: str, args: argparse.Namespace, tag: str
) -> tuple[subprocess.Popen[bytes], int]:
    """Start one scheduler and return once it is ready (its caches synced), with the port it
    serves /readyz (and Tephra's /metrics) on (0 for Volcano, whose log says it is ready)."""
    if scheduler == "volcano":
        return start_volcano(plane, args, tag).proc, 0
    port = free_port()
    url, ctx = f"http://127.0.0.1:{port}/readyz", None
    if scheduler in ("tephra", "tephra-json"):
        cmd = tephra_command(plane, port, args, tag, json=scheduler == "tephra-json")
    elif scheduler in ("plain", "plain-protobuf"):
        cmd = plain_command(plane, port, args, protobuf=scheduler == "plain-protobuf")
    else:
        cmd = kube_command(plane, port, args)
        url, ctx = f"https://127.0.0.1:{port}/readyz", ssl._create_unverified_context()
    with (plane.workdir / f"{scheduler}-{tag}.log").open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{scheduler} exited {proc.returncode}: see {out.name}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, context=ctx, timeout=2) as answer,
        ):
            if answer.status == 200:
                return proc, port
        time.sleep(0.2)
    stop_process(proc)
    raise SystemExit(f"{scheduler} not ready within 120 s: see {out.name}")


def save_metrics(port: int, path: Path) -> None:
    """Tephra's /metrics at the end of a run (session and action latencies), for profiling."""
    url = f"http://127.0.0.1:{port}/metrics"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=10) as answer:
        path.write_bytes(answer.read())


# ---------------------------------------------------------------------------- one run
@dataclass
class Clock:
    """What the driver saw: when each pod's create answered and when it was seen bound."""

    total: int
    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    errors: list[str] = field(default_factory=list)
    #: pod -> when its `Scheduled` event was seen; PodGroup -> when it was first seen Running
    scheduled: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    groups: int = 0

    def saw(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = time.perf_counter()
            if len(self.bound) >= self.total:
                self.done.set()

    def saw_event(self, obj: dict[str, Any]) -> None:
        name = (obj.get("involvedObject") or {}).get("name")
        if name and name not in self.scheduled:
            self.scheduled[name] = time.perf_counter()

    def saw_podgroup(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if (obj.get("status") or {}).get("phase") == "Running" and name not in self.running:
            self.running[name] = time.perf_counter()

    def trailed(self) -> bool:
        """Every bound pod has its event, every PodGroup is Running."""
        return len(self.scheduled) >= len(self.bound) and len(self.running) >= self.groups


#: what the driver follows: (resource, field selector but the namespace, the clock's method)
FOLLOWED = {
    "bound": (POD, "spec.nodeName!=", Clock.saw),
    "scheduled": (EVENT, "reason=Scheduled,involvedObject.kind=Pod", Clock.saw_event),
    "running": (PODGROUP, "", Clock.saw_podgroup),
}


async def follow(client: KubeClient, ns: str, clock: Clock, what: str) -> None:
    """Feed the namespace's objects of `what` (FOLLOWED) to the clock, those listed now, then
    the watch's; resume from the last version, re-list on 410. Until cancelled."""
    res, selector, saw = FOLLOWED[what]
    version = ""
    while True:
        try:
            if not version:
                page = await client.list(res, namespace=ns, **_selector(selector))
                for obj in page["items"]:
                    saw(clock, obj)
                version = page["metadata"]["resourceVersion"]
            params = _selector(",".join(filter(None, (selector, f"metadata.namespace={ns}"))))
            async for etype, obj in client.watch(
                res, resource_version=version, timeout_seconds=600, **params
            ):
                version = obj["metadata"].get("resourceVersion") or version
                if etype in ("ADDED", "MODIFIED"):
                    saw(clock, obj)
        except ApiError as exc:
            if exc.status != 410:
                raise
            version = ""
        except (aiohttp.ClientError, TimeoutError) as exc:
            clock.errors.append(f"watch {what}: {exc!r}"[:200])


def _selector(selector: str) -> dict[str, str]:
    return {"fieldSelector": selector} if selector else {}


async def create_all(
    client: KubeClient,
    res: Any,
    ns: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    answered: dict[str, float] | None = None,
) -> dict[str, float]:
    """Create every object with `concurrency` requests in flight; name -> time of the answer
    (filled in as they come). Transient failures are retried; a 409 after a retry means the
    first attempt got through."""
    gate = asyncio.Semaphore(concurrency)
    answered = {} if answered is None else answered

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            for attempt in range(8):
                try:
                    await client.create(res, body, namespace=ns)
                    break
                except ApiError as exc:
                    if exc.status == 409 and attempt:
                        break
                    if exc.status not in (429, 500, 503, 504):
                        raise
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.2 * (attempt + 1))
            answered[body["metadata"]["name"]] = time.perf_counter()

    await asyncio.gather(*(one(b) for b in bodies))
    return answered


async def report_progress(clock: Clock, started: float) -> None:
    while True:
        await asyncio.sleep(5.0)
        elapsed = time.perf_counter() - started
        log(
            f"  {elapsed:6.1f} s: created {len(clock.created)}, bound {len(clock.bound)}, "
            f"Scheduled events {len(clock.scheduled)}, PodGroups Running {len(clock.running)}"
        )


@contextlib.asynccontextmanager
async def watching(client: KubeClient, ns: str, clock: Clock) -> AsyncIterator[None]:
    """Record the namespace's bound pods, pods' Scheduled events and Running PodGroups and log
    progress while the body runs."""
    tasks = [asyncio.create_task(follow(client, ns, clock, what)) for what in FOLLOWED]
    tasks.append(asyncio.create_task(report_progress(clock, time.perf_counter())))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def summarize(result: Result, clock: Clock, started: float, created: float) -> None:
    """Fill `result` from the clock. Latency runs from each pod's create (stream) or from the
    scheduler's start (backlog: the pods were all there before it)."""
    if result.mode == "backlog":
        started = min([started, *clock.bound.values()])
        origin = dict.fromkeys(clock.bound, started)
    else:
        origin = clock.created
    latencies = sorted(max(clock.bound[p] - origin[p], 0.0) for p in clock.bound if p in origin)

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0

    last = max(clock.bound.values()) if clock.bound else time.perf_counter()
    result.bound = len(clock.bound)
    result.create_s = round(created, 2)
    result.total_s = round(last - started, 2)
    result.pods_per_s = round(result.bound / max(last - started, 1e-9), 1)
    result.p50_s = round(pct(0.50), 3)
    result.p99_s = round(pct(0.99), 3)


async def namespace(client: KubeClient, ns: str) -> None:
    """Create `ns` and wait for its default ServiceAccount (pods are refused without it)."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    await client.create(RESOURCES["Namespace"], body)
    path = f"/api/v1/namespaces/{ns}/serviceaccounts/default"
    for _ in range(300):
        with contextlib.suppress(ApiError):
            await client.request("GET", path)
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"no default ServiceAccount in {ns} (kube-controller-manager)")


async def clean(client: KubeClient, ns: str, concurrency: int) -> None:
    """Delete every pod (grace 0) and PodGroup of `ns`, then `ns`; wait until the pods are gone."""
    gate = asyncio.Semaphore(concurrency)

    async def delete(res: Any, name: str) -> None:
        async with gate:
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                await client.delete(res, name, ns, grace_seconds=0)

    for res in (POD, PODGROUP):
        for _ in range(5):
            page = await client.list(res, namespace=ns)
            if not page["items"]:
                break
            await asyncio.gather(*(delete(res, o["metadata"]["name"]) for o in page["items"]))
    await client.delete(RESOURCES["Namespace"], ns)


async def podgroups(client: KubeClient, ns: str, workload: Workload, concurrency: int) -> None:
    """The PodGroups, one per group, made before the clock starts (Volcano's controller)."""
    groups = [
        podgroup_body(f"{workload.name}-{g:05d}", workload.size) for g in range(workload.groups)
    ]
    t = time.perf_counter()
    await create_all(client, PODGROUP, ns, groups, concurrency)
    log(f"  {len(groups)} PodGroups created in {time.perf_counter() - t:.1f} s")


async def measure(
    plane: ControlPlane,
    client: KubeClient,
    ns: str,
    clock: Clock,
    bodies: list[dict[str, Any]],
    result: Result,
    args: argparse.Namespace,
    emulator: int,
) -> tuple[float, float]:
    """Create the pods and run the scheduler in the order of the mode, until every pod is bound
    or the timeout; (when the scheduler was ready, seconds the creates took)."""
    create_s = 0.0
    if result.mode == "backlog":
        t = time.perf_counter()
        await create_all(client, POD, ns, bodies, args.concurrency, clock.created)
        create_s = time.perf_counter() - t
        log(f"  {len(bodies)} pods created in {create_s:.1f} s; starting {result.scheduler}")
    # Counted from before the scheduler starts (a small backlog is bound before a scrape made
    # after its readiness ends), the scheduler's own CPU from its readiness (not its imports).
    pids = {name: p.pid for name, p in plane.processes.items()}
    pids.update(emulator=emulator)
    saved = plane.workdir / f"{result.scheduler}-{result.workload}-apiserver"
    requests0 = await asyncio.to_thread(apiserver_requests, plane, saved.with_suffix(".0"))
    profile = int(os.environ.get("TEPHRA_BENCH_APISERVER_PPROF") or 0)
    cpu0 = component_cpu(pids)
    proc, port = await asyncio.to_thread(start_scheduler, plane, result.scheduler, args, ns)
    pids.update(scheduler=proc.pid)
    cpu0.update(component_cpu({"scheduler": proc.pid}))
    result.load = [round(os.getloadavg()[0], 2)]
    started = time.perf_counter()
    pprof = None
    if profile:  # TEPHRA_BENCH_APISERVER_PPROF=SECONDS: the apiserver's CPU from the start
        pprof = asyncio.create_task(
            asyncio.to_thread(apiserver_profile, plane, profile, saved.with_suffix(".pprof"))
        )
    try:
        if result.mode == "stream":
            await create_all(client, POD, ns, bodies, args.concurrency, clock.created)
            create_s = time.perf_counter() - started
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(clock.done.wait(), args.timeout)
    finally:
        cpu1 = component_cpu(pids)
        requests1 = await asyncio.to_thread(apiserver_requests, plane, saved.with_suffix(".1"))
        result.cpu = {name: round(cpu1[name] - cpu0[name], 2) for name in pids}
        result.requests = dict(sorted((requests1 - requests0).items()))
        result.scheduler_cpu_s = round(result.cpu["scheduler"], 1)
        result.apiserver_cpu_s = round(result.cpu["kube-apiserver"], 1)
        if clock.done.is_set() and args.settle > 0:  # the writes that trail the last bind
            await asyncio.sleep(args.settle)
            cpu2 = component_cpu(pids)
            requests2 = await asyncio.to_thread(apiserver_requests, plane, saved.with_suffix(".2"))
            result.settled_cpu = {name: round(cpu2[name] - cpu0[name], 2) for name in pids}
            result.settled_requests = dict(sorted((requests2 - requests0).items()))
        if clock.done.is_set():
            await wait_trailed(clock, args.trail_timeout - args.settle)
        result.load.append(round(os.getloadavg()[0], 2))
        if pprof is not None:
            await pprof
        if result.scheduler in ("tephra", "tephra-json"):
            await asyncio.to_thread(save_metrics, port, plane.workdir / f"{ns}.metrics")
        await asyncio.to_thread(stop_process, proc)
    return started, create_s


async def bind_clock(
    client: KubeClient, ns: str, result: Result, clock: Clock, started: float
) -> None:
    """The run by the apiserver's clock: each bound pod's PodScheduled condition, which the
    binding sets (whole seconds). A driver whose watch falls behind (its own CPU, or the
    apiserver's pod watch) sees the last bind late, and counts the pods/s low by as much."""
    wall = time.time() - time.perf_counter()  # perf_counter -> wall clock
    pods = (await client.list(POD, namespace=ns))["items"]
    stamps = [
        epoch_seconds(c.get("lastTransitionTime"))
        for p in pods
        for c in (p.get("status") or {}).get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "True"
    ]
    if len(stamps) < len(clock.bound) or not clock.bound:
        return
    last = max(stamps) + 0.5  # the middle of its second
    result.api_pods_per_s = round(len(stamps) / max(last - (started + wall), 1e-9), 1)
    result.watch_lag_s = round(max(clock.bound.values()) + wall - last, 1)


async def wait_trailed(clock: Clock, timeout: float) -> None:
    """Until every bound pod has its event and every PodGroup is Running, or `timeout` s."""
    deadline = time.perf_counter() + timeout
    while not clock.trailed() and time.perf_counter() < deadline:
        await asyncio.sleep(0.2)


def trail_of(clock: Clock, settle: float) -> Trail:
    """The trailing writes of a run whose every pod was bound (`Trail`)."""
    last = max(clock.bound.values())
    bound, groups = len(clock.bound), max(clock.groups, 1)

    def share(seen: dict[str, float], until: float, per: int) -> float:
        return round(sum(1 for t in seen.values() if t <= until) / per, 3)

    def lag(seen: dict[str, float], want: int) -> float:
        return round(max(max(seen.values()) - last, 0.0), 2) if len(seen) >= want else -1.0

    each = sorted(max(t - clock.bound.get(p, t), 0.0) for p, t in clock.scheduled.items())
    return Trail(
        settle=settle,
        events_at_bind=share(clock.scheduled, last, bound),
        events_settled=share(clock.scheduled, last + settle, bound),
        podgroups_at_bind=share(clock.running, last, groups),
        podgroups_settled=share(clock.running, last + settle, groups),
        events_s=lag(clock.scheduled, bound),
        podgroups_s=lag(clock.running, clock.groups) if clock.groups else 0.0,
        event_p50_s=round(each[len(each) // 2], 2) if each else 0.0,
        event_p99_s=round(each[min(len(each) - 1, int(0.99 * len(each)))], 2) if each else 0.0,
    )


async def run_one(
    plane: ControlPlane,
    nodes: int,
    workload: Workload,
    scheduler: str,
    args: argparse.Namespace,
    emulator: int,
    *,
    clean_after: bool = True,
) -> Result:
    ns = f"{scheduler}-{workload.name}-{nodes}"
    result = Result(nodes, workload.name, scheduler, args.mode, workload.pods)
    bodies = pods_of(workload, scheduler)
    clock = Clock(len(bodies), groups=workload.groups if grouped(scheduler) else 0)
    async with KubeClient(load_access(plane.kubeconfig), max_connections=args.concurrency + 8) as c:
        await namespace(c, ns)
        if grouped(scheduler):
            await podgroups(c, ns, workload, args.concurrency)
        async with watching(c, ns, clock):
            started, created = await measure(plane, c, ns, clock, bodies, result, args, emulator)
        summarize(result, clock, started, created)
        if clock.done.is_set():
            result.trail = trail_of(clock, args.settle)
            await bind_clock(c, ns, result, clock, started)
        if clock.errors:
            log(f"  driver watch errors: {clock.errors[:3]}")
        if clean_after:
            t = time.perf_counter()
            await clean(c, ns, args.concurrency)
            log(f"  cleaned {ns} in {time.perf_counter() - t:.1f} s")
    return result


# ---------------------------------------------------------------------------- one size
def side_of(scheduler: str) -> str | None:
    """Whose CRDs a scheduler runs on: "volcano", "tephra", or None (kube-scheduler: any)."""
    return {"tephra": "tephra", "tephra-json": "tephra", "volcano": "volcano"}.get(scheduler)


def tephra_crds() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(CRDS.glob("*.yaml"))
        for doc in load_yaml_file(path)
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]


def use_crds(plane: ControlPlane, side: str, args: argparse.Namespace) -> None:
    """Make the plane's Volcano API `side`'s: the other side's CRDs deleted (their objects with
    them), this side's installed and served; on Volcano's, its `default` Queue, Open."""
    t = time.perf_counter()
    volcano = [] if args.volcano_bin_dir is None else volcano_crds(args.volcano_bin_dir)
    own, other = (volcano, tephra_crds()) if side == "volcano" else (tephra_crds(), volcano)
    delete_crds(plane, [crd["metadata"]["name"] for crd in other])
    install_crds(plane, own, timeout=120)
    if side == "volcano":
        create_open_queue(plane)
    log(f"  {side}'s CRDs in place in {time.perf_counter() - t:.1f} s")


def ordered_runs(workloads: list[Workload], schedulers: list[str]) -> list[tuple[Workload, str]]:
    """Every (workload, scheduler), workload by workload as given, but Volcano's after the
    others': the plane switches to Volcano's CRDs once."""
    runs = [(w, s) for w in workloads for s in schedulers]
    return sorted(runs, key=lambda run: run[1] == "volcano")


def run_size(
    nodes: int, workloads: list[Workload], args: argparse.Namespace, before: list[Result]
) -> list[Result]:
    results: list[Result] = []
    workdir = Path(tempfile.mkdtemp(prefix=f"tephra-bench-real-{nodes}-"))
    log(f"control plane for {nodes} nodes in {workdir} ...")
    runs = ordered_runs(workloads, args.schedulers)
    try:
        _run_on_plane(nodes, workdir, runs, args, before, results)
    finally:
        # the logs stay for a post-mortem; etcd's data (hundreds of MB a run) does not
        shutil.rmtree(workdir / "etcd", ignore_errors=True)
        log(f"logs of the {nodes}-node runs kept in {workdir}")
    return results


def _run_on_plane(
    nodes: int,
    workdir: Path,
    runs: list[tuple[Workload, str]],
    args: argparse.Namespace,
    before: list[Result],
    results: list[Result],
) -> None:
    with control_plane(args.bin_dir, workdir) as plane:
        crds = next((side for _, s in runs if (side := side_of(s))), "tephra")
        use_crds(plane, crds, args)
        with emulator_process(plane, nodes, args) as emulator:
            asyncio.run(_wait_nodes(plane, nodes))
            for i, (workload, scheduler) in enumerate(runs):
                side = side_of(scheduler)
                if side is not None and side != crds:
                    use_crds(plane, side, args)
                    crds = side
                log(f"{nodes} nodes, {workload.name} ({workload.pods} pods): {scheduler}")
                last = i == len(runs) - 1  # the control plane goes: nothing to clean
                result = asyncio.run(
                    run_one(plane, nodes, workload, scheduler, args, emulator, clean_after=not last)
                )
                log(f"  -> {format_row(result)}")
                results.append(result)
                if args.json is not None:  # after every run: a cut-off loses nothing
                    done = [asdict(r) for r in (*before, *results)]
                    args.json.write_text(json.dumps(done, indent=2))


async def _wait_nodes(plane: ControlPlane, nodes: int) -> None:
    async with KubeClient(load_access(plane.kubeconfig)) as client:
        await wait_schedulable(client, nodes)


# ---------------------------------------------------------------------------- report
HEADER = (
    f"{'nodes':>6} {'workload':<14} {'scheduler':<15} {'bound':>13} {'create s':>8} "
    f"{'pods/s':>8} {'p50 s':>7} {'p99 s':>7} {'sched cpu':>9} {'api cpu':>8} {'load':>11}"
)


def format_row(r: Result) -> str:
    name = NAMES.get(r.scheduler, r.scheduler)
    shape = {"gangs": "gangs", "pods": "single pods"}.get(r.workload, r.workload)
    load = "-".join(f"{x:.1f}" for x in r.load)
    return (
        f"{r.nodes:>6} {shape:<14} {name:<15} {f'{r.bound}/{r.pods}':>13} {r.create_s:>8.1f} "
        f"{r.pods_per_s:>8.1f} {r.p50_s:>7.2f} {r.p99_s:>7.2f} {r.scheduler_cpu_s:>9.1f} "
        f"{r.apiserver_cpu_s:>8.1f} {load:>11}"
    )


def print_costs(results: list[Result]) -> None:
    """Per run: each component's CPU seconds per 1,000 bound pods, and the apiserver's requests
    per bound pod by verb and resource (those at 0.01 a pod or more), until the last bind and
    until `--settle` seconds later."""
    print("CPU s per 1,000 pods by component; apiserver requests per pod (every client's)")
    for r in results:
        if not r.bound or not r.cpu:
            continue
        name = NAMES.get(r.scheduler, r.scheduler)
        print(f"{r.nodes:>6} {r.workload:<6} {name}")
        print_cost("to the last bind", r.bound, r.cpu, r.requests)
        if r.settled_cpu:
            print_cost("and settled", r.bound, r.settled_cpu, r.settled_requests)
    print()


def print_cost(when: str, bound: int, cpu: dict[str, float], requests: dict[str, int]) -> None:
    per_k = 1000 / bound
    cpus = ", ".join(f"{k} {v * per_k:.2f}" for k, v in cpu.items())
    print(f"  {when:<17} cpu: {cpus}")
    reqs = [(k, v / bound) for k, v in requests.items() if v / bound >= 0.01]
    listed = ", ".join(f"{k} {v:.2f}" for k, v in sorted(reqs, key=lambda kv: -kv[1]))
    total = sum(requests.values()) / bound
    print(f"  {'':<17} requests/pod {total:.2f}: {listed}")


def print_trails(results: list[Result]) -> None:
    """Per run: the Scheduled events per bound pod and the PodGroups Running per PodGroup at
    the last bind and `--settle` s later, seconds after the last bind until all were there
    (-1: not within `--trail-timeout`), and each pod's bind-to-event seconds."""
    runs = [r for r in results if r.trail is not None]
    if not runs:
        return
    print("what trails the binds: Scheduled events/pod and PodGroups Running/group")
    print(
        f"{'nodes':>6} {'workload':<8} {'scheduler':<15} {'events/pod':>17} {'all s':>6} "
        f"{'bind->event p50/p99 s':>21} {'PodGroups Running':>19} {'all s':>6}"
    )
    for r in runs:
        t = r.trail
        assert t is not None
        name = NAMES.get(r.scheduler, r.scheduler)
        events = f"{t.events_at_bind:.2f} -> {t.events_settled:.2f}"
        groups = f"{t.podgroups_at_bind:.2f} -> {t.podgroups_settled:.2f}"
        each = f"{t.event_p50_s:.2f}/{t.event_p99_s:.2f}"
        print(
            f"{r.nodes:>6} {r.workload:<8} {name:<15} {events:>17} {t.events_s:>6.1f} "
            f"{each:>21} {groups:>19} {t.podgroups_s:>6.1f}"
        )
    settle = {r.trail.settle for r in runs if r.trail is not None}
    print(f"  (at the last bind -> {', '.join(f'{x:g}' for x in sorted(settle))} s later)")
    print()


def print_bind_clock(results: list[Result]) -> None:
    """Per run: pods/s to the last PodScheduled transition (the apiserver's clock, whole
    seconds), and how many seconds later the driver's watch saw the last pod bound."""
    runs = [r for r in results if r.api_pods_per_s]
    if not runs:
        return
    print("by the apiserver's clock: pods/s to the last PodScheduled, the driver's watch lag")
    for r in runs:
        name = NAMES.get(r.scheduler, r.scheduler)
        print(
            f"{r.nodes:>6} {r.workload:<8} {name:<15} {r.api_pods_per_s:>8.1f} pods/s, "
            f"watch {r.watch_lag_s:+.1f} s"
        )
    print()


def print_report(results: list[Result]) -> None:
    modes = {r.mode for r in results}
    if "backlog" in modes:
        print("backlog: pods/s and p50/p99 from the scheduler's start (every pod created before)")
    if "stream" in modes:
        print("stream: pods/s from the first create, p50/p99 create-to-bound")
    print(HEADER)
    for r in results:
        print(format_row(r))
    print()
    print_trails(results)
    print_bind_clock(results)
    print_costs(results)
    by_key = {(r.nodes, r.workload, r.scheduler): r for r in results}
    for (nodes, workload, scheduler), r in by_key.items():
        if scheduler != "tephra":
            continue
        ratios = []
        for other, label in (
            ("tephra-json", "Tephra/Tephra (JSON)"),
            ("kube", "Tephra/kube-scheduler"),
            ("volcano", "Tephra/Volcano"),
            ("plain", "Tephra/plain-binder (the ceiling)"),
            ("plain-protobuf", "Tephra/plain-binder (protobuf)"),
        ):
            them = by_key.get((nodes, workload, other))
            if them is not None and them.pods_per_s:
                ratios.append(f"{label} pods/s = {r.pods_per_s / them.pods_per_s:.2f}")
        if ratios:
            print(f"{nodes:>6} nodes, {workload:<6}: {', '.join(ratios)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    p.add_argument("--pods", type=int, default=20000, help="single pods (0: skip)")
    p.add_argument("--gangs", type=int, default=500, help="gangs (0: skip)")
    p.add_argument("--gang-size", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="20 nodes, 100 pods, 10 gangs of 10")
    p.add_argument(
        "--schedulers",
        nargs="+",
        choices=[*SCHEDULERS, "kube-scheduler"],
        default=["tephra", "kube"],
        help="volcano needs scripts/build-oracle.sh volcano (default: tephra kube)",
    )
    p.add_argument(
        "--mode",
        choices=("backlog", "stream"),
        default="backlog",
        help="backlog: create every pod, then start the scheduler; stream: create while it runs",
    )
    p.add_argument("--concurrency", type=int, default=64, help="driver's requests in flight")
    p.add_argument(
        "--bind-concurrency",
        type=int,
        default=BIND_CONCURRENCY,
        help="Tephra's binds in flight (default: Tephra's own)",
    )
    p.add_argument("--schedule-period", default="0.2s", help="Tephra's session period")
    p.add_argument("--kube-qps", type=int, default=5000, help="kube-scheduler's client QPS")
    p.add_argument(
        "--emulator-connections", type=int, default=128, help="the emulator's pod writes"
    )
    p.add_argument(
        "--emulator-node-connections",
        type=int,
        default=128,
        help="the emulator's Lease renewals and Node statuses, a pool of their own",
    )
    p.add_argument("--heartbeat-seconds", type=float, default=15.0)
    p.add_argument("--timeout", type=float, default=900.0, help="per run, after the creates")
    p.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="seconds after the last bind before CPU and requests are read again (not timed)",
    )
    p.add_argument(
        "--trail-timeout",
        type=float,
        default=120.0,
        help="seconds after the last bind to wait for every Scheduled event and PodGroup status",
    )
    p.add_argument("--bin-dir", type=Path, default=None, help="default: scripts/build-kube.sh")
    p.add_argument(
        "--volcano-bin-dir",
        type=Path,
        default=None,
        help="the built Volcano (default: $TEPHRA_VOLCANO_BIN, else the newest built)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--serve-emulator", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.schedulers = list(dict.fromkeys(_short(s) for s in args.schedulers))
    if args.quick:
        args.nodes, args.pods, args.gangs, args.gang_size = [20], 100, 10, 10
        args.timeout = min(args.timeout, 60.0)
        args.trail_timeout = min(args.trail_timeout, 20.0)
    return args


def _short(name: str) -> str:
    """A `--schedulers` name as the results name it ("kube-scheduler" is "kube")."""
    return {v: k for k, v in NAMES.items()}.get(name, name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_emulator:
        serve_emulator(args)
        return 0
    args.bin_dir = args.bin_dir or kube_bin()
    if "volcano" in args.schedulers:
        try:
            args.volcano_bin_dir = find_volcano(args.volcano_bin_dir)
        except ComponentError as exc:
            raise SystemExit(str(exc)) from exc
    workloads = [
        w
        for w in (Workload("gangs", args.gangs, args.gang_size), Workload("pods", args.pods, 1))
        if w.groups
    ]
    log(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs")
    results: list[Result] = []
    for nodes in args.nodes:
        results.extend(run_size(nodes, workloads, args, results))
    sys.stderr.flush()
    print_report(results)
    return 0 if all(r.bound == r.pods for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
