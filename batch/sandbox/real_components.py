"""What runs beside a real control plane (`batch.sandbox.control_plane`): Tephra's components,
or the built Volcano v1.10 scheduler and controller-manager in their place.

`tephra cluster up` starts one side (`--components tephra|volcano`); the differential tier
starts Volcano's with the same code.

- Tephra (`tephra_components`): Tephra's CRDs, the controllers and the scheduler (the sandbox's
  own `Component`s, in this process) and the admission webhook on 127.0.0.1 with a self-signed
  certificate, registered with the apiserver by URL (`webhook_configurations`: the chart's job,
  queue, PodGroup, Command, CronJob and pod webhooks, the same rules as the chart's default
  values, which tests/charts checks: a framework pod in a namespace that opted into gang
  injection gets its gang's schedulerName and group, as `tephra sandbox up` does in process).
- Volcano (`volcano_components`): Volcano's own CRDs (from the directory `scripts/build-oracle.sh
  volcano` fills), `vc-controller-manager` and `vc-scheduler` as processes logging into a
  directory. Volcano's webhook manager is not run: jobs are stored as written.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from batch.api.integration import GANG_INJECTION_DISABLED, GANG_INJECTION_LABEL
from batch.api.yamlio import load_yaml_file
from batch.sandbox.control_plane import ControlPlane
from batch.sandbox.loopthread import LoopThread
from batch.sandbox.options import SandboxOptions

__all__ = [
    "VOLCANO_BINARIES",
    "VOLCANO_READY",
    "ComponentError",
    "ComponentProcess",
    "WebhookThread",
    "create_open_queue",
    "delete_crds",
    "find_volcano",
    "install_crds",
    "tephra_components",
    "volcano_args",
    "volcano_components",
    "volcano_crds",
    "volcano_scheduler_args",
    "wait_queue_open",
    "webhook_configurations",
]

Obj = dict[str, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
VOLCANO_BINARIES = ("vc-controller-manager", "vc-scheduler")
#: What vc-scheduler logs once its caches have synced: its readiness (it serves no /readyz).
VOLCANO_READY = "Scheduler completes Initialization"
#: The name of the webhook configurations `tephra cluster up` registers.
WEBHOOK_NAME = "tephra-cluster-up"


class ComponentError(RuntimeError):
    """A component could not start; the message says which and why (its log's tail)."""


# ------------------------------------------------------------------------------ the API
def _request(plane: ControlPlane, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(plane.server + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=plane.ssl_context(), timeout=30) as answer:
            return answer.status, _decode(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, _decode(err.read())


def _decode(body: bytes) -> Any:
    """A JSON answer; the text of another (a path not served yet is a plain-text 404)."""
    import json

    try:
        return json.loads(body or b"null")
    except ValueError:
        return {"message": body.decode(errors="replace").strip()}


def _create(plane: ControlPlane, path: str, body: Obj) -> None:
    """Create `body`; one that exists already is replaced by it (same name, new content)."""
    code, answer = _request(plane, "POST", path, body)
    if code == 409:
        name = body["metadata"]["name"]
        code, current = _request(plane, "GET", f"{path}/{name}")
        if code == 200:
            meta = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
            code, answer = _request(plane, "PUT", f"{path}/{name}", {**body, "metadata": meta})
    if code not in (200, 201):
        what = f"{body.get('kind')} {body.get('metadata', {}).get('name')}"
        raise ComponentError(f"cannot create {what}: {code} {(answer or {}).get('message')}")


def install_crds(plane: ControlPlane, crds: Iterable[Obj], timeout: float = 60.0) -> list[str]:
    """Create (or replace) these CRDs and wait until each is Established and its objects can
    be listed (an Established kind answers 429 "storage is (re)initializing" for a moment, which
    a component starting then would log as an error): their names."""
    lists = {}
    for crd in crds:
        _create(plane, CRDS, crd)
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served", True))
        lists[crd["metadata"]["name"]] = (
            f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
        )
    deadline = time.monotonic() + timeout
    left = set(lists)
    while left:
        for name in sorted(left):
            code, _ = _request(plane, "GET", f"{lists[name]}?limit=1")
            if code == 200:
                left.discard(name)
        if left and time.monotonic() > deadline:
            raise ComponentError(f"CRDs not served within {timeout:.0f} s: {sorted(left)}")
        if left:
            time.sleep(0.2)
    return list(lists)


def delete_crds(plane: ControlPlane, names: Iterable[str], timeout: float = 60.0) -> None:
    """Delete these CRDs (and so every object of theirs) and wait until each is gone; a name
    that does not exist is skipped."""
    left = set(names)
    for name in sorted(left):
        _request(plane, "DELETE", f"{CRDS}/{name}")
    deadline = time.monotonic() + timeout
    while left:
        left = {n for n in left if _request(plane, "GET", f"{CRDS}/{n}")[0] != 404}
        if left and time.monotonic() > deadline:
            raise ComponentError(f"CRDs not deleted within {timeout:.0f} s: {sorted(left)}")
        if left:
            time.sleep(0.2)


def create_open_queue(plane: ControlPlane, name: str = "default", timeout: float = 60.0) -> None:
    """Queue `name`, Open, as vc-controller-manager's queue controller leaves the queue
    vc-scheduler creates: for vc-scheduler run alone (Volcano's CRDs installed)."""
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    body: Obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    body.update(metadata={"name": name}, spec={"weight": 1, "reclaimable": True})
    code, queue = _request(plane, "POST", path, body)
    if code == 409:
        code, queue = _request(plane, "GET", f"{path}/{name}")
    if code not in (200, 201):
        raise ComponentError(f"cannot create queue {name}: {code} {(queue or {}).get('message')}")
    if (queue.get("status") or {}).get("state") != "Open":
        # what Volcano's queue controller writes (its CRD requires `allocated`)
        status = {"state": "Open", "allocated": {"cpu": "0", "memory": "0"}}
        code, answer = _request(plane, "PUT", f"{path}/{name}/status", {**queue, "status": status})
        if code != 200:
            message = (answer or {}).get("message")
            raise ComponentError(f"cannot open queue {name}: {code} {message}")
    wait_queue_open(plane, name, timeout)


def wait_queue_open(plane: ControlPlane, name: str = "default", timeout: float = 60.0) -> None:
    """Wait until Queue `name` exists and is Open (what either side's components do first), so
    a job submitted into it is taken at once."""
    path = f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}"
    deadline = time.monotonic() + timeout
    while True:
        code, queue = _request(plane, "GET", path)
        if code == 200 and ((queue.get("status") or {}).get("state")) == "Open":
            return
        if time.monotonic() > deadline:
            raise ComponentError(f"queue {name} not Open within {timeout:.0f} s")
        time.sleep(0.2)


def volcano_crds(bin_dir: Path) -> list[Obj]:
    """Volcano's own CRDs, from `crds/` of the built oracle's directory."""
    return [
        doc
        for path in sorted((bin_dir / "crds").glob("*.yaml"))
        for doc in load_yaml_file(path)
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]


# ----------------------------------------------------------------------------- processes
class ComponentProcess:
    """`program args...` as its own process (in `cwd`), stdout and stderr in `log_path` (read
    while it runs)."""

    def __init__(
        self, log_path: Path, program: Path | str, *args: str, cwd: Path | None = None
    ) -> None:
        self.log_path = log_path
        self.args = args
        self.label = Path(program).name
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(program), *args], stdout=log, stderr=subprocess.STDOUT, cwd=cwd
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first match of `pattern` in the log; ComponentError when the process exits or
        time is up."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.log())
            if found:
                return found
            if self.proc.poll() is not None:
                raise ComponentError(f"{self.label} exited {self.proc.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                raise ComponentError(f"{self.label}: no {pattern!r} in {timeout:.0f} s")
            time.sleep(0.2)

    def tail(self, lines: int = 5) -> str:
        return " | ".join(self.log().splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -------------------------------------------------------------------------------- Volcano
def _cache_root() -> Path:
    """scripts/build-kube.sh's and build-oracle.sh's cache directory."""
    root = os.environ.get("TEPHRA_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tephra"


def find_volcano(bin_dir: Path | None = None) -> Path:
    """The built Volcano's directory: `bin_dir`, else `$TEPHRA_VOLCANO_BIN`, else the newest in
    the build cache; ComponentError (saying `make oracles`) when there is none or it lacks a
    binary or its CRDs."""
    env = os.environ.get("TEPHRA_VOLCANO_BIN")
    if bin_dir is None and env:
        bin_dir = Path(env)
    if bin_dir is None:
        built = sorted(
            _cache_root().glob("volcano-v*/vc-scheduler"), key=lambda p: p.stat().st_mtime
        )
        if not built:
            raise ComponentError(
                "Volcano is not built: run `make oracles` (or scripts/build-oracle.sh volcano) "
                "or pass --volcano-bin-dir"
            )
        bin_dir = built[-1].parent
    missing = [b for b in VOLCANO_BINARIES if not (bin_dir / b).is_file()]
    if not (bin_dir / "crds").is_dir():
        missing.append("crds/")
    if missing:
        raise ComponentError(
            f"{bin_dir} is not a built Volcano (no {', '.join(missing)}): run `make oracles`"
        )
    return bin_dir


def volcano_args(kubeconfig: Path) -> list[str]:
    """What both of Volcano's components are started with."""
    return [
        *("--kubeconfig", str(kubeconfig), "--leader-elect=false"),
        *("--kube-api-qps", "5000", "--kube-api-burst", "10000", "--scheduler-name", "volcano"),
        *("--log-flush-frequency=1s", "-v=2"),
    ]


def _go_duration(seconds: float) -> str:
    return f"{seconds:g}s"


def volcano_scheduler_args(
    kubeconfig: Path, scheduler_conf: Path, schedule_period: float | str = 1.0
) -> list[str]:
    """vc-scheduler's: `volcano_args`, its configuration file and its period (seconds, or a Go
    duration such as "0.2s")."""
    period = schedule_period if isinstance(schedule_period, str) else _go_duration(schedule_period)
    conf = ["--scheduler-conf", str(scheduler_conf), "--schedule-period", period]
    return [*volcano_args(kubeconfig), *conf]


@contextmanager
def volcano_components(
    bin_dir: Path,
    kubeconfig: Path,
    logs: Path,
    scheduler_conf: Path,
    *,
    schedule_period: float = 1.0,
    timeout: float = 60.0,
) -> Iterator[tuple[ComponentProcess, ComponentProcess]]:
    """vc-controller-manager and vc-scheduler against the cluster of `kubeconfig` (Volcano's
    CRDs installed there already), logging into `logs`; (controller-manager, scheduler), both
    stopped on exit. Returns once the scheduler has initialized.

    vc-scheduler reloads its configuration on every write in the file's directory: a
    `scheduler_conf` in `logs` is copied into a directory of its own, else each log line would
    reload it and log a line again, without end."""
    logs.mkdir(parents=True, exist_ok=True)
    if scheduler_conf.resolve().parent == logs.resolve():
        own = logs / "vc-scheduler-conf" / scheduler_conf.name
        own.parent.mkdir(exist_ok=True)
        own.write_bytes(scheduler_conf.read_bytes())
        scheduler_conf = own
    args = volcano_args(kubeconfig)
    with ExitStack() as stack:
        manager = ComponentProcess(
            logs / "vc-controller-manager.log", bin_dir / "vc-controller-manager", *args
        )
        stack.callback(manager.stop)
        args = volcano_scheduler_args(kubeconfig, scheduler_conf, schedule_period)
        scheduler = ComponentProcess(logs / "vc-scheduler.log", bin_dir / "vc-scheduler", *args)
        stack.callback(scheduler.stop)
        scheduler.wait_for(VOLCANO_READY, timeout)
        if manager.proc.poll() is not None:
            raise ComponentError(f"{manager.label} exited {manager.proc.returncode}")
        yield manager, scheduler


# ------------------------------------------------------------------------ Tephra's webhook
#: (name, path, group, version, resource, operations, scope) of each webhook, as the chart's
#: templates/webhook-configurations.yaml registers them (pod webhooks: `_pod_hooks`).
_MUTATING = [
    ("mutate.jobs.batch.tephra.io", "/jobs/mutate", "batch", "jobs", ["CREATE"]),
    ("mutate.queues.scheduling.tephra.io", "/queues/mutate", "scheduling", "queues", ["CREATE"]),
    (
        "mutate.podgroups.scheduling.tephra.io",
        "/podgroups/mutate",
        "scheduling",
        "podgroups",
        ["CREATE"],
    ),
]
_VALIDATING = [
    ("validate.jobs.batch.tephra.io", "/jobs/validate", "batch", "jobs", ["CREATE", "UPDATE"]),
    (
        "validate.queues.scheduling.tephra.io",
        "/queues/validate",
        "scheduling",
        "queues",
        ["CREATE", "UPDATE", "DELETE"],
    ),
    (
        "validate.podgroups.scheduling.tephra.io",
        "/podgroups/validate",
        "scheduling",
        "podgroups",
        ["CREATE", "UPDATE"],
    ),
    (
        "validate.commands.bus.tephra.io",
        "/commands/validate",
        "bus",
        "commands",
        ["CREATE", "UPDATE"],
    ),
    (
        "validate.cronjobs.batch.tephra.io",
        "/cronjobs/validate",
        "batch",
        "cronjobs",
        ["CREATE", "UPDATE"],
    ),
]
_GROUPS = {
    "batch": ("batch.volcano.sh", "v1alpha1"),
    "scheduling": ("scheduling.volcano.sh", "v1beta1"),
    "bus": ("bus.volcano.sh", "v1alpha1"),
}


#: the namespaces the chart never sends to the pod webhooks (`webhook.excludeNamespaces`)
EXCLUDED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


def _pod_hooks(base_url: str, ca: str, scheduler_name: str) -> tuple[Obj, Obj]:
    """The chart's pod webhooks (mutate: gang injection, decided per pod by its namespace's
    opt-in; validate: pods Tephra schedules), failure policy Ignore: an outage never blocks a
    pod. Pods naming another scheduler are not sent to the mutating one."""
    ours = f"'{scheduler_name}'"
    rule: Obj = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"]}
    rule.update(resources=["pods"], scope="Namespaced")
    excluded: Obj = {"key": "kubernetes.io/metadata.name", "operator": "NotIn"}
    excluded["values"] = list(EXCLUDED_NAMESPACES)
    common: Obj = {"admissionReviewVersions": ["v1"], "sideEffects": "None"}
    common.update(timeoutSeconds=5, failurePolicy="Ignore", matchPolicy="Equivalent")
    common.update(namespaceSelector={"matchExpressions": [excluded]}, rules=[rule])
    mutate: Obj = {"name": "mutate.pods.tephra.io", **common, "reinvocationPolicy": "Never"}
    opted_out: Obj = {"key": GANG_INJECTION_LABEL, "operator": "NotIn"}
    opted_out["values"] = [GANG_INJECTION_DISABLED]
    mutate["namespaceSelector"] = {"matchExpressions": [opted_out, excluded]}
    mutate["clientConfig"] = {"url": base_url + "/pods/mutate", "caBundle": ca}
    mutate["matchConditions"] = [
        {
            "name": "default-or-our-scheduler",
            "expression": "!has(object.spec.schedulerName) || object.spec.schedulerName in "
            f"['', 'default-scheduler', {ours}]",
        }
    ]
    validate: Obj = {"name": "validate.pods.tephra.io", **common}
    validate["clientConfig"] = {"url": base_url + "/pods/validate", "caBundle": ca}
    validate["matchConditions"] = [
        {
            "name": "our-scheduler",
            "expression": f"has(object.spec.schedulerName) && object.spec.schedulerName == {ours}",
        }
    ]
    return mutate, validate


def webhook_configurations(
    base_url: str, ca_bundle: bytes, name: str = WEBHOOK_NAME, *, scheduler_name: str = "volcano"
) -> list[Obj]:
    """The Mutating- and ValidatingWebhookConfiguration of Tephra's webhook served at
    `base_url` (https), whose certificate `ca_bundle` (PEM) signs; `scheduler_name`: the
    scheduler the pod webhooks gang pods for."""
    ca = base64.b64encode(ca_bundle).decode()
    pod_mutate, pod_validate = _pod_hooks(base_url, ca, scheduler_name)

    def hooks(table: Sequence[tuple[str, str, str, str, list[str]]]) -> list[Obj]:
        out = []
        for hook, path, group, resource, operations in table:
            api_group, version = _GROUPS[group]
            rule: Obj = {"apiGroups": [api_group], "apiVersions": [version]}
            rule.update(operations=operations, resources=[resource])
            rule["scope"] = "Cluster" if resource == "queues" else "Namespaced"
            out.append(
                {
                    "name": hook,
                    "clientConfig": {"url": base_url + path, "caBundle": ca},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "timeoutSeconds": 10,
                    "failurePolicy": "Fail",
                    "matchPolicy": "Equivalent",
                    "rules": [rule],
                }
            )
        return out

    meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "tephra-cluster-up"}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [*hooks(_MUTATING), pod_mutate],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": dict(meta),
            "webhooks": [*hooks(_VALIDATING), pod_validate],
        },
    ]


class WebhookThread(LoopThread):
    """`tephra webhook` on 127.0.0.1 (a free port) in a thread, with a self-signed certificate
    written to `cert_dir`, reading queues and namespaces through `kubeconfig`."""

    what = "the webhook"

    def __init__(self, kubeconfig: Path, cert_dir: Path, options: SandboxOptions) -> None:
        super().__init__("tephra-webhook")
        self.kubeconfig = kubeconfig
        self.cert_dir = cert_dir
        self.options = options
        self.port = 0
        self.ca = b""
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._facts: Any = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def setup(self) -> None:
        from batch.api.admission import DEFAULT_LIMITS
        from batch.controllers.webhook import (
            ClusterFacts,
            self_signed,
            serve,
            server_ssl_context,
        )

        cert, key = self_signed(self.cert_dir, hosts=["127.0.0.1"])
        self.ca = cert.read_bytes()
        self._stop = asyncio.Event()
        self._facts = ClusterFacts(self.kubeconfig)
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(
            serve(
                host="127.0.0.1",
                port=0,
                ssl_context=server_ssl_context(cert, key),
                facts=self._facts,
                stop=self._stop,
                on_ready=ready.set_result,
                limits=self.options.admission_limits or DEFAULT_LIMITS,
            )
        )
        waits: set[asyncio.Future[Any]] = {self._task, ready}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            self._task.result()  # raises what stopped it
            raise RuntimeError("the webhook stopped before it listened")
        self.port = ready.result()

    async def teardown(self) -> None:
        if self._stop is not None and self._task is not None:
            self._stop.set()
            await self._task
        if self._facts is not None:
            await self._facts.close()


def register_webhook(plane: ControlPlane, webhook: WebhookThread, timeout: float = 30.0) -> None:
    """Register `webhook` with the apiserver and wait until it is called (registration takes
    effect asynchronously): until a dry run of an invalid job is refused."""
    plural = {
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    }
    for config in webhook_configurations(webhook.url, webhook.ca):
        _create(plane, f"{ADMISSION}/{plural[config['kind']]}", config)
    probe: Obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}
    probe.update(metadata={"name": "webhook-probe"}, spec={"minAvailable": 3, "tasks": []})
    jobs = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs?dryRun=All"
    deadline = time.monotonic() + timeout
    while True:
        code, answer = _request(plane, "POST", jobs, probe)
        if code != 201 and "denied the request" in str((answer or {}).get("message")):
            return
        if time.monotonic() > deadline:
            raise ComponentError(f"the apiserver never called the webhook: {code} {answer}")
        time.sleep(0.3)


# --------------------------------------------------------------------------- Tephra's side
@contextmanager
def tephra_components(
    plane: ControlPlane, options: SandboxOptions, workdir: Path, *, timeout: float = 60.0
) -> Iterator[list[str]]:
    """Tephra's CRDs, its webhook (registered) and its controllers and scheduler against
    `plane`, as admin; the components' names. Everything started is stopped on exit."""
    from batch.api.crdgen import generate_crds
    from batch.sandbox.components import default_components, start_all, stop_all

    install_crds(plane, generate_crds().values(), timeout)
    with ExitStack() as stack:
        webhook = WebhookThread(plane.kubeconfig, workdir / "webhook", options).start(timeout)
        stack.callback(webhook.stop)
        register_webhook(plane, webhook, timeout)
        components = default_components(options)
        start_all(components, kubeconfig=plane.kubeconfig, options=options, timeout=timeout)
        stack.callback(stop_all, components)
        wait_queue_open(plane, timeout=timeout)
        yield ["webhook", *(c.name for c in components)]
