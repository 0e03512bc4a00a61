"""Outputs: summary.json keys per policy, per-job CSV, self-contained HTML with SVG plots, CLI."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from batch.cli.main import main
from batch.sim.report import format_table, write_outputs

from .conftest import cluster, job, run, workload

KEYS = {
    "jobs",
    "jct_mean_s",
    "jct_p50_s",
    "jct_p99_s",
    "queue_delay_mean_s",
    "queue_delay_p99_s",
    "utilization",
    "wasted_gpu_hours",
    "preemptions",
    "jain_index",
    "wall_s",
}


def test_outputs(tmp_path: Path) -> None:
    w = workload(
        [job("x", submit=0, run=1000, pods=12), job("j", submit=10, run=100, pods=16)],
        cluster(2),
    )
    runs = {name: run(w, name) for name in ("tephra", "kube-default", "fifo")}
    paths = write_outputs(tmp_path, w, runs)
    summary = json.loads(paths["summary"].read_text())
    assert list(summary) == ["tephra", "kube-default", "fifo"]
    for s in summary.values():
        assert set(s) >= KEYS
        assert s["jobs"] == 2
    assert summary["kube-default"]["wasted_gpu_hours"] > 0 == summary["tephra"]["wasted_gpu_hours"]
    rows = list(csv.DictReader((tmp_path / "jobs-kube-default.csv").open()))
    assert [r["name"] for r in rows] == ["x", "j"] and float(rows[1]["wasted_gpu_s"]) == 3960
    html = paths["report"].read_text()
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) >= 2 + 3  # delay CDF, utilization, one share plot per policy
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    # nothing loaded from the network: no scripts, stylesheets or images by URL
    assert "<script" not in html and "<link" not in html
    assert not re.findall(r"(?:src|href)=\"https?://", html)
    table = format_table({k: v.summary for k, v in runs.items()})
    assert "kube-default" in table and "waste GPU-h" in table


def test_cli_sim(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "sim",
            "--trace",
            "philly",
            "--limit",
            "20",
            "--compare",
            "kube-default",
            "--capacity-scale",
            "0.01",
            "--quiet",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "tephra" in result.output and "kube-default" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"tephra", "kube-default"}
    assert summary["tephra"]["capacity_scale"] == 0.01
    assert (out / "report.html").exists() and (out / "jobs-tephra.csv").exists()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["sim", "--trace", str(tmp_path / "nope.csv"), "--out", str(tmp_path)]
    )
    assert r.exit_code != 0 and "no such file" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(
        main, ["sim", "--trace", "philly", "--compare", "slurm", "--out", str(tmp_path)]
    )
    assert r.exit_code != 0 and "unknown baseline" in r.output
