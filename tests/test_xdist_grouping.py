"""`--dist loadgroup` must keep an `xdist_group` on one worker.

The suite relies on it: the `real` group shares one control plane per worker, the sandbox groups
share module-scoped servers. pytest 9.2 with xdist 3.8 silently stopped grouping (xdist writes a
node-id field pytest no longer reads), and nothing failed: every worker just started its own
control plane. This test runs a small grouped suite the way `make test` runs the real one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("i", range(6))
def test_member(i):
    pass
"""


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(GROUPED, encoding="utf-8")
    args = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", "-p", "no:randomly"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers = re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED", run.stdout)
    assert len(workers) == 12, run.stdout
    assert len(set(workers)) == 1, f"the group was split over {sorted(set(workers))}"
