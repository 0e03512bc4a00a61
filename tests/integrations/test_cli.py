"""`tephra gang FILE...`: the derived PodGroups, skipped documents, one-line errors."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from batch.cli.main import main
from tests.integrations.conftest import frameworks_dir


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["gang", *args])
    return result.exit_code, result.stdout, result.stderr


def test_prints_the_podgroups_and_skips_other_documents() -> None:
    code, out, err = run(
        str(frameworks_dir() / "mpi" / "pi.yaml"),
        str(frameworks_dir() / "ray" / "ray-cluster.volcano-scheduler-queue.yaml"),
        str(frameworks_dir() / "ray" / "ray-service.sample.yaml"),
        str(frameworks_dir() / "spark" / "spark-pi-yunikorn.yaml"),
    )
    assert code == 0, err
    groups = [d for d in yaml.safe_load_all(out) if d]
    assert [(g["metadata"]["name"], g["spec"]["minMember"]) for g in groups] == [
        ("pi", 3),
        ("ray-test-cluster-0-pg", 3),
    ]
    assert groups[1]["spec"]["queue"] == "kuberay-test-queue"
    assert "# MPIJob default/pi: adapter mpi" in out
    assert (
        "ray-cluster.volcano-scheduler-queue.yaml:1: skipped scheduling.volcano.sh/v1beta1 Queue"
        in err
    )
    assert (
        "ray-service.sample.yaml:1: skipped ray.io/v1 RayService (its gangs are those of the" in err
    )
    assert "spark-pi-yunikorn.yaml:1: sparkoperator.k8s.io/v1beta2 SparkApplication: no gang" in err


def test_leader_flag_shows_the_full_gang() -> None:
    spark = str(frameworks_dir() / "spark" / "spark-pi-volcano.yaml")
    code, first, _ = run(spark)
    assert code == 0
    body = yaml.safe_load("\n".join(x for x in first.splitlines() if not x.startswith("#")))
    assert body["spec"]["minMember"] == 1
    assert "# the operator creates PodGroup spark-spark-pi-volcano-pg: Tephra adopts it" in first
    code, running, _ = run("--leader-running", spark)
    assert code == 0
    body = yaml.safe_load("\n".join(x for x in running.splitlines() if not x.startswith("#")))
    assert body["spec"]["minMember"] == 3
    assert body["spec"]["minTaskMember"] == {"spark-driver": 1, "spark-executor": 2}


def test_user_error_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\n"
        "spec:\n  pytorchReplicaSpecs:\n    Worker: {replicas: -1}\n"
    )
    code, out, err = run(str(bad))
    assert code == 1
    assert out == ""
    assert err.strip() == (
        f"{bad}:1: PyTorchJob default/j: spec.pytorchReplicaSpecs.Worker.replicas: must be an "
        "integer >= 0, got -1"
    )


def test_a_directory_stands_for_its_manifests_as_for_validate(tmp_path: Path) -> None:
    """`tephra gang DIR` printed an IsADirectoryError traceback (issue 15, item 5)."""
    (tmp_path / "mpi").mkdir()
    (tmp_path / "mpi" / "pi.yaml").write_text((frameworks_dir() / "mpi" / "pi.yaml").read_text())
    (tmp_path / "notes.txt").write_text("not a manifest")
    code, out, err = run(str(tmp_path))
    assert code == 0, err
    assert "# MPIJob default/pi: adapter mpi" in out
