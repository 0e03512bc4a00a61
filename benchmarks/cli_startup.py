"""CPU each everyday `tephra` command costs, start-up included (docs/cli.md: ≤ 0.3 s).

Runs every command below `--repeat` times as its own process (`python -m batch.cli.main ...`)
against a sandbox and prints, per command, the median user+system CPU seconds of that process
(`getrusage(RUSAGE_CHILDREN)`, what `/usr/bin/time -f %U+%S` prints) and the wall time. With
`--kubeconfig` it uses that cluster; otherwise it starts a sandbox in this process (its CPU is
not counted: only the children's is). Nothing is asserted; tests/cli/test_startup.py checks
the import graph of these commands instead, which does not depend on the machine's load.

    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py [--repeat 5] [--kubeconfig KC]

Byte-code is cached in a temporary PYTHONPYCACHEPREFIX (warmed by one run of each command), as
an installed package has it, even where PYTHONDONTWRITEBYTECODE is set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: spelled as vcctl spells them, so the same list runs on a Tephra from before issue 31
COMMANDS: list[list[str]] = [
    ["version", "--client"],
    ["version"],
    ["job", "list"],
    ["job", "list", "--all-namespaces", "-o", "wide"],
    ["job", "view", "-N", "bench"],
    ["job", "why", "bench"],
    ["queue", "list"],
    ["queue", "get", "--name", "default"],
    ["pod", "list"],
]

_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bench}
spec:
  minAvailable: 1
  tasks:
  - {name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}
"""


def run_once(argv: list[str], kubeconfig: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit status) of one `tephra` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "batch.cli.main", *argv, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        check=False,
        env=env,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc.returncode


@contextlib.contextmanager
def cluster(kubeconfig: Path | None) -> Iterator[Path]:
    if kubeconfig is not None:
        yield kubeconfig
        return
    from batch.sandbox.testing import run_sandbox

    with run_sandbox() as sb:
        yield sb.kubeconfig_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kubeconfig", type=Path, default=None)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    load_start = os.getloadavg()[0]
    with cluster(args.kubeconfig) as kc, tempfile.TemporaryDirectory() as cache:
        # byte-code cached as an installed package has it, whatever this shell's settings
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        job_file = Path(cache) / "bench-job.yaml"
        job_file.write_text(_JOB)
        run_once(["job", "run", "-f", str(job_file)], kc, env)  # may already exist: fine
        for argv in COMMANDS:
            run_once(argv, kc, env)  # warm the byte-code cache
            runs = [run_once(argv, kc, env) for _ in range(args.repeat)]
            cpu = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            status = max(r[2] for r in runs)
            name = "tephra " + " ".join(argv)
            figures[name] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "exit": status}
            print(f"{name:<40} cpu {cpu:6.3f} s   wall {wall:6.3f} s   exit {status}")
    print(f"load average (1 min): {load_start:.2f} -> {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
