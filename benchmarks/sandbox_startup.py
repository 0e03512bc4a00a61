"""How long `run_sandbox()` takes to serve, in this process (docs/sandbox.md: well under 1 s).

Starts and stops an empty sandbox `--repeat` times and prints each start-up: from the call to
the block running (kubeconfig written, the server answering). The first start in a process also
loads the CRDs, so it is printed apart. Nothing is asserted; tests/sandbox/test_smoke.py checks
that the sandbox starts and serves, with no time bound.

    .venv/bin/python benchmarks/sandbox_startup.py [--repeat 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from batch.sandbox.testing import run_sandbox


def start_once() -> float:
    began = time.perf_counter()
    with run_sandbox():
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    first = start_once()
    again = [start_once() for _ in range(max(args.repeat - 1, 0))]
    figures = {
        "load_avg_1m_start": load_start,
        "first_s": first,
        "again_s": again,
        "again_median_s": statistics.median(again) if again else None,
        "load_avg_1m_end": os.getloadavg()[0],
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
