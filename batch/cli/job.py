"""`tephra job`: vcctl's job commands (run, list, view, suspend, resume, delete) plus `why`.

Flags and columns follow vcctl (`volcano-semantics.md#commands`). `suspend`/`resume` create bus
Commands
(AbortJob/ResumeJob) that the job controller executes once; `why` explains a pending job from
its PodGroup's conditions and events and its position in the queue.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from batch.api.constants import ABORT_JOB, RESUME_JOB
from batch.api.yamlio import FileInputError, load_yaml_file
from batch.cli.kube import (
    COMMAND,
    QUEUE,
    VCJOB,
    Kube,
    all_namespaces_option,
    fail,
    kube_options,
    name_argument,
    namespace_option,
    table,
)
from batch.cli.output import (
    Columns,
    by_namespace_name,
    dump,
    event_age,
    event_source,
    output_option,
    print_listing,
    print_names,
    print_watched,
    watch_options,
)
from batch.controllers import constants as c
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
@name_argument(VCJOB, required=False)
@namespace_option
@click.option("-q", "--queue", default=None, help="Queue to submit to (spec.queue).")
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
    queue: str | None,
    filename: Path | None,
    **flags: Any,
) -> None:
    """Create job NAME from flags, or the jobs of a YAML file (-f)."""
    jobs = _jobs_from_file(filename) if filename is not None else [_job_from_flags(name, **flags)]
    kube = Kube(kubeconfig)
    for body in jobs:
        meta = body.setdefault("metadata", {})
        ns = str(meta.get("namespace") or namespace or kube.namespace)
        meta["namespace"] = ns
        _set_queue(body, queue)
        _precheck(kube, body)

        def _create(b: dict[str, Any] = body, n: str = ns) -> Any:
            return kube.rest.create(VCJOB, b, n)

        created = kube.call(f"create job {ns}/{meta.get('name')}", _create)
        click.echo(f"run job {created['metadata']['name']} successfully")


def _jobs_from_file(filename: Path) -> list[dict[str, Any]]:
    try:
        docs = load_yaml_file(filename)
    except FileInputError as exc:
        fail(str(exc))
    jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Job"]
    if not jobs:
        fail(f"{filename} holds no batch.volcano.sh Job")
    return jobs


def _set_queue(body: dict[str, Any], queue: str | None) -> None:
    """`--queue` fills in a job's queue; it may not contradict the one its file names."""
    if not queue:
        return
    spec = body.setdefault("spec", {})
    if spec.get("queue") and spec["queue"] != queue:
        name = (body.get("metadata") or {}).get("name")
        fail(f"job {name}: its file names queue {spec['queue']}, --queue says {queue}")
    spec["queue"] = queue


def _job_from_flags(
    name: str | None,
    *,
    image: str,
    min_available: int,
    replicas: int,
    requests: str,
    limits: str,
    scheduler: str,
) -> dict[str, Any]:
    if not name:
        raise click.UsageError("give the job's NAME (or -f FILE)")
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
    task = {
        "name": "default",
        "replicas": replicas,
        "template": {
            "metadata": {"name": name},
            "spec": {"containers": [container], "restartPolicy": "OnFailure"},
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "schedulerName": scheduler, "tasks": [task]},
    }


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


#: `kubectl get -o name`'s spelling of a VCJob
JOB_RESOURCE = "job.batch.volcano.sh"


def _job_filter(queue: str, scheduler: str, selector: str) -> Callable[[Mapping[str, Any]], bool]:
    def keep(j: Mapping[str, Any]) -> bool:
        spec = j.get("spec") or {}
        return not (
            (queue and spec.get("queue") != queue)
            or (scheduler and spec.get("schedulerName") != scheduler)
            or (selector and selector not in j["metadata"]["name"])
        )

    return keep


def _job_line(j: Mapping[str, Any], *, wide: bool, all_namespaces: bool) -> list[Any]:
    row = _job_row(j, wide=wide)
    return [j["metadata"].get("namespace"), *row] if all_namespaces else row


@job.command("list")
@kube_options
@namespace_option
@all_namespaces_option
@click.option("-q", "--queue", default="", help="Only jobs of this queue.")
@click.option("-S", "--scheduler", default="", help="Only jobs of this scheduler.")
@click.option("--selector", default="", help="Only jobs whose name contains this text.")
@output_option()
@watch_options
def job_list(
    kubeconfig: Path | None,
    namespace: str | None,
    all_namespaces: bool,
    queue: str,
    scheduler: str,
    selector: str,
    output: str,
    watch: bool,
    request_timeout: int | None,
) -> None:
    """List jobs with vcctl's columns (-o wide adds Queue and Scheduler)."""
    kube = Kube(kubeconfig)
    ns = None if all_namespaces else (namespace or kube.namespace)
    listing = kube.items(VCJOB, ns)
    keep = _job_filter(queue, scheduler, selector)
    kept = [j for j in sorted(listing["items"], key=by_namespace_name) if keep(j)]
    wide = output == "wide"
    headers = [*_JOB_HEADERS, *(["Queue", "Scheduler"] if wide else [])]
    headers = ["Namespace", *headers] if all_namespaces else headers
    rows = [_job_line(j, wide=wide, all_namespaces=all_namespaces) for j in kept]
    columns = print_listing(kept, output, JOB_RESOURCE, Columns(headers, rows))
    if not watch:
        return
    version = str((listing.get("metadata") or {}).get("resourceVersion") or "0")
    for _kind, obj in kube.watch(VCJOB, ns, version, request_timeout):
        if keep(obj):
            line = columns.line(_job_line(obj, wide=wide, all_namespaces=all_namespaces))
            print_watched(obj, output, JOB_RESOURCE, line, columns)


@job.command("view")
@kube_options
@name_argument(VCJOB)
@namespace_option
@output_option()
def job_view(kubeconfig: Path | None, name: str, namespace: str | None, output: str) -> None:
    """Describe job NAME: spec, status and events (-o json|yaml|name: the Job itself)."""
    kube = Kube(kubeconfig)
    j = kube.job(name, namespace or kube.namespace)
    if output in ("json", "yaml"):
        click.echo(dump(j, output))
        return
    if output == "name":
        print_names([j], JOB_RESOURCE)
        return
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


#: the phases in which the job controller acts on each command (`batch.controllers.job`)
_ACTS_IN = {
    ABORT_JOB: ("", c.PENDING, c.RUNNING),
    RESUME_JOB: (c.ABORTING, c.ABORTED),
}
_FINISHING = (*c.FINISHED_PHASES, c.COMPLETING, c.TERMINATING)


def _refusal(name: str, phase: str, action: str) -> str | None:
    """Why the controller would do nothing with `action` on a job in `phase` (None: it acts)."""
    if phase in _ACTS_IN[action]:
        return None
    verb = "suspend" if action == ABORT_JOB else "resume"
    if phase in _FINISHING:
        return f"job {name} is {phase}: cannot {verb} a finished job"
    if action == ABORT_JOB and phase in (c.ABORTING, c.ABORTED):
        return f"job {name} is {phase}: it is already suspended"
    if action == RESUME_JOB and phase in (c.PENDING, c.RUNNING, ""):
        return f"job {name} is {phase or 'new'}: it is not suspended, there is nothing to resume"
    return f"job {name} is {phase}: cannot {verb} it now (try again once it is Running)"


def _act(kubeconfig: Path | None, name: str, namespace: str | None, action: str) -> None:
    kube = Kube(kubeconfig)
    found = kube.job(name, namespace or kube.namespace)
    refused = _refusal(name, _phase(found), action)
    if refused is not None:
        fail(refused)
    _command(kube, found, action)


@job.command("suspend")
@kube_options
@name_argument(VCJOB)
@namespace_option
def job_suspend(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Abort job NAME (resumable): creates an AbortJob Command."""
    _act(kubeconfig, name, namespace, ABORT_JOB)
    click.echo(f"suspend job {name} successfully")


@job.command("resume")
@kube_options
@name_argument(VCJOB)
@namespace_option
def job_resume(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Resume suspended job NAME: creates a ResumeJob Command."""
    _act(kubeconfig, name, namespace, RESUME_JOB)
    click.echo(f"resume job {name} successfully")


@job.command("delete")
@kube_options
@name_argument(VCJOB)
@namespace_option
def job_delete(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Delete job NAME (its pods and PodGroup go with it)."""
    kube = Kube(kubeconfig)
    namespace = namespace or kube.namespace
    kube.job(name, namespace)
    kube.call(f"delete job {namespace}/{name}", lambda: kube.rest.delete(VCJOB, name, namespace))
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
@name_argument(VCJOB)
@namespace_option
def job_why(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Explain why a job is (or was) pending: PodGroup conditions, events, queue position."""
    kube = Kube(kubeconfig)
    for line in explain(kube.job(name, namespace or kube.namespace), _ApiLookup(kube)):
        click.echo(line)
