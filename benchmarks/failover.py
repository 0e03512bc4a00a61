"""How long a standby scheduler takes to bind after the leader is killed (goal: under 15 s).

Each run starts a sandbox and two `tephra scheduler --leader-elect` processes, lets the leader
bind a gang, kills it (SIGKILL) and times until a gang submitted then is bound by the standby:
the scenario of tests/kube/test_reliability.py (`failover_seconds`), which checks that the
standby takes over, with no time bound. The Lease lasts 10 s, renewed every 2 s, so most of a
failover is waiting for the dead leader's Lease to expire. Prints the figures; asserts nothing.

    .venv/bin/python benchmarks/failover.py [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batch.sandbox.nodes import make_nodes  # noqa: E402
from batch.sandbox.testing import run_sandbox  # noqa: E402
from tests.kube.test_reliability import failover_seconds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    runs = []
    for _ in range(args.repeat):
        with run_sandbox(nodes=make_nodes(count=2, gpus=8)) as sb:
            runs.append(failover_seconds(sb))
        print(f"failover {runs[-1]:.1f} s", file=sys.stderr)
    figures = {
        "load_avg_1m_start": load_start,
        "failover_s": runs,
        "max_s": max(runs),
        "load_avg_1m_end": os.getloadavg()[0],
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
