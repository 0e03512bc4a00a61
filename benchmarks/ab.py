"""Compare a benchmark of two source trees in balanced pairs (not a timed test).

Why this exists: on the shared 2-core machine, the same code's CPU drifts by up to 8 % from one
run to the next, and which of two runs started together starts first moves their figures by
about 5 % (docs/sim.md, "Session open on the whole trace"). One run of each, or pairs that
always start the same tree first, then show gains that are not there. This runs the benchmark
from both trees at once, round after round, alternating which starts first, reads one figure
from each run's output and prints every pair and the means.

    .venv/bin/python benchmarks/ab.py /tmp/before /work/main -- benchmarks/sim.py --limit 30000
    .venv/bin/python benchmarks/ab.py A B --rounds 4 --metric 'cpu_p50_s.*?([0-9.]+)' -- \\
        benchmarks/cycle.py --nodes 1000 --pods 10000 --gang 1

Each run has its tree on ``PYTHONPATH``, works in it, and sees ``TEPHRA_TRACES_DIR`` (default:
the traces this checkout finds, ``traces_root``) so that a ``git archive`` copy finds them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from batch.sim.errors import SimInputError
from batch.sim.traces.common import traces_root

#: ``benchmarks/sim.py``'s CPU figure (the default metric)
REPLAY_CPU = r"replay CPU:\s+([0-9.]+)"


def order(rounds: int) -> list[tuple[int, int]]:
    """Which tree starts first in each round: A then B, B then A, and so on."""
    return [(0, 1) if r % 2 == 0 else (1, 0) for r in range(rounds)]


def figure(output: str, metric: str) -> float:
    """The first group of ``metric``'s first match in a run's output."""
    found = re.search(metric, output)
    if found is None:
        raise ValueError(f"no match for {metric!r} in the run's output:\n{output[-2000:]}")
    return float(found.group(1))


def _start(tree: Path, command: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    with contextlib.suppress(SimInputError):  # a benchmark without traces needs none
        env.setdefault("TEPHRA_TRACES_DIR", str(traces_root()))
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def pair(trees: tuple[Path, Path], first: int, command: list[str], metric: str) -> list[float]:
    """Both trees' figures ([A, B]) from one round, ``first`` started first."""
    runs = {i: _start(trees[i], command) for i in (first, 1 - first)}
    out = [0.0, 0.0]
    for i, proc in runs.items():
        text, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{trees[i]}: exit {proc.returncode}\n{text[-2000:]}")
        out[i] = figure(text, metric)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="the first tree (e.g. a `git archive` of the base)")
    ap.add_argument("b", type=Path, help="the second tree")
    ap.add_argument("--rounds", type=int, default=2, help="pairs to run (even: each order alike)")
    ap.add_argument("--metric", default=REPLAY_CPU, help="regex; its first group is the figure")
    ap.add_argument("command", nargs="+", help="the script and its arguments, after --")
    args = ap.parse_args(argv)
    trees = (args.a.resolve(), args.b.resolve())
    got: list[list[float]] = []
    for r, (first, _) in enumerate(order(args.rounds), 1):
        a, b = pair(trees, first, args.command, args.metric)
        got.append([a, b])
        started = "A" if first == 0 else "B"
        print(f"round {r} ({started} first): A {a:.2f}  B {b:.2f}  B/A {b / a:.3f}", flush=True)
    mean_a = statistics.fmean(p[0] for p in got)
    mean_b = statistics.fmean(p[1] for p in got)
    print(f"mean: A {mean_a:.2f}  B {mean_b:.2f}  B/A {mean_b / mean_a:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
