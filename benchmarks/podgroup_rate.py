"""How fast the controllers give bare pods their PodGroups (`podgroup-<pod uid>`).

Issue 19.5 measured about 11 PodGroups per second for bare pods. This starts `tephra sandbox up`
(API server, emulator, controllers and scheduler) as its own process, creates `--pods` bare
pods with `schedulerName: volcano` as fast as one client can, and prints how long the pods took
to create and how long until every one had its PodGroup (and was annotated with it).
`--controller-process` measures the controllers alone instead: the pods are created on a
sandbox without components, then `tephra controller` starts in its own process, and the rate
is that of its PodGroups from the first to the last.

    .venv/bin/python benchmarks/podgroup_rate.py --pods 1000 [--controller-process]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config

TEPHRA = str(Path(sys.executable).with_name("tephra"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from oversized_job import start  # noqa: E402


def bare_pod(i: int) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bare-{i}"},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [container]},
    }


def count_groups(co: Any) -> int:
    """PodGroups in `default`, from a one-item page (cheap enough to poll)."""
    page = co.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", "default", "podgroups", limit=1
    )
    return len(page["items"]) + int(page["metadata"].get("remainingItemCount") or 0)


def grouped(co: Any, core: Any) -> tuple[int, int]:
    groups = co.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
    )["items"]
    pods = core.list_namespaced_pod("default").items
    annotated = sum(
        1
        for p in pods
        if (p.metadata.annotations or {})
        .get("scheduling.k8s.io/group-name", "")
        .startswith("podgroup-")
    )
    return len(groups), annotated


def peak_rate(samples: list[tuple[float, int]]) -> float:
    """The most PodGroups made in any one-second window of the samples, per second."""
    best = 0.0
    for i, (t0, n0) in enumerate(samples):
        for t1, n1 in samples[i + 1 :]:
            if t1 - t0 >= 1.0:
                best = max(best, (n1 - n0) / (t1 - t0))
                break
    return best


def controller_alone(pods: int, clients: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        args = ["sandbox", "up", "--kubeconfig", str(kubeconfig), "--no-components"]
        sandbox = subprocess.Popen([TEPHRA, *args], stderr=subprocess.DEVNULL)
        controller = None
        try:
            while not kubeconfig.exists():
                time.sleep(0.1)
            api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
            co: Any = client.CustomObjectsApi(api)
            core: Any = client.CoreV1Api(api)
            with ThreadPoolExecutor(clients) as pool:
                list(
                    pool.map(
                        lambda i: core.create_namespaced_pod("default", bare_pod(i)), range(pods)
                    )
                )
            cmd = [TEPHRA, "controller", "--kubeconfig", str(kubeconfig), "--metrics-port", "0"]
            controller = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
            first: tuple[float, int] | None = None
            while (n := count_groups(co)) < pods:
                if n and first is None:
                    first = (time.monotonic(), n)
                time.sleep(0.05)
            t0, n0 = first or (time.monotonic(), 0)
            took = time.monotonic() - t0
            print(
                f"tephra controller alone: {pods - n0} of {pods} PodGroups in {took:.2f} s after "
                f"its first: {(pods - n0) / took:.0f} PodGroups/s"
            )
        finally:
            for proc in (controller, sandbox):
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8, help="threads creating pods")
    parser.add_argument("--controller-process", action="store_true")
    opts = parser.parse_args()
    if opts.controller_process:
        controller_alone(opts.pods, opts.clients)
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc, kubeconfig = start(Path(tmp), opts.pods)
        try:
            api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
            co: Any = client.CustomObjectsApi(api)
            core: Any = client.CoreV1Api(api)
            time.sleep(2)
            began = time.monotonic()
            pool = ThreadPoolExecutor(opts.clients)
            futures = [
                pool.submit(core.create_namespaced_pod, "default", bare_pod(i))
                for i in range(opts.pods)
            ]
            created_at: list[float] = []
            futures[-1].add_done_callback(lambda _f: created_at.append(time.monotonic() - began))
            samples: list[tuple[float, int]] = []
            groups = annotated = 0
            while time.monotonic() - began < 600:
                groups = count_groups(co)
                samples.append((time.monotonic() - began, groups))
                if groups >= opts.pods:
                    groups, annotated = grouped(co, core)
                    if annotated >= opts.pods:
                        break
                time.sleep(0.1)
            for f in futures:
                f.result()
            pool.shutdown()
            took = time.monotonic() - began
            print(
                f"{opts.pods} bare pods created by {opts.clients} clients in "
                f"{created_at[0] if created_at else took:.1f} s: {groups} PodGroups and "
                f"{annotated} annotated pods after {took:.1f} s: {groups / took:.0f} PodGroups/s "
                f"overall, {peak_rate(samples):.0f}/s over the busiest second"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
