"""vcctl's commands Tephra lacked, and kubectl's output flag on every listing command (issue 15,
item 9): `pod list`, `version`, `job view` events with Age and From, `-o json|yaml|wide` on
`job list`, `queue list|get`, `report` and `whatif`, and `completion bash|zsh|fish`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kubernetes import client

from batch.cli.main import main
from batch.sandbox.testing import SandboxHandle, run_sandbox

B = ("batch.volcano.sh", "v1alpha1")
Q = ("scheduling.volcano.sh", "v1beta1")


def _pod(name: str, job: str | None, queue: str, *, node: str = "") -> dict[str, Any]:
    labels = {"volcano.sh/job-name": job, "volcano.sh/queue-name": queue} if job else {}
    annotations = {} if job else {"scheduling.volcano.sh/queue-name": queue}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
    }


def _job(name: str) -> dict[str, Any]:
    task = {
        "name": "worker",
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
    }
    return {
        "apiVersion": f"{B[0]}/{B[1]}",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 1, "queue": "default", "tasks": [task]},
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[SandboxHandle]:
    with run_sandbox() as sb:
        api = sb.api_client()
        core: Any = client.CoreV1Api(api)  # dict bodies, as the API takes them
        co: Any = client.CustomObjectsApi(api)
        core.create_namespaced_pod("default", _pod("train-worker-0", "train", "default"))
        core.create_namespaced_pod("default", _pod("train-worker-1", "train", "default"))
        core.create_namespaced_pod("default", _pod("other-worker-0", "other", "research"))
        core.create_namespaced_pod("default", _pod("spark-driver", None, "research"))
        core.create_namespaced_pod("default", _pod("plain", None, "x"))
        job = co.create_namespaced_custom_object(*B, "default", "jobs", _job("train"))
        now = dt.datetime.now(dt.UTC)
        for reason, count, ago in (("CommandIssued", 1, 90), ("ExecuteAction", 3, 600)):
            first = (now - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
            last = (now - dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
            core.create_namespaced_event(
                "default",
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"generateName": "train."},
                    "involvedObject": {
                        "apiVersion": f"{B[0]}/{B[1]}",
                        "kind": "Job",
                        "namespace": "default",
                        "name": "train",
                        "uid": job["metadata"]["uid"],
                    },
                    "reason": reason,
                    "message": f"{reason} happened",
                    "type": "Normal",
                    "source": {"component": "vc-controller-manager"},
                    "count": count,
                    "firstTimestamp": first,
                    "lastTimestamp": last if count > 1 else first,
                },
            )
        yield sb


def tephra(cluster: SandboxHandle, *args: str) -> Result:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(cluster.kubeconfig_path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result


def _names(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:] if line.strip()]


def test_pod_list_shows_the_pods_of_vcjobs_with_vcctls_columns(cluster: SandboxHandle) -> None:
    result = tephra(cluster, "pod", "list")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split()
    assert header == ["Name", "Ready", "Status", "Restart", "Age"]
    assert _names(result.stdout) == ["other-worker-0", "train-worker-0", "train-worker-1"]
    assert _names(tephra(cluster, "pod", "list", "-j", "train").stdout) == [
        "train-worker-0",
        "train-worker-1",
    ]
    # a queue's pods: those of its vcjobs and any other pod annotated with the queue
    research = tephra(cluster, "pod", "list", "-q", "research").stdout
    assert _names(research) == ["other-worker-0", "spark-driver"]
    mismatch = tephra(cluster, "pod", "list", "-j", "train", "-q", "research")
    assert mismatch.exit_code == 1 and "does not match the queue research" in mismatch.stderr
    assert tephra(cluster, "pod", "list", "-n", "empty").stdout.strip() == "No resources found"


def test_pod_list_output_formats(cluster: SandboxHandle) -> None:
    wide = tephra(cluster, "pod", "list", "-j", "train", "-o", "wide").stdout
    assert wide.splitlines()[0].split()[-2:] == ["IP", "Node"]
    listed = json.loads(tephra(cluster, "pod", "list", "-j", "train", "-o", "json").stdout)
    assert listed["kind"] == "List" and len(listed["items"]) == 2
    assert listed["items"][0]["kind"] == "Pod"
    as_yaml = yaml.safe_load(tephra(cluster, "pod", "list", "-o", "yaml").stdout)
    assert as_yaml["kind"] == "List" and len(as_yaml["items"]) == 3
    namespaced = tephra(cluster, "pod", "list", "--all-namespaces").stdout
    assert namespaced.splitlines()[0].split()[0] == "Namespace"


def test_job_and_queue_listings_take_the_output_flag(cluster: SandboxHandle) -> None:
    jobs = json.loads(tephra(cluster, "job", "list", "-o", "json").stdout)
    assert [j["metadata"]["name"] for j in jobs["items"]] == ["train"]
    assert yaml.safe_load(tephra(cluster, "job", "list", "-o", "yaml").stdout)["kind"] == "List"
    wide = tephra(cluster, "job", "list", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[-2:] == ["Queue", "Scheduler"]
    queues = json.loads(tephra(cluster, "queue", "list", "-o", "json").stdout)
    assert {q["metadata"]["name"] for q in queues["items"]} >= {"root", "default"}
    one = yaml.safe_load(tephra(cluster, "queue", "get", "-n", "default", "-o", "yaml").stdout)
    assert one["kind"] == "Queue" and one["metadata"]["name"] == "default"
    wide_q = tephra(cluster, "queue", "list", "-o", "wide").stdout.splitlines()[0].split()
    assert wide_q[-3:] == ["Reclaimable", "Allocated", "Capability"]
    bad = tephra(cluster, "queue", "list", "-o", "xml")
    assert bad.exit_code == 2 and "xml" in bad.stderr


def test_job_view_events_have_age_and_from(cluster: SandboxHandle) -> None:
    out = tephra(cluster, "job", "view", "-N", "train").stdout
    lines = out.split("Events:\n", 1)[1].splitlines()
    assert lines[0].split() == ["Type", "Reason", "Age", "From", "Message"]
    rows = {line.split()[1]: line for line in lines[2:]}
    assert rows["CommandIssued"].split()[2] in ("90s", "91s", "92s")
    assert (
        "30s (x3 over 10m)" in rows["ExecuteAction"] or "31s (x3 over 10m)" in rows["ExecuteAction"]
    )
    assert "vc-controller-manager" in rows["ExecuteAction"]
    assert rows["ExecuteAction"].endswith("ExecuteAction happened")


def test_version_prints_client_and_server(cluster: SandboxHandle) -> None:
    import batch

    result = tephra(cluster, "version")
    assert result.exit_code == 0, result.output
    assert f"Client Version: {batch.__version__}" in result.stdout
    assert "Server Version: v" in result.stdout
    both = json.loads(tephra(cluster, "version", "-o", "json").stdout)
    assert both["clientVersion"]["version"] == batch.__version__
    assert both["serverVersion"]["gitVersion"].startswith("v")
    alone = CliRunner().invoke(main, ["version", "--client"])
    assert alone.exit_code == 0 and "Server Version" not in alone.stdout


def test_version_with_an_unreachable_server(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        'clusters: [{name: k, cluster: {server: "http://127.0.0.1:9"}}]\n'
        "users: [{name: u, user: {}}]\n"
    )
    result = CliRunner().invoke(main, ["version", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 1
    assert "Client Version:" in result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and "127.0.0.1:9" in result.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_TEPHRA_COMPLETE" in result.stdout and f"{shell}_complete" in result.stdout


def test_completion_completes_subcommands_and_options() -> None:
    env = {"_TEPHRA_COMPLETE": "bash_complete", "COMP_WORDS": "tephra jo", "COMP_CWORD": "1"}
    result = CliRunner().invoke(main, [], env=env, prog_name="tephra")
    assert "plain,job" in result.stdout.splitlines()
    env = {**env, "COMP_WORDS": "tephra job list --out", "COMP_CWORD": "3"}
    result = CliRunner().invoke(main, [], env=env, prog_name="tephra")
    assert "plain,--output" in result.stdout.splitlines()


def test_the_contexts_namespace_is_the_default_of_n(cluster: SandboxHandle, tmp_path: Path) -> None:
    """As kubectl: `-n` defaults to the kubeconfig context's namespace, then `default`."""
    doc = yaml.safe_load(cluster.kubeconfig_path.read_text())
    for ctx in doc["contexts"]:
        ctx["context"]["namespace"] = "empty"
    in_empty = tmp_path / "kc"
    in_empty.write_text(yaml.safe_dump(doc))

    def run(*args: str) -> Result:
        return CliRunner().invoke(main, [*args, "--kubeconfig", str(in_empty)])

    assert run("job", "list").stdout.strip() == "No resources found"
    assert run("pod", "list").stdout.strip() == "No resources found"
    assert _names(run("job", "list", "-n", "default").stdout) == ["train"]
    missing = run("job", "view", "-N", "train")
    assert missing.exit_code == 1 and "job empty/train not found" in missing.stderr
