"""`tephra job`: vcctl's job commands (run, list, view, suspend, resume, delete) plus `why`.

Flags and columns follow vcctl (`volcano-semantics.md#commands`). `suspend`/`resume` create bus
Commands
(AbortJob/ResumeJob) that the job controller executes once; `why` explains a pending job from
its PodGroup's conditions and events and its position in the queue.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import yaml

from batch.api.errors import one_line
from batch.api.yamlio import FileInputError, load_yaml_file
from batch.cli.output import event_age, event_source, output_option, print_list
from batch.kube.why import cluster_capacity, explain

if TYPE_CHECKING:
    from batch.kube.config import Target

F = TypeVar("F", bound=Callable[..., Any])

BATCH = ("batch.volcano.sh", "v1alpha1")
SCHED = ("scheduling.volcano.sh", "v1beta1")
BUS = ("bus.volcano.sh", "v1alpha1")


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


_CONTEXT_KEY = "tephra.kube_context"


def _remember_context(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    ctx.meta[_CONTEXT_KEY] = value


namespace_option = click.option(
    "-n",
    "--namespace",
    default=None,
    help="Namespace (default: the kubeconfig context's, else default).",
)


def kube_options(fn: F) -> F:
    """--kubeconfig and --context for every command that talks to the cluster (kubectl's)."""
    fn = click.option(
        "--context",
        default=None,
        expose_value=False,
        callback=_remember_context,
        help="The kubeconfig context to use (default: its current-context).",
    )(fn)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig file (default: $KUBECONFIG, files separated by ':', merged as kubectl "
        "does; then ~/.kube/config).",
    )(fn)


def client_configuration(target: Target) -> Any:
    """The official client's configuration for a target resolved by `batch.kube.config` (an
    exec plugin's token is renewed before a request when it expired)."""
    from kubernetes import client

    cfg: Any = client.Configuration()
    cfg.host = target.server
    cfg.verify_ssl = not target.insecure
    cfg.ssl_ca_cert = target.ca_file
    cfg.cert_file, cfg.key_file = target.cert_file, target.key_file
    cfg.tls_server_name = target.tls_server_name
    plugin = target.exec
    if plugin is not None and not plugin.token():  # the plugin gives a client certificate
        cred = plugin.current()
        cfg.cert_file = _private_file(cred.cert_data or b"")
        cfg.key_file = _private_file(cred.key_data or b"")
    elif plugin is not None:
        cfg.api_key = {"authorization": f"Bearer {plugin.token()}"}
        cfg.refresh_api_key_hook = lambda c: c.api_key.update(
            authorization=f"Bearer {plugin.token()}"
        )
    elif target.token:
        cfg.api_key = {"authorization": f"Bearer {target.token}"}
    elif target.username is not None and target.password is not None:
        basic = base64.b64encode(f"{target.username}:{target.password}".encode()).decode()
        cfg.api_key = {"authorization": f"Basic {basic}"}
    cfg.retries = 1
    return cfg


def _private_file(data: bytes) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="tephra-kube-", delete=False) as handle:
        handle.write(data)
    return handle.name


class Kube:
    """The three API clients the CLI needs, built by kubectl's kubeconfig rules
    (`batch.kube.config`, the services' loader too)."""

    def __init__(self, kubeconfig: Path | None) -> None:
        from kubernetes import client

        from batch.kube.config import KubeConfigError, resolve

        context = click.get_current_context(silent=True)
        name = context.meta.get(_CONTEXT_KEY) if context is not None else None
        try:
            target = resolve(kubeconfig, context=name)
            if target.exec is not None:  # a sign-in plugin may prompt on the user's terminal
                target.exec.terminal = sys.stdin.isatty()
            cfg = client_configuration(target)
        except (KubeConfigError, OSError, ValueError) as exc:  # config errors are user errors
            fail(one_line(exc))
        #: the context's namespace, the default of `-n` (as kubectl's)
        self.namespace = target.namespace
        self.api = client.ApiClient(configuration=cfg)
        self.core = client.CoreV1Api(self.api)
        self.co = client.CustomObjectsApi(self.api)
        self.ApiException = client.ApiException

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except self.ApiException as exc:
            fail(f"{what}: {_api_message(exc)}")
        except (OSError, HTTPError) as exc:
            host = self.api.configuration.host
            fail(f"{what}: cannot reach the API server at {host} ({_short(exc)})")

    def get_or_none(self, fn: Callable[[], Any]) -> Any:
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except self.ApiException as exc:
            if exc.status == 404:
                return None
            fail(_api_message(exc))
        except (OSError, HTTPError) as exc:
            fail(f"cannot reach the API server at {self.api.configuration.host} ({_short(exc)})")

    def job(self, name: str, namespace: str) -> dict[str, Any]:
        job = self.get_or_none(
            lambda: self.co.get_namespaced_custom_object(*BATCH, namespace, "jobs", name)
        )
        if job is None:
            fail(f"job {namespace}/{name} not found")
        return dict(job)


def _short(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    return text.split(": ", 1)[-1][:200]


def _api_message(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body or "{}")
        return f"{body.get('message') or exc.reason} (HTTP {exc.status})"
    except ValueError:
        return f"{exc.reason} (HTTP {exc.status})"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """vcctl-style left-aligned columns."""
    cols = [list(map(str, headers)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in cols) + 2 for i in range(len(headers))]
    return "\n".join(
        "".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cols
    )


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
            return kube.co.create_namespaced_custom_object(*BATCH, n, "jobs", b)

        created = kube.call(f"create job {ns}/{meta.get('name')}", _create)
        click.echo(f"run job {created['metadata']['name']} successfully")


def _precheck(kube: Kube, body: dict[str, Any]) -> None:
    """Admission rules offline first, so errors come back as one line per field (but for the
    size limits: only the cluster knows the ones it was configured with)."""
    try:
        from batch.api.admission import UNBOUNDED, StaticLookup, admit
    except ImportError:  # pragma: no cover - batch.api always ships admission
        return
    queues = kube.get_or_none(lambda: kube.co.list_cluster_custom_object(*SCHED, "queues")) or {}
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
    if all_namespaces:
        items = kube.call("list jobs", lambda: kube.co.list_cluster_custom_object(*BATCH, "jobs"))[
            "items"
        ]
    else:
        items = kube.call(
            "list jobs", lambda: kube.co.list_namespaced_custom_object(*BATCH, namespace, "jobs")
        )["items"]
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
    found = kube.get_or_none(
        lambda: kube.core.list_namespaced_event(meta.get("namespace"), field_selector=fields)
    )
    serialize: Callable[[Any], dict[str, Any]] = kube.api.sanitize_for_serialization
    events = [serialize(e) for e in (found.items if found else [])]
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
        f"create {action} command",
        lambda: kube.co.create_namespaced_custom_object(*BUS, meta["namespace"], "commands", body),
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
        lambda: kube.co.delete_namespaced_custom_object(*BATCH, namespace, "jobs", name),
    )
    click.echo(f"delete job {name} successfully")


class _ApiLookup:
    """What `explain` needs, read from the API server (`batch.kube.why.WhyLookup`)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        co = self.kube.co
        return self.kube.get_or_none(  # type: ignore[no-any-return]
            lambda: co.get_namespaced_custom_object(*SCHED, namespace, "podgroups", name)
        )

    def queue(self, name: str) -> dict[str, Any] | None:
        co = self.kube.co
        return self.kube.get_or_none(  # type: ignore[no-any-return]
            lambda: co.get_cluster_custom_object(*SCHED, "queues", name)
        )

    def events(self, namespace: str, involved: str) -> list[dict[str, Any]]:
        core = self.kube.core
        events = self.kube.get_or_none(
            lambda: core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={involved}"
            )
        )
        items = events.items if events is not None else []
        return [{"reason": ev.reason, "message": ev.message} for ev in items]

    def podgroups(self) -> list[dict[str, Any]]:
        co = self.kube.co
        found = self.kube.get_or_none(lambda: co.list_cluster_custom_object(*SCHED, "podgroups"))
        return list((found or {}).get("items") or [])

    def priorities(self) -> dict[str, int]:
        from kubernetes import client as kclient

        api = kclient.SchedulingV1Api(self.kube.api)
        pcs = self.kube.get_or_none(api.list_priority_class)
        items = pcs.items if pcs is not None else []
        return {str(p.metadata.name): int(p.value or 0) for p in items}

    def queues(self) -> list[dict[str, Any]]:
        co = self.kube.co
        found = self.kube.get_or_none(lambda: co.list_cluster_custom_object(*SCHED, "queues"))
        return list((found or {}).get("items") or [])

    def capacity(self) -> dict[str, int]:
        nodes = self.kube.get_or_none(self.kube.core.list_node)
        items = nodes.items if nodes is not None else []
        return cluster_capacity(node.status.allocatable for node in items)


@job.command("why")
@kube_options
@click.argument("name")
@namespace_option
def job_why(kubeconfig: Path | None, name: str, namespace: str | None) -> None:
    """Explain why a job is (or was) pending: PodGroup conditions, events, queue position."""
    kube = Kube(kubeconfig)
    for line in explain(kube.job(name, namespace or kube.namespace), _ApiLookup(kube)):
        click.echo(line)
