"""`tephra validate` and `tephra crds` end to end through click."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from batch.cli.crds import crds
from batch.cli.main import main
from batch.cli.validate import validate

from .conftest import make_job, make_queue


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(validate, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_every_valid_corpus_file_is_accepted(corpus: Path) -> None:
    files = sorted(str(p) for p in corpus.rglob("*.yaml") if "invalid_jobs" not in p.parts)
    code, _out, err = run("-q", *files)
    assert code == 0, err
    assert " invalid" in err and "0 invalid" in err
    assert "skipped: apps/v1 Deployment deploy-with-volcano" in err


def test_every_invalid_corpus_file_is_rejected_naming_the_field(corpus: Path) -> None:
    expected = {
        "duplicatedPolicyEvent-webhook-deny.yaml": "spec.policies[1].event: unique",
        "duplicatedTaskName-webhook-deny.yaml": "spec.tasks[1].name: unique",
        "minAvailable-webhook-deny.yaml": "spec.minAvailable: minAvailableLessEqualReplicas",
    }
    files = sorted((corpus / "volcano" / "example" / "invalid_jobs").glob("*.yaml"))
    assert {f.name for f in files} == set(expected)
    for f in files:
        code, _out, err = run(str(f))
        assert code == 1
        line = f"{f}:1 Job default/test-job-webhook-disallow: {expected[f.name]} ("
        assert line in err, err


def test_defaulted_objects_are_printed(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all([make_job(), make_queue("q")]))
    code, out, _err = run(str(path))
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs[0]["spec"]["queue"] == "default" and docs[0]["spec"]["maxRetry"] == 3
    assert docs[1]["spec"] == {"weight": 1, "reclaimable": True}
    assert f"# {path}:1" in out and f"# {path}:2" in out


def test_errors_have_file_doc_object_path_rule(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    bad = make_job(minAvailable=7)
    path.write_text(
        yaml.safe_dump_all(
            [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}, bad]
        )
    )
    code, out, err = run(str(path))
    assert code == 1
    assert f"{path}:1 skipped: apps/v1 Deployment web (not served by Tephra)" in err
    assert f"{path}:2 Job ml/train: spec.minAvailable: minAvailableLessEqualReplicas (" in err
    assert "0 valid, 1 invalid, 1 skipped" in err
    assert out == ""


def test_unreadable_file(tmp_path: Path) -> None:
    code, _out, err = run(str(tmp_path / "missing.yaml"))
    assert code == 1
    assert "missing.yaml: cannot read file: No such file or directory" in err
    assert "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _out, err = run(str(empty))
    assert code == 1 and "cannot read file" in err


def test_directories_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "job.yml").write_text(yaml.safe_dump(make_job()))
    (tmp_path / "queue.json").write_text(
        '{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",'
        ' "metadata": {"name": "q"}}'
    )
    (tmp_path / "notes.txt").write_text("not yaml: [")
    code, _out, err = run("-q", str(tmp_path))
    assert code == 0, err
    assert "2 valid, 0 invalid, 0 skipped" in err
    result = CliRunner().invoke(validate, ["-"], input=yaml.safe_dump(make_job(minAvailable=5)))
    assert result.exit_code == 1
    assert "-:1 Job ml/train: spec.minAvailable: minAvailableLessEqualReplicas (" in result.stderr


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(make_job()) + "---\nkind: [unclosed\n")
    code, out, err = run(str(path))
    assert code == 1
    assert f"{path}:2 invalid YAML:" in err and "line" in err
    assert "# " in out  # the first, valid document is still handled
    assert "Traceback" not in err


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "blob.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    code, _out, err = run(str(path))
    assert code == 1 and "cannot read file" in err


def test_wrong_types(tmp_path: Path) -> None:
    path = tmp_path / "types.yaml"
    job = make_job()
    job["spec"]["tasks"] = {"not": "a list"}
    queue = make_queue("q", weight="heavy")
    path.write_text(yaml.safe_dump_all([job, queue, "just a string", [1, 2]]))
    code, _out, err = run(str(path))
    assert code == 1
    assert f"{path}:1 Job ml/train: spec.tasks: type (" in err
    assert f"{path}:2 Queue q: spec.weight: type (" in err
    assert f"{path}:3 skipped: a str, not a Kubernetes object" in err
    assert f"{path}:4 skipped: a list, not a Kubernetes object" in err
    assert "Traceback" not in err


def test_timestamps_stay_strings(tmp_path: Path) -> None:
    path = tmp_path / "ts.yaml"
    path.write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
        "metadata:\n  name: q\n  creationTimestamp: 2024-01-01T00:00:00Z\n"
    )
    code, out, err = run(str(path))
    assert code == 0, err
    assert "creationTimestamp: '2024-01-01T00:00:00Z'" in out


def test_queues_file(tmp_path: Path) -> None:
    queues = tmp_path / "queues.yaml"
    closed = make_queue("closed")
    closed["status"] = {"state": "Closed"}
    parent = make_queue("eng")
    child = make_queue("eng-a", parent="eng")
    queues.write_text(yaml.safe_dump_all([closed, parent, child]))
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        yaml.safe_dump_all(
            [
                make_job(queue="eng-a"),
                make_job(queue="ghost"),
                make_job(queue="closed"),
                make_job(queue="eng"),
            ]
        )
    )
    code, _out, err = run("--queues", str(queues), "-q", str(jobs))
    assert code == 1
    assert f"{jobs}:2 Job ml/train: spec.queue: queueExists (" in err
    assert f"{jobs}:3 Job ml/train: spec.queue: queueOpen (" in err
    assert f"{jobs}:4 Job ml/train: spec.queue: queueLeaf (" in err
    assert f"{jobs}:1 " not in err
    # without --queues every queue is assumed to exist
    code, _out, err = run("-q", str(jobs))
    assert code == 0, err
    code, _out, err = run("--queues", str(tmp_path / "nope.yaml"), str(jobs))
    assert code == 1 and "--queues:" in err and "cannot read file" in err


def test_queues_defined_alongside_jobs_count(tmp_path: Path) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump(make_queue("other")))
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump_all([make_queue("team"), make_job(queue="team")]))
    code, _out, err = run("--queues", str(queues), "-q", str(both))
    assert code == 0, err


def test_registered_in_main() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert "validate" in result.output and "crds" in result.output


def test_crds_command(tmp_path: Path) -> None:
    runner = CliRunner()
    out_dir = tmp_path / "out"
    result = runner.invoke(crds, ["--out", str(out_dir)])
    assert result.exit_code == 0, result.output
    assert (out_dir / "batch.volcano.sh_jobs.yaml").is_file()
    assert len(list(out_dir.iterdir())) == 6
    assert runner.invoke(crds, ["--out", str(out_dir), "--check"]).exit_code == 0
    (out_dir / "bus.volcano.sh_commands.yaml").write_text("stale")
    result = runner.invoke(crds, ["--out", str(out_dir), "--check"])
    assert result.exit_code == 1 and "bus.volcano.sh_commands.yaml" in result.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(crds, ["--out", str(blocker / "sub")])
    assert result.exit_code == 1 and "cannot write CRDs" in result.stderr


def test_unknown_fields_are_errors_naming_the_path(tmp_path: Path) -> None:
    """As `kubectl apply --validate=strict`: a typo is an error, not a silently pruned field."""
    path = tmp_path / "typo.yaml"
    job = make_job(minAvaliable=1)
    job["spec"]["tasks"][0]["replicaz"] = 2
    job["spec"]["tasks"][0]["template"]["spec"]["madeUp"] = True  # a pod template keeps it
    path.write_text(yaml.safe_dump_all([job, make_queue("q", wieght=2)]))
    code, out, err = run(str(path))
    assert code == 1
    assert f"{path}:1 Job ml/train: spec.minAvaliable: unknownField (" in err
    assert f"{path}:1 Job ml/train: spec.tasks[0].replicaz: unknownField (" in err
    assert f"{path}:2 Queue q: spec.wieght: unknownField (" in err
    assert "madeUp" not in err
    assert "0 valid, 2 invalid, 0 skipped" in err
    assert out == ""


def test_unknown_fields_with_other_errors_are_all_reported(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump(make_job(minAvailable=7, minAvaliable=1)))
    code, _out, err = run(str(path))
    assert code == 1
    assert "spec.minAvaliable: unknownField (" in err
    assert "spec.minAvailable: minAvailableLessEqualReplicas (" in err


def test_unknown_metadata_fields_are_errors(tmp_path: Path) -> None:
    """kubectl --validate=strict checks metadata against ObjectMeta too: `lables` is a typo."""
    path = tmp_path / "meta.yaml"
    job = make_job()
    job["metadata"]["lables"] = {"team": "ml"}
    job["metadata"]["selfLink"] = "/apis/x"  # a real (deprecated) ObjectMeta field
    path.write_text(yaml.safe_dump(job))
    code, _out, err = run("-q", str(path))
    assert code == 1
    assert f"{path}:1 Job ml/train: metadata.lables: unknownField (" in err
    assert "selfLink" not in err
