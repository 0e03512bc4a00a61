"""benchmarks/ab.py: balanced pairs of two trees' benchmark runs."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _ab() -> ModuleType:
    return load_script(REPO / "benchmarks" / "ab.py", "bench_ab")


def test_rounds_alternate_which_tree_starts_first() -> None:
    assert _ab().order(4) == [(0, 1), (1, 0), (0, 1), (1, 0)]


def test_the_figure_is_the_metrics_first_group() -> None:
    ab = _ab()
    out = "replay wall:   95.97 s\nreplay CPU:             95.94 s   (compare this)\n"
    assert ab.figure(out, ab.REPLAY_CPU) == 95.94
    with pytest.raises(ValueError, match="no match"):
        ab.figure("nothing here", ab.REPLAY_CPU)


def test_each_tree_runs_its_own_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trees = []
    for name, value in (("a", 2.0), ("b", 3.0)):
        tree = tmp_path / name
        tree.mkdir()
        (tree / "figure.py").write_text(f"VALUE = {value}\n")
        (tree / "run.py").write_text("import figure\nprint(f'replay CPU: {figure.VALUE} s')\n")
        trees.append(str(tree))
    assert _ab().main([*trees, "--rounds", "2", "--", "run.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "round 1 (A first): A 2.00  B 3.00  B/A 1.500"
    assert lines[1] == "round 2 (B first): A 2.00  B 3.00  B/A 1.500"
    assert lines[2] == "mean: A 2.00  B 3.00  B/A 1.500"
