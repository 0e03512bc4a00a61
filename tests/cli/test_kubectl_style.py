"""kubectl's habits on `tephra job|queue|pod` (issue 31, item 2), vcctl's flags kept as aliases.

Positional names everywhere (`job view NAME`, `queue get NAME`), `-A`, `--queue` on `job run`,
`-o yaml|json|wide|name` on every get/list/view, `--watch` on listings, plain refusals for
commands the controller would ignore (resuming a finished job posts nothing), `-n` a namespace
everywhere (vcctl's `queue ... -n NAME` still works, with a deprecation warning), and shell
completion of names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from batch.cli.main import main
from batch.kube.config import load_access
from batch.kube.resource import RESOURCES, Resource
from batch.kube.rest import RestClient
from batch.sandbox.testing import SandboxHandle, run_sandbox

JOBS = Resource("batch.volcano.sh/v1alpha1", "jobs", "Job")
COMMANDS = Resource("bus.volcano.sh/v1alpha1", "commands", "Command")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SandboxHandle]:
    with run_sandbox() as sb:
        client = RestClient(load_access(sb.kubeconfig_path))
        for namespace in ("team-a", "watched"):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            client.create(RESOURCES["Namespace"], body)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "elsewhere-w-0", "labels": {"volcano.sh/job-name": "elsewhere"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        client.create(RESOURCES["Pod"], pod, "team-a")
        yield sb


@pytest.fixture(scope="module")
def rest(cluster: SandboxHandle) -> RestClient:
    return RestClient(load_access(cluster.kubeconfig_path))


def tephra(cluster: SandboxHandle, *args: str) -> Result:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(cluster.kubeconfig_path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result


def ok(cluster: SandboxHandle, *args: str) -> str:
    result = tephra(cluster, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _job(rest: RestClient, name: str, namespace: str = "default") -> dict[str, Any]:
    return rest.get(JOBS, name, namespace)


def test_job_names_are_positional_and_vcctls_flag_still_works(
    cluster: SandboxHandle, rest: RestClient
) -> None:
    ok(cluster, "job", "run", "pos", "-r", "1", "-R", "cpu=100m", "-L", "cpu=100m")
    positional = ok(cluster, "job", "view", "pos")
    assert positional.startswith("Name: pos\n")
    assert ok(cluster, "job", "view", "-N", "pos") == positional
    both = tephra(cluster, "job", "view", "pos", "-N", "other")
    assert both.exit_code == 2 and "two job names" in both.stderr
    neither = tephra(cluster, "job", "view")
    assert neither.exit_code == 2 and "NAME" in neither.stderr
    assert "suspend job pos successfully" in ok(cluster, "job", "suspend", "pos")
    posted = rest.list(COMMANDS, namespace="default")["items"]
    assert [c["action"] for c in posted if c["target"]["name"] == "pos"] == ["AbortJob"]
    assert "delete job pos successfully" in ok(cluster, "job", "delete", "pos")


def test_job_run_takes_a_queue(cluster: SandboxHandle, rest: RestClient, tmp_path: Path) -> None:
    """The README creates queue `research` and now submits to it."""
    assert "create queue research" in ok(cluster, "queue", "create", "research", "-w", "3")
    ok(cluster, "job", "run", "big", "--queue", "research", "-R", "cpu=1", "-L", "cpu=1")
    assert _job(rest, "big")["spec"]["queue"] == "research"
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "fromfile"},
        "spec": {"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {}}}]},
    }
    doc["spec"]["tasks"][0]["template"]["spec"]["containers"] = [{"name": "c", "image": "x"}]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    ok(cluster, "job", "run", "-f", str(tmp_path / "job.yaml"), "-q", "research")
    assert _job(rest, "fromfile")["spec"]["queue"] == "research"
    doc["metadata"]["name"], doc["spec"]["queue"] = "clash", "default"
    (tmp_path / "clash.yaml").write_text(yaml.safe_dump(doc))
    clash = tephra(cluster, "job", "run", "-f", str(tmp_path / "clash.yaml"), "-q", "research")
    assert clash.exit_code == 1 and "--queue says research" in clash.stderr
    listed = ok(cluster, "job", "list", "-q", "research", "-o", "name").split()
    assert listed == ["job.batch.volcano.sh/big", "job.batch.volcano.sh/fromfile"]


def test_every_get_list_and_view_takes_every_output(cluster: SandboxHandle) -> None:
    ok(cluster, "job", "run", "shown", "-R", "cpu=100m", "-L", "cpu=100m")
    as_yaml = yaml.safe_load(ok(cluster, "job", "view", "shown", "-o", "yaml"))
    assert as_yaml["kind"] == "Job" and as_yaml["metadata"]["name"] == "shown"
    assert json.loads(ok(cluster, "job", "view", "shown", "-o", "json"))["kind"] == "Job"
    assert ok(cluster, "job", "view", "shown", "-o", "name") == "job.batch.volcano.sh/shown\n"
    assert "job.batch.volcano.sh/shown" in ok(cluster, "job", "list", "-o", "name").split()
    queues = ok(cluster, "queue", "list", "-o", "name").split()
    assert "queue.scheduling.volcano.sh/default" in queues
    got = ok(cluster, "queue", "get", "default", "-o", "name")
    assert got == "queue.scheduling.volcano.sh/default\n"
    assert (
        ok(cluster, "queue", "get", "default", "-o", "wide").splitlines()[0].endswith("Capability")
    )
    assert ok(cluster, "pod", "list", "-A", "-o", "name") == "pod/elsewhere-w-0\n"


def test_all_namespaces_is_dash_a(cluster: SandboxHandle) -> None:
    ok(cluster, "job", "run", "elsewhere", "-n", "team-a", "-R", "cpu=100m", "-L", "cpu=100m")
    assert "elsewhere" not in ok(cluster, "job", "list")
    every = ok(cluster, "job", "list", "-A").splitlines()
    assert every[0].split()[:2] == ["Namespace", "Name"]
    assert any(line.split()[:2] == ["team-a", "elsewhere"] for line in every)
    assert ok(cluster, "job", "list", "--all-namespaces") == ok(cluster, "job", "list", "-A")
    pods = ok(cluster, "pod", "list", "-A").splitlines()
    assert pods[0].split()[:2] == ["Namespace", "Name"]
    assert pods[1].split()[:2] == ["team-a", "elsewhere-w-0"]


def test_queue_takes_n_as_a_namespace_and_vcctls_n_name_with_a_warning(
    cluster: SandboxHandle, rest: RestClient
) -> None:
    positional = ok(cluster, "queue", "get", "default")
    assert positional.splitlines()[1].split()[0] == "default"
    vcctl = tephra(cluster, "queue", "get", "-n", "default")
    assert vcctl.exit_code == 0 and vcctl.stdout == positional
    assert "deprecated" in vcctl.stderr and "queue get default" in vcctl.stderr
    # with the name given, -n is a namespace (queues have none): ignored, as kubectl does
    quiet = tephra(cluster, "queue", "get", "default", "-n", "team-a")
    assert quiet.exit_code == 0 and quiet.stdout == positional and quiet.stderr == ""
    assert ok(cluster, "queue", "get", "--name", "default") == positional
    ok(cluster, "queue", "create", "scratch")
    assert "update queue scratch" in ok(
        cluster, "queue", "operate", "scratch", "-a", "update", "-w", "2"
    )
    closed = {"status": {"state": "Closed"}}  # what the controller does on `-a close`
    path = RESOURCES["Queue"].path(name="scratch", sub="status")
    rest.request("PATCH", path, body=closed, content_type="application/merge-patch+json")
    assert "delete queue scratch" in ok(cluster, "queue", "delete", "scratch")


def _set_phase(rest: RestClient, name: str, phase: str) -> None:
    status = {"status": {"state": {"phase": phase}}}
    rest.request(
        "PATCH",
        JOBS.path(namespace="default", name=name, sub="status"),
        body=status,
        content_type="application/merge-patch+json",
    )


@pytest.mark.parametrize(
    ("phase", "command", "says"),
    [
        ("Completed", "resume", "cannot resume a finished job"),
        ("Failed", "suspend", "cannot suspend a finished job"),
        ("Running", "resume", "not suspended"),
        ("Aborted", "suspend", "already suspended"),
    ],
)
def test_impossible_commands_are_refused_and_post_nothing(
    cluster: SandboxHandle, rest: RestClient, phase: str, command: str, says: str
) -> None:
    name = f"done-{phase.lower()}-{command}"
    ok(cluster, "job", "run", name, "-R", "cpu=100m", "-L", "cpu=100m")
    _set_phase(rest, name, phase)
    before = len(rest.list(COMMANDS, namespace="default")["items"])
    refused = tephra(cluster, "job", command, name)
    assert refused.exit_code == 1
    assert says in refused.stderr and f"job {name} is {phase}" in refused.stderr
    assert "successfully" not in refused.stdout
    assert len(rest.list(COMMANDS, namespace="default")["items"]) == before


def test_resume_of_a_suspended_job_is_posted(cluster: SandboxHandle, rest: RestClient) -> None:
    ok(cluster, "job", "run", "paused", "-R", "cpu=100m", "-L", "cpu=100m")
    _set_phase(rest, "paused", "Aborted")
    assert "resume job paused successfully" in ok(cluster, "job", "resume", "paused")
    targets = [c["target"]["name"] for c in rest.list(COMMANDS, namespace="default")["items"]]
    assert "paused" in targets


def test_watch_prints_each_change_after_the_listing(cluster: SandboxHandle) -> None:
    """`job list -w`: the table, then a row for a job created while it watches."""
    cmd = [sys.executable, "-m", "batch.cli.main", "job", "list", "-n", "watched", "-w"]
    cmd += ["--request-timeout", "60", "--kubeconfig", str(cluster.kubeconfig_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "No resources found"
            ok(cluster, "job", "run", "late", "-n", "watched", "-R", "cpu=1m", "-L", "cpu=1m")
            assert proc.stdout.readline().split()[:2] == ["Name", "Creation"]  # header, once
            assert proc.stdout.readline().split()[0] == "late"
        finally:
            proc.terminate()


def test_watch_ends_after_the_request_timeout(cluster: SandboxHandle) -> None:
    result = tephra(cluster, "queue", "list", "-w", "--request-timeout", "1", "-o", "name")
    assert result.exit_code == 0
    assert "queue.scheduling.volcano.sh/default" in result.stdout.split()


def _complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    line = {"_TEPHRA_COMPLETE": "bash_complete", "COMP_WORDS": words}
    line["COMP_CWORD"] = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    result = CliRunner().invoke(main, [], env={**line, **(env or {})}, prog_name="tephra")
    return [row.split(",", 1)[1] for row in result.stdout.splitlines()]


def test_completion_offers_the_new_flags_and_the_clusters_names(cluster: SandboxHandle) -> None:
    ok(cluster, "job", "run", "completed-by-tab", "-R", "cpu=1m", "-L", "cpu=1m")
    assert "-A" in _complete("tephra job list -")
    assert "--watch" in _complete("tephra queue list --")
    assert "name" in _complete("tephra job view x -o ")
    env = {"KUBECONFIG": str(cluster.kubeconfig_path)}
    assert _complete("tephra job view comp", env) == ["completed-by-tab"]
    assert "default" in _complete("tephra queue get ", env)
    assert RESOURCES["Queue"].plural == "queues"


def test_a_cluster_without_the_crds_is_named_in_one_line() -> None:
    with run_sandbox(install_crds=False) as sb:
        result = tephra(sb, "queue", "list")
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "does not serve scheduling.volcano.sh/v1beta1 queues" in result.stderr
