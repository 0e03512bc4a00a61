"""Count the CPU instructions of one scheduling session (not a timed test).

Why this exists: on the shared 2-core machine, wall and CPU times of the same code drift by up
to 8 % between runs, so a change worth 2 % cannot be seen in them. Instructions executed do not
depend on the machine's load: valgrind's cachegrind counts them (about 1 % apart between runs
of the same code, from the interpreter's hashing and allocation). This runs the cycle benchmark's
cluster (`benchmarks/cycle.py`'s `build`) under cachegrind twice, once with one session and once
with ``1 + N`` sessions, and prints the difference divided by N: the instructions of a session,
without the start-up and the cluster's build.

    .venv/bin/python benchmarks/instructions.py                       # 200 nodes, 2,000 pods
    .venv/bin/python benchmarks/instructions.py --nodes 500 --pods 5000 --gang 8 --sessions 5
    .venv/bin/python benchmarks/instructions.py --preset helm   # the cycle benchmark's default
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/instructions.py   # another tree's code

Each count takes about a minute per session at the default size (valgrind is ~50x slower).

The actions with a time budget (preempt, reclaim, gangreclaim: ``timeBudgetSeconds``) run without
one here: under valgrind their 0.4 s run out after a load-dependent share of the work, and the
counts of one tree then differed by up to 25 % between runs (706-890M per session at the default
size, against 1,423-1,431M without budgets). ``--time-budget`` keeps the configured budgets.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: cachegrind's summary line of instructions executed ("I refs:")
I_REFS = re.compile(r"I\s+refs:\s+([0-9,]+)")


#: an action's time budget in the configuration's text (0: unlimited)
TIME_BUDGET = re.compile(r"timeBudgetSeconds: [0-9.]+")


def run_sessions(
    nodes: int, pods: int, gang: int, sessions: int, *, budget: bool, preset: str = "tephra"
) -> None:
    """The measured program: build the cluster, then run ``sessions`` sessions on it under the
    built-in configuration ``preset`` (with the actions' time budgets only when ``budget``: see
    the module docstring)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cycle import build  # the cycle benchmark's cluster, one definition of it

    from batch.scheduler import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG, load_config, run_session

    cache = build(nodes, pods, gang, busy=0.5, seed=1)
    text = {"tephra": TEPHRA_DEFAULT_CONFIG, "helm": HELM_DEFAULT_CONFIG}[preset]
    if not budget:
        text = TIME_BUDGET.sub("timeBudgetSeconds: 0", text)
    cfg = load_config(text)
    for r in range(sessions):
        run_session(cache, cfg, now=1.8e9 + r)


def count(args: argparse.Namespace, sessions: int) -> int:
    """Instructions of the whole program with ``sessions`` sessions, as cachegrind counts them."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("instructions: valgrind is not installed (Debian package 'valgrind')")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no"]
        cmd += [f"--cachegrind-out-file={tmp}/out", sys.executable, __file__, "--inner"]
        cmd += [f"--nodes={args.nodes}", f"--pods={args.pods}", f"--gang={args.gang}"]
        cmd += [f"--sessions={sessions}", f"--preset={args.preset}"]
        cmd += ["--time-budget"] if args.time_budget else []
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = I_REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(
            f"instructions: the run failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return int(found.group(1).replace(",", ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--gang", type=int, default=1)
    p.add_argument("--sessions", type=int, default=10, help="sessions counted (after the first)")
    p.add_argument(
        "--time-budget",
        action="store_true",
        help="keep the actions' time budgets (counts then depend on the machine's load)",
    )
    p.add_argument(
        "--preset",
        choices=("tephra", "helm"),
        default="tephra",
        help="built-in configuration (tephra: with preempt, reclaim, gangreclaim; helm: "
        "enqueue, allocate, backfill, as the cycle benchmark's default)",
    )
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner:
        run_sessions(
            args.nodes,
            args.pods,
            args.gang,
            args.sessions,
            budget=args.time_budget,
            preset=args.preset,
        )
        return
    if args.sessions < 1:
        p.error("--sessions must be at least 1")
    print(f"counting 1 and {1 + args.sessions} sessions under cachegrind ...", file=sys.stderr)
    base = count(args, 1)
    total = count(args, 1 + args.sessions)
    per = (total - base) / args.sessions
    print(
        f"nodes={args.nodes} pods={args.pods} gang={args.gang} sessions={args.sessions} "
        f"preset={args.preset}"
    )
    print(
        f"instructions per session: {per / 1e6:.1f}M (start-up and one session: {base / 1e6:.1f}M)"
    )


if __name__ == "__main__":
    main()
