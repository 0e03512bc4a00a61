"""`tephra job`: vcctl's job commands (run, list, view, suspend, resume, delete) plus `why`.

Flags and columns follow vcctl (`volcano-semantics.md#commands`). `suspend`/`resume` create bus
Commands
(AbortJob/ResumeJob) that the job controller executes once; `why` explains a pending job from
its PodGroup's conditions and events and its position in the queue.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from batch.api.yamlio import FileInputError, load_yaml_file
from batch.cli.kube import (
    COMMAND,
    QUEUE,
    VCJOB,
    Kube,
    fail,
    kube_options,
    namespace_option,
    table,
)
from batch.cli.output import event_age, event_source, output_option, print_list
from batch.kube.resource import RESOURCES, Resource
from batch.kube.why import cluster_capacity, explain

__all__ = ["Kube", "fail", "job", "kube_options", "namespace_option", "parse_resources", "table"]


def parse_resources(text: str, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise click.BadParameter(f"{part!r} is not name=quantity", param_hint=flag)
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _status(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("status") or {}


def _phase(job: Mapping[str, Any]) -> str:
    return str((_status(job).get("state") or {}).get("phase") or "")


def _replicas(job: Mapping[str, Any]) -> int:
    return sum(int(t.get("replicas") or 0) for t in (job.get("spec") or {}).get("tasks") or [])


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")[:10]


@click.group("job")
def job() -> None:
    """Run and manage Volcano jobs (vcctl job)."""


@job.command("run")
@kube_options
@click.option("-N", "--name", default="", help="Job name.")
@namespace_option
@click.option("-i", "--image", default="busybox", show_default=True)
@click.option("-m", "--min", "min_available", type=int, default=1, show_default=True)
@click.option("-r", "--replicas", type=int, default=1, show_default=True)
@click.option("-R", "--requests", default="cpu=1000m,memory=100Mi", show_default=True)
@click.option("-L", "--limits", default="cpu=1000m,memory=100Mi", show_default=True)
@click.option("-S", "--scheduler", default="volcano", show_default=True)
@click.option("-f", "--filename", type=click.Path(dir_okay=False, path_type=Path), default=None)
def job_run(
    kubeconfig: Path | None,
    name: str,
    namespace: str | None,
    image: str,
    min_available: int,
    replicas: int,
    requests: str,
    limits: str,
    scheduler: str,
    filename: Path | None,
) -> None:
    """Create a job from flags or from a YAML file (-f)."""
    if filename is not None:
        try:
            docs = load_yaml_file(filename)
        except FileInputError as exc:
            fail(str(exc))
        jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Job"]
        if not jobs:
            fail(f"{filename} holds no batch.volcano.sh Job")
    else:
        if not name:
            raise click.UsageError("either --name or --filename is required")
        if min_available > replicas:
            fail(f"job {name}: spec.minAvailable: {min_available} > replicas {replicas}")
        container = {
            "name": name,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "resources": {
                "requests": parse_resources(requests, "--requests"),
                "limits": parse_resources(limits, "--limits"),
            },
        }
        jobs = [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "minAvailable": min_available,
                    "schedulerName": scheduler,
                    "tasks": [
                        {
                            "name": "default",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"name": name},
                                "spec": {"containers": [container], "restartPolicy": "OnFailure"},
                            },
                        }
                    ],
                },
            }
        ]
    kube = Kube(kubeconfig)
    for body in jobs:
        meta = body.setdefault("metadata", {})
        ns = str(meta.get("namespace") or namespace or kube.namespace)
        meta["namespace"] = ns
        _precheck(kube, body)

        def _create(b: dict[str, Any] = body, n: str = ns) -> Any:
            return kube.rest.create(VCJOB, b, n)

        created = kube.call(f"create job {ns}/{meta.get('name')}", _create)
        click.echo(f"run job {created['metadata']['name']} successfully")


def _precheck(kube: Kube, body: dict[str, Any]) -> None:
    """Admission rules offline first, so errors come back as one line per field (but for the
    size limits: only the cluster knows the ones it was configured with)."""
    try:
        from batch.api.admission import UNBOUNDED, StaticLookup, admit
    except ImportError:  # pragma: no cover - batch.api always ships admission
        return
    queues = kube.items(QUEUE, missing_ok=True)
    lookup = StaticLookup(queues.get("items") or [])
    result = admit(
        kind="Job", operation="CREATE", obj=body, old=None, lookup=lookup, limits=UNBOUNDED
    )
    if not result.allowed:
        for line in result.messages():
            click.echo(f"error: {line}", err=True)
        sys.exit(1)


_JOB_HEADERS = [
    "Name",
    "Creation",
    "Phase",
    "JobType",
    "Replicas",
    "Min",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Unknown",
    "RetryCount",
]


def _job_row(j: Mapping[str, Any], *, wide: bool) -> list[Any]:
    spec, st, meta = j.get("spec") or {}, _status(j), j["metadata"]
    row = [
        meta["name"],
        _created(j),
        _phase(j),
        (meta.get("labels") or {}).get("volcano.sh/job-type", "Batch"),
        _replicas(j),
        st.get("minAvailable", spec.get("minAvailable", 0)),
        st.get("pending", 0),
        st.get("running", 0),
        st.get("succeeded", 0),
        st.get("failed", 0),
        st.get("unknown", 0),
        st.get("retryCount", 0),
    ]
    if wide:
        row += [spec.get("queue") or "default", spec.get("schedulerName") or "volcano"]
    return row


@job.command("list")
@kube_options
@namespace_option
@click.option("--all-namespaces", is_flag=True, help="List jobs in every namespace.")
@click.option("-q", "--queue", default="", help="Only jobs of this queue.")
@click.option("-S", "--scheduler", default="", help="Only jobs of this scheduler.")
@click.option("--selector", default="", help="Only jobs whose name contains this text.")
@output_option()
def job_list(
    kubeconfig: Path | None,
    namespace: str | None,
    all_namespaces: bool,
    queue: str,
    scheduler: str,
    selector: str,
    output: str,
) -> None:
    """List jobs with vcctl's columns (-o wide adds Queue and Scheduler)."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    items = kube.items(VCJOB, None if all_namespaces else namespace)["items"]
    kept = []
    for j in sorted(items, key=lambda x: (x["metadata"].get("namespace"), x["metadata"]["name"])):
        spec = j.get("spec") or {}
        if queue and spec.get("queue") != queue:
            continue
        if scheduler and spec.get("schedulerName") != scheduler:
            continue
        if selector and selector not in j["metadata"]["name"]:
            continue
        kept.append(j)
    if output in ("json", "yaml"):
        print_list(kept, output)
        return
    wide = output == "wide"
    rows = [_job_row(j, wide=wide) for j in kept]
    headers = [*_JOB_HEADERS, *(["Queue", "Scheduler"] if wide else [])]
    if all_namespaces:
        headers.insert(0, "Namespace")
        for row, j in zip(rows, kept, strict=True):
            row.insert(0, j["metadata"].get("namespace"))
    if not rows:
        click.echo("No resources found")
        return
    click.echo(table(headers, rows))


@job.command("view")
@kube_options
@click.option("-N", "--name", required=True)
@namespace_option
def job_view(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Describe a job: spec, status and events."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    j = kube.job(name, namespace)
    meta = j["metadata"]
    out = {
        "Name": meta["name"],
        "Namespace": meta.get("namespace"),
        "Labels": meta.get("labels") or {},
        "Annotations": meta.get("annotations") or {},
        "API Version": j.get("apiVersion"),
        "Kind": j.get("kind"),
        "Metadata": {"Creation Timestamp": meta.get("creationTimestamp"), "UID": meta.get("uid")},
        "Spec": j.get("spec") or {},
        "Status": j.get("status") or {},
    }
    click.echo(yaml.safe_dump(out, sort_keys=False, default_flow_style=False).rstrip())
    click.echo("Events:")
    click.echo(_events_table(kube, j))


def _event_row(event: Mapping[str, Any]) -> list[str]:
    message = " ".join(str(event.get("message") or "").split())
    kind = str(event.get("type") or "Normal")
    return [kind, str(event.get("reason") or ""), event_age(event), event_source(event), message]


def _events_table(kube: Kube, obj: Mapping[str, Any]) -> str:
    """The object's events as `kubectl describe` lists them: Type Reason Age From Message,
    oldest first (a repeated event's Age: `30s (x3 over 10m)`)."""
    meta = obj["metadata"]
    fields = f"involvedObject.name={meta['name']},involvedObject.kind={obj.get('kind')}"
    if meta.get("uid"):
        fields += f",involvedObject.uid={meta['uid']}"
    found = kube.items(
        RESOURCES["Event"], meta.get("namespace"), missing_ok=True, fieldSelector=fields
    )
    events = list(found.get("items") or [])
    if not events:
        return "  <none>"
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    rows = [["----", "------", "----", "----", "-------"], *map(_event_row, events)]
    text = table(["Type", "Reason", "Age", "From", "Message"], rows)
    return "\n".join(f"  {line}" for line in text.splitlines())


def _command(kube: Kube, job_obj: Mapping[str, Any], action: str) -> str:
    meta = job_obj["metadata"]
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    body = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"{meta['name']}-{action.lower()}-",
            "namespace": meta["namespace"],
            "ownerReferences": [ref],
        },
        "action": action,
        "target": ref,
    }
    created = kube.call(
        f"create {action} command", lambda: kube.rest.create(COMMAND, body, meta["namespace"])
    )
    return str(created["metadata"]["name"])


@job.command("suspend")
@kube_options
@click.option("-N", "--name", required=True)
@namespace_option
def job_suspend(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Abort a job (resumable): creates an AbortJob Command."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    _command(kube, kube.job(name, namespace), "AbortJob")
    click.echo(f"suspend job {name} successfully")


@job.command("resume")
@kube_options
@click.option("-N", "--name", required=True)
@namespace_option
def job_resume(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Resume an aborted job: creates a ResumeJob Command."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    _command(kube, kube.job(name, namespace), "ResumeJob")
    click.echo(f"resume job {name} successfully")


@job.command("delete")
@kube_options
@click.option("-N", "--name", required=True)
@namespace_option
def job_delete(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Delete a job (its pods and PodGroup go with it)."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    kube.job(name, namespace)
    kube.call(
        f"delete job {namespace}/{name}",
        lambda: kube.rest.delete(VCJOB, name, namespace),
    )
    click.echo(f"delete job {name} successfully")


class _ApiLookup:
    """What `explain` needs, read from the API server (`batch.kube.why.WhyLookup`)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.get(RESOURCES["PodGroup"], name, namespace)

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.kube.get(QUEUE, name)

    def events(self, namespace: str, involved: str) -> list[dict[str, Any]]:
        selector = f"involvedObject.name={involved}"
        found = self._all(RESOURCES["Event"], namespace, fieldSelector=selector)
        return [{"reason": ev.get("reason"), "message": ev.get("message")} for ev in found]

    def podgroups(self) -> list[dict[str, Any]]:
        return self._all(RESOURCES["PodGroup"])

    def priorities(self) -> dict[str, int]:
        found = self._all(RESOURCES["PriorityClass"])
        return {str(p["metadata"]["name"]): int(p.get("value") or 0) for p in found}

    def queues(self) -> list[dict[str, Any]]:
        return self._all(QUEUE)

    def capacity(self) -> dict[str, int]:
        nodes = self._all(RESOURCES["Node"])
        return cluster_capacity((n.get("status") or {}).get("allocatable") or {} for n in nodes)

    def _all(self, res: Resource, ns: str | None = None, **params: str) -> list[dict[str, Any]]:
        return list(self.kube.items(res, ns, missing_ok=True, **params).get("items") or [])


@job.command("why")
@kube_options
@click.argument("name")
@namespace_option
def job_why(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Explain why a job is (or was) pending: PodGroup conditions, events, queue position."""
    kube = Kube(kubeconfig)
    for line in explain(kube.job(name, namespace or kube.namespace), _ApiLookup(kube)):
        click.echo(line)
