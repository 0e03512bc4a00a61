"""Trace readers on the first rows of every trace file in shared/traces (plus full counts)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from batch.sim.errors import SimInputError
from batch.sim.traces import load_trace, traces_root
from batch.sim.traces.elasticflow import read_elasticflow
from batch.sim.traces.openb import read_openb
from batch.sim.traces.philly import read_philly, split_gpus

ROOT = traces_root()


def _head(src: Path, dst: Path, rows: int) -> list[dict[str, str]]:
    with src.open(newline="") as f:
        lines = [next(f) for _ in range(rows + 1)]
    dst.write_text("".join(lines))
    return list(csv.DictReader(lines))


def test_split_gpus() -> None:
    assert [(t.replicas, t.gpu_milli) for t in split_gpus(1)] == [(1, 1000)]
    assert [(t.replicas, t.gpu_milli) for t in split_gpus(8)] == [(1, 8000)]
    assert [(t.replicas, t.gpu_milli) for t in split_gpus(12)] == [(1, 8000), (1, 4000)]
    assert [(t.replicas, t.gpu_milli) for t in split_gpus(128)] == [(16, 8000)]
    assert split_gpus(0)[0].gpu_milli == 0


def test_philly_first_rows(tmp_path: Path) -> None:
    rows = _head(ROOT / "philly" / "philly.csv", tmp_path / "philly.csv", 50)
    shutil.copy(ROOT / "philly" / "philly_vc.csv", tmp_path / "philly_vc.csv")
    w = read_philly(tmp_path)
    assert len(w.jobs) == 50
    assert [j.submit for j in w.jobs] == sorted(j.submit for j in w.jobs)
    # The file's first row: 2017-10-09 07:01:55, 66 s, 1 GPU, VC 11cb48.
    first = rows[0]
    matches = [
        j
        for j in w.jobs
        if j.run_time == float(first["duration"]) and j.queue == f"vc-{first['cluster']}"
    ]
    assert matches and matches[0].gpu_milli == int(first["num_gpus"]) * 1000
    # Every row is one job with the row's GPUs, run time and queue.
    got = sorted((j.queue, j.run_time, j.gpu_milli) for j in w.jobs)
    want = sorted(
        (f"vc-{r['cluster']}", float(r["duration"]), int(r["num_gpus"]) * 1000) for r in rows
    )
    assert got == want
    weights = {q.name: q.weight for q in w.cluster.queues}
    assert weights["vc-6214e9"] == 64 and weights["vc-ed69ec"] == 8
    assert w.cluster.node_count == 352 and w.cluster.gpu_milli_total == 352 * 8000


def test_philly_whole_trace() -> None:
    w = load_trace("philly")
    assert len(w.jobs) == 82_247
    assert len(w.cluster.queues) == 15
    # The 289 jobs with more than 8 GPUs are the multi-pod gangs.
    assert sum(1 for j in w.jobs if j.pods > 1) == 289
    assert max(j.pods for j in w.jobs) == 16


def test_elasticflow_first_rows(tmp_path: Path) -> None:
    src = ROOT / "msft-itp-elasticflow"
    files = sorted(src.glob("cluster*.csv"))
    assert len(files) == 10
    all_rows: list[tuple[str, dict[str, str]]] = []
    for f in files:
        rows = _head(f, tmp_path / f.name, 5)
        all_rows += [(f.stem, r) for r in rows]
    w = read_elasticflow(tmp_path)
    assert len(w.jobs) == 50
    got = sorted((j.queue, j.run_time, j.gpu_milli) for j in w.jobs)
    want = sorted((q, float(r["duration"]), int(r["num_gpu"]) * 1000) for q, r in all_rows)
    assert got == want
    assert {q.name for q in w.cluster.queues} == {f.stem for f in files}
    # Each queue's capacity holds its largest job.
    biggest = max(int(r["num_gpu"]) for _q, r in all_rows)
    assert w.cluster.gpu_milli_total >= biggest * 1000


def test_openb_first_rows(tmp_path: Path) -> None:
    src = ROOT / "alibaba-openb-2023"
    rows = _head(src / "openb_pod_list_default.csv", tmp_path / "openb_pod_list_default.csv", 40)
    nodes = _head(
        src / "openb_node_list_all_node.csv", tmp_path / "openb_node_list_all_node.csv", 30
    )
    w = read_openb(tmp_path / "openb_pod_list_default.csv")
    assert len(w.jobs) == 40
    by_name = {j.name: j for j in w.jobs}
    r0 = rows[1]  # openb-pod-0001: 6000m cpu, 12288 MiB, 1 GPU at 460 milli
    j = by_name[r0["name"]]
    assert j.tasks[0].cpu_milli == int(r0["cpu_milli"])
    assert j.tasks[0].memory_bytes == int(r0["memory_mib"]) << 20
    assert j.tasks[0].gpu_milli == int(r0["gpu_milli"])
    assert j.run_time == float(r0["deletion_time"]) - float(r0["scheduled_time"])
    assert j.queue == r0["qos"].lower()
    assert w.cluster.node_count == 30
    assert w.cluster.gpu_milli_total == sum(int(n["gpu"]) for n in nodes) * 1000


def test_openb_multigpu50_has_no_times(tmp_path: Path) -> None:
    src = ROOT / "alibaba-openb-2023"
    rows = _head(
        src / "openb_pod_list_multigpu50.csv", tmp_path / "openb_pod_list_multigpu50.csv", 20
    )
    shutil.copy(src / "openb_node_list_all_node.csv", tmp_path / "openb_node_list_all_node.csv")
    w = read_openb(tmp_path / "openb_pod_list_multigpu50.csv")
    assert len(w.jobs) == 20 and all(j.submit == 0 for j in w.jobs)
    assert w.cluster.node_count == 1523 and w.cluster.gpu_milli_total == 6212 * 1000
    assert sorted(j.gpu_milli for j in w.jobs) == sorted(
        int(r["num_gpu"]) * 1000 if int(r["num_gpu"]) != 1 else int(r["gpu_milli"]) for r in rows
    )


def test_bad_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "philly.csv"
    bad.write_text("timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,abc,1,x\n")
    with pytest.raises(SimInputError, match=r"philly.csv:2: column duration='abc'"):
        read_philly(bad)
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SimInputError, match="missing column"):
        load_trace(str(tmp_path / "x.csv"), fmt="philly")
    with pytest.raises(SimInputError, match="no such file"):
        load_trace(str(tmp_path / "nope.csv"))
