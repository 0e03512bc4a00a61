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
from batch.api.errors import UserError
from batch.api.owners import VCJOB_KIND, controller_ref, workload_of
from batch.api.views import podgroup_view
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
    object_name,
    output_option,
    print_listing,
    print_names,
    print_watched,
    watch_options,
)
from batch.controllers import constants as c
from batch.kube.resource import RESOURCES, ApiError, Resource
from batch.kube.why import (
    GROUP_ANNOTATION,
    cluster_capacity,
    explain,
    explain_workload,
    free_by_node,
    pod_facts,
)

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
    "Kind",
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
        VCJOB_KIND,
    ]
    if wide:
        row += [spec.get("queue") or "default", spec.get("schedulerName") or "volcano"]
    return row


#: `kubectl get -o name`'s spelling of a VCJob, and of a PodGroup
JOB_RESOURCE = "job.batch.volcano.sh"
PODGROUP_RESOURCE = "podgroup.scheduling.volcano.sh"
PODGROUP = RESOURCES["PodGroup"]


def _job_filter(queue: str, scheduler: str, selector: str) -> Callable[[Mapping[str, Any]], bool]:
    def keep(j: Mapping[str, Any]) -> bool:
        spec = j.get("spec") or {}
        gang = _is_gang(j)
        return not (
            (queue and (spec.get("queue") or ("default" if gang else None)) != queue)
            or (scheduler and (gang or spec.get("schedulerName") != scheduler))
            or (selector and selector not in _listed_name(j)[1])
        )

    return keep


def _gang_row(pg: Mapping[str, Any], *, wide: bool) -> list[Any]:
    """An operator's gang (a PodGroup a PyTorchJob, RayCluster... owns) in a job's columns:
    what its PodGroup says (its pods' own counts are the operator's)."""
    v = podgroup_view(pg)
    kind, name = workload_of(pg)
    member = v.min_member or 0
    row = [
        name,
        v.created[:10],
        v.phase,
        "-",
        member,
        member,
        "-",
        v.running,
        v.succeeded,
        v.failed,
        "-",
        "-",
        kind,
    ]
    return [*row, v.queue_or_default, "-"] if wide else row


def _job_line(j: Mapping[str, Any], *, wide: bool, all_namespaces: bool) -> list[Any]:
    row = _gang_row(j, wide=wide) if _is_gang(j) else _job_row(j, wide=wide)
    return [j["metadata"].get("namespace"), *row] if all_namespaces else row


def _is_gang(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "PodGroup"


def _operator_gangs(kube: Kube, namespace: str | None) -> list[dict[str, Any]]:
    """The PodGroups of workloads that are not VCJobs (operators' gangs, Tephra's gangs for
    their pods): a VCJob's PodGroup is listed as the VCJob itself."""
    found = kube.items(PODGROUP, namespace, missing_ok=True).get("items") or []
    out = []
    for pg in found:
        if workload_of(pg)[0] != VCJOB_KIND:
            pg.setdefault("kind", "PodGroup")
            pg.setdefault("apiVersion", PODGROUP.api_version)
            out.append(pg)
    return out


def _listed_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) a listing sorts and filters by: an operator gang's workload name."""
    ns = str((obj.get("metadata") or {}).get("namespace") or "")
    return (ns, workload_of(obj)[1]) if _is_gang(obj) else by_namespace_name(obj)


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
    """List jobs with vcctl's columns, then Kind: VCJobs and the gangs of other workloads
    (PyTorchJob, MPIJob, RayCluster...) by their workload's name (-o wide adds Queue and
    Scheduler; -w watches VCJobs)."""
    kube = Kube(kubeconfig)
    ns = None if all_namespaces else (namespace or kube.namespace)
    listing = kube.items(VCJOB, ns)
    for j in listing["items"]:
        j.setdefault("kind", "Job")
    keep = _job_filter(queue, scheduler, selector)
    found = [*listing["items"], *_operator_gangs(kube, ns)]
    kept = [j for j in sorted(found, key=_listed_name) if keep(j)]
    wide = output == "wide"
    headers = [*_JOB_HEADERS, *(["Queue", "Scheduler"] if wide else [])]
    headers = ["Namespace", *headers] if all_namespaces else headers
    rows = [_job_line(j, wide=wide, all_namespaces=all_namespaces) for j in kept]
    if output == "name":
        for j in kept:
            click.echo(object_name(j, PODGROUP_RESOURCE if _is_gang(j) else JOB_RESOURCE))
        columns = Columns(headers, rows)
    else:
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
    """Describe job NAME: spec, status and events (-o json|yaml|name: the Job itself). NAME
    may name another workload with a gang (a PyTorchJob, RayCluster...): its PodGroup is shown."""
    kube = Kube(kubeconfig)
    j = _find(kube, name, namespace or kube.namespace)
    if _is_gang(j):
        _view_gang(kube, j, output)
        return
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


def _find(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """The VCJob NAME, else the PodGroup of the workload NAME (a PyTorchJob, MPIJob, RayCluster,
    SparkApplication... that owns it), else a one-line failure."""
    found = kube.get(VCJOB, name, namespace)
    if found is not None:
        found.setdefault("kind", "Job")
        return found
    gangs = [pg for pg in _operator_gangs(kube, namespace) if workload_of(pg)[1] == name]
    if gangs:
        return sorted(gangs, key=lambda pg: workload_of(pg)[0])[0]
    workload = _gangless_workload(kube, name, namespace)
    if workload is None:
        fail(
            f"job {namespace}/{name} not found: no VCJob, nor a PodGroup of another workload "
            f"(PyTorchJob, RayCluster...) of that name"
        )
    return workload


def _gangless_workload(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    """A workload of a kind an installed integration handles (a PyTorchJob, MPIJob, RayJob...)
    named NAME that has no PodGroup: once it finished, its operator deleted the gang. Kinds the
    API server does not serve are skipped."""
    from batch.api.integration import load_adapters

    for adapter in load_adapters():
        for kind in adapter.kinds:
            if not kind.namespaced or kind.label_selector or kind.api_version == "v1":
                continue
            res = Resource(kind.api_version, kind.plural, kind.kind)
            try:
                found = kube.rest.get(res, name, namespace)
            except (ApiError, OSError, UserError):
                continue
            found.setdefault("kind", kind.kind)
            return found
    return None


def _workload_lines(obj: Mapping[str, Any]) -> list[str]:
    """`job why` of a workload with no gang (left): its own latest condition says how it is."""
    meta = obj["metadata"]
    where = f"{obj.get('kind')} {meta.get('namespace')}/{meta['name']}"
    conds = [
        c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    ]
    if not conds:
        return [f"{where} has no PodGroup and no condition yet: its operator has not made its gang"]
    last = max(conds, key=lambda c: str(c.get("lastTransitionTime") or ""))
    said = f"{where} is {last.get('type')} since {last.get('lastTransitionTime') or '?'}"
    why = " ".join(str(last.get("message") or last.get("reason") or "").split())
    return [f"{said}: {why}" if why else said, "Its operator removed its PodGroup: no gang waits."]


def _workload_object(kube: Kube, pg: Mapping[str, Any]) -> dict[str, Any] | None:
    """The workload that owns an operator's gang, when the API server serves its kind."""
    owner = controller_ref(pg)
    if owner is None or not owner.get("apiVersion") or not owner.get("kind"):
        return None
    kind = str(owner["kind"])
    res = Resource(str(owner["apiVersion"]), f"{kind.lower()}s", kind)
    return kube.get(res, str(owner.get("name")), pg["metadata"].get("namespace"))


def _view_gang(kube: Kube, pg: Mapping[str, Any], output: str) -> None:
    """`job view` of a workload that is not a VCJob: its PodGroup, named after the workload
    (-o json|yaml: the workload object itself when the API serves it, else the PodGroup)."""
    kind, name = workload_of(pg)
    owner = controller_ref(pg) or {}
    if output in ("json", "yaml"):
        click.echo(dump(_workload_object(kube, pg) or dict(pg), output))
        return
    if output == "name":
        group = str(owner.get("apiVersion") or "").split("/")[0]
        click.echo(f"{kind.lower()}.{group}/{name}" if group else f"{PODGROUP_RESOURCE}/{name}")
        return
    meta = pg["metadata"]
    out = {
        "Name": name,
        "Namespace": meta.get("namespace"),
        "Kind": kind,
        "API Version": owner.get("apiVersion") or PODGROUP.api_version,
        "PodGroup": meta.get("name"),
        "Metadata": {"Creation Timestamp": meta.get("creationTimestamp"), "UID": meta.get("uid")},
        "Spec": pg.get("spec") or {},
        "Status": pg.get("status") or {},
    }
    click.echo(yaml.safe_dump(out, sort_keys=False, default_flow_style=False).rstrip())
    click.echo("Events:")
    click.echo(_events_table(kube, pg))


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
        found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        return [{k: ev.get(k) for k in ("reason", "message", "count")} for ev in found]

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

    def pods(self, namespace: str, group: str) -> list[dict[str, Any]]:
        found = self._all(RESOURCES["Pod"], namespace)
        return [
            pod_facts(p)
            for p in found
            if ((p.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION) == group
        ]

    def free_by_node(self) -> dict[str, dict[str, int]]:
        return free_by_node(self._all(RESOURCES["Node"]), self._all(RESOURCES["Pod"]))

    def evictions(self) -> list[dict[str, Any]]:
        found = []
        for reason in ("Preempted", "Reclaimed"):
            found += self._all(RESOURCES["Event"], fieldSelector=f"reason={reason}")
        return found

    def _all(self, res: Resource, ns: str | None = None, **params: str) -> list[dict[str, Any]]:
        return list(self.kube.items(res, ns, missing_ok=True, **params).get("items") or [])


@job.command("why")
@kube_options
@name_argument(VCJOB)
@namespace_option
def job_why(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Say in one sentence what blocks job NAME (or how it ended), then the details: PodGroup
    conditions, events, queue position and share. NAME may name another workload with a gang
    (a PyTorchJob, RayCluster...)."""
    kube = Kube(kubeconfig)
    found = _find(kube, name, namespace or kube.namespace)
    look = _ApiLookup(kube)
    if found.get("kind") not in (VCJOB_KIND, "Job", PODGROUP.kind):
        lines = _workload_lines(found)
    else:
        lines = explain_workload(found, look) if _is_gang(found) else explain(found, look)
    for line in lines:
        click.echo(line)
