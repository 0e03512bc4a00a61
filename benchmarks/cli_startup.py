"""CPU each everyday `tephra` command costs, start-up included (docs/cli.md: ≤ 0.3 s).

Runs every command below `--repeat` times as its own process (`python -m batch.cli.main ...`)
against a sandbox, the `report` ones against an empty SQLite ledger (their cost is start-up and
SQLAlchemy's Core, not the data), and prints, per command, the median user+system CPU seconds
of that process (`getrusage(RUSAGE_CHILDREN)`, what `/usr/bin/time -f %U+%S` prints) and the
wall time. With `--kubeconfig` it uses that cluster; otherwise it starts a sandbox in this
process (its CPU is not counted: only the children's is). Nothing is asserted;
tests/cli/test_startup.py checks the import graph of these commands instead, which does not
depend on the machine's load.

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

#: commands that read the job ledger, run with `--db` on a small SQLite ledger made for the run
LEDGER_COMMANDS: list[list[str]] = [
    ["report", "--help"],
    ["report", "wait-times"],
    ["report", "usage"],
    ["report", "fairness"],
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


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit status) of one `tephra` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "batch.cli.main", *argv],
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


def measure(argv: list[str], env: dict[str, str], repeat: int) -> dict[str, float]:
    """Median CPU and wall seconds of `repeat` runs (after one to warm the byte-code cache)."""
    run_once(argv, env)
    runs = [run_once(argv, env) for _ in range(repeat)]
    cpu = statistics.median(r[0] for r in runs)
    wall = statistics.median(r[1] for r in runs)
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "exit": max(r[2] for r in runs)}


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
        kube = ["--kubeconfig", str(kc)]
        run_once(["job", "run", "-f", str(job_file), *kube], env)  # may already exist: fine
        ledger = ["--db", f"sqlite:///{Path(cache) / 'ledger.db'}"]
        run_once(["db", "upgrade", *ledger], env)
        runs = [(argv, kube) for argv in COMMANDS]
        runs += [(argv, [] if "--help" in argv else ledger) for argv in LEDGER_COMMANDS]
        for argv, extra in runs:
            name = "tephra " + " ".join(argv)
            figures[name] = measure([*argv, *extra], env, args.repeat)
            cpu, wall, status = figures[name].values()
            print(f"{name:<40} cpu {cpu:6.3f} s   wall {wall:6.3f} s   exit {status:.0f}")
    print(f"load average (1 min): {load_start:.2f} -> {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
