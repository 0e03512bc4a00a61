"""VCJob admission: Volcano's mutating (`/jobs/mutate`) and validating (`/jobs/validate`) webhook.

Defaulting (CREATE, volcano-semantics.md#job-admission): queue `default`, schedulerName `volcano`,
maxRetry 3,
task names `default<i>`, dnsPolicy for hostNetwork pods, task and job minAvailable, implied
plugins (`svc` for tensorflow/mpi/pytorch/ray, `ssh` for mpi), networkTopology mode `hard`.
Validation (CREATE): every rejection rule of
`volcano-semantics.md#vcjob-spec, #job-admission, #policy-matching`, and the size limits
(`limits.py`:
tasks, replicas per task, pods per job, policies per list); UPDATE: only minAvailable,
priorityClassName and per-task replicas/minAvailable may change (Volcano's scale up/down), and
a scale-up stays within the limits.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from batch.api.constants import (
    ANY_EVENT,
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER,
    JOB_PLUGINS,
    PLUGINS_IMPLYING_SVC,
    POLICY_ACTIONS,
    POLICY_EVENTS,
    QUEUE_OPEN,
    ROOT_QUEUE,
)
from batch.api.core import Container, PodTemplateSpec
from batch.api.defaults import (
    default_job_min_available,
    default_task_min_available,
    max_retry,
    task_name,
    unset_or_zero,
)
from batch.api.job import JobSpec, LifecyclePolicy, NetworkTopologySpec, TaskSpec
from batch.api.jobplugins import parse_plugin_args, plugin_arg_problems
from batch.api.quantity import QuantityRangeError, check_int64

from .common import (
    Errors,
    as_dict,
    as_list,
    check_amount,
    is_dns1123_label,
    is_go_duration,
    is_qualified_name,
    join,
    quantity_amount,
)
from .limits import DEFAULT_LIMITS, AdmissionLimits
from .types import AdmissionLookup

__all__ = [
    "check_queue",
    "mutate_job_spec",
    "validate_job_create",
    "validate_job_spec",
    "validate_job_update",
    "validate_network_topology",
    "validate_pod_template",
    "validate_policies",
]


def _is_int(value: Any) -> bool:
    return type(value) is int


def mutate_job_spec(spec: dict[str, Any]) -> None:
    """Apply the job webhook's defaults to a raw JobSpec dict, in place (tolerates any shape)."""
    if not spec.get("queue"):
        spec["queue"] = DEFAULT_QUEUE
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    spec["maxRetry"] = max_retry(spec.get("maxRetry"))
    tasks = as_list(spec.get("tasks"))
    task_minimums: list[int] = []
    for i, task in enumerate(tasks or []):
        if not isinstance(task, dict):
            continue
        _default_task(task, i)
        if _is_int(task.get("minAvailable")) and task["minAvailable"] >= 0:
            task_minimums.append(task["minAvailable"])
    if unset_or_zero(spec.get("minAvailable")) and tasks:
        spec["minAvailable"] = default_job_min_available(task_minimums)
    _default_plugins(as_dict(spec.get("plugins")))
    _default_topology_mode(spec.get("networkTopology"))


def _default_task(task: dict[str, Any], index: int) -> None:
    """One task's defaults: name, hostNetwork dnsPolicy, partitions, minAvailable, maxRetry."""
    if not task.get("name"):
        task["name"] = task_name(task, index)
    pod_spec = as_dict((as_dict(task.get("template")) or {}).get("spec"))
    if (
        pod_spec is not None
        and pod_spec.get("hostNetwork") is True
        and not pod_spec.get("dnsPolicy")
    ):
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    partition = as_dict(task.get("partitionPolicy"))
    if partition is not None:
        if "minPartitions" not in partition:
            partition["minPartitions"] = 0
        _default_topology_mode(partition.get("networkTopology"))
    if task.get("minAvailable") is None:
        default = default_task_min_available(task)
        if default is not None:
            task["minAvailable"] = default
    task["maxRetry"] = max_retry(task.get("maxRetry"))


def _default_plugins(plugins: dict[str, Any] | None) -> None:
    """The plugins others imply: `svc` for tensorflow/mpi/pytorch/ray, `ssh` for mpi."""
    if plugins is None:
        return
    if any(p in plugins for p in PLUGINS_IMPLYING_SVC) and "svc" not in plugins:
        plugins["svc"] = []
    if "mpi" in plugins and "ssh" not in plugins:
        plugins["ssh"] = []


def _default_topology_mode(value: Any) -> None:
    topo = as_dict(value)
    if topo is not None and "mode" not in topo:
        topo["mode"] = "hard"


# --------------------------------------------------------------------------- validation


def validate_network_topology(topo: NetworkTopologySpec | None, path: str, errors: Errors) -> None:
    if topo is None:
        return
    if topo.highest_tier_allowed is not None and topo.highest_tier_name:
        errors.add(
            path,
            "exclusive",
            "highestTierAllowed and highestTierName must not both be set",
        )


def validate_policies(
    policies: list[LifecyclePolicy] | None,
    path: str,
    errors: Errors,
    *,
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> None:
    """Lifecycle policy rules (volcano-semantics.md#policy-matching) for one policy list (job level
    or one task)."""
    too_many = limits.policies_error(len(policies or []))
    if too_many:
        errors.add(path, "maxPolicies", too_many)
        return
    event_at: dict[str, str] = {}  # event -> path of the policy that claims it
    code_at: dict[int, str] = {}  # exit code -> path of the policy that claims it
    for j, policy in enumerate(policies or []):
        ppath = join(path, j)
        events = _policy_events(policy, ppath)
        if policy.exit_code is not None and events:
            errors.add(ppath, "eventXorExitCode", "event and exitCode must not both be set")
        elif policy.exit_code is None and not events:
            errors.add(ppath, "eventXorExitCode", "either event(s) or exitCode must be set")
        if policy.exit_code is not None:
            _claim_exit_code(policy.exit_code, ppath, code_at, errors)
        _claim_events(events, ppath, event_at, errors)
        _check_policy_action(policy, ppath, errors)
    if ANY_EVENT in event_at and len(event_at) > 1:
        errors.add(
            path,
            "anyEventAlone",
            "when '*' is used no other event may be specified: "
            + ", ".join(sorted(e for e in event_at if e != ANY_EVENT)),
        )


def _policy_events(policy: LifecyclePolicy, ppath: str) -> list[tuple[str, str]]:
    """The events a policy names (`event`, then `events`), each with its field path."""
    events: list[tuple[str, str]] = []
    if policy.event:
        events.append((policy.event, join(ppath, "event")))
    for k, listed in enumerate(policy.events or []):
        events.append((listed, join(join(ppath, "events"), k)))
    return events


def _claim_exit_code(code: int, ppath: str, code_at: dict[int, str], errors: Errors) -> None:
    """An exit code is non-zero and used by one policy of the list only."""
    cpath = join(ppath, "exitCode")
    if code == 0:
        errors.add(cpath, "exitCodeNonZero", "0 is not a valid error exit code")
    elif code in code_at:
        errors.add(cpath, "unique", f"exitCode {code} already used by {code_at[code]}")
    else:
        code_at[code] = ppath


def _claim_events(
    events: list[tuple[str, str]], ppath: str, event_at: dict[str, str], errors: Errors
) -> None:
    """Each event may be named in a policy and used by one policy of the list only."""
    seen_here: set[str] = set()
    for ev, epath in events:
        if ev in seen_here:  # duplicates inside one policy are de-duplicated
            continue
        seen_here.add(ev)
        if ev not in POLICY_EVENTS:
            errors.add(epath, "event", f"{ev} is an internal event, not allowed in a policy")
        elif ev in event_at:
            errors.add(epath, "unique", f"event {ev} already used by {event_at[ev]}")
        else:
            event_at[ev] = ppath


def _check_policy_action(policy: LifecyclePolicy, ppath: str, errors: Errors) -> None:
    """A known action, and a Go duration as the timeout."""
    if not policy.action:
        errors.add(join(ppath, "action"), "required", "a policy needs an action")
    elif policy.action not in POLICY_ACTIONS:
        allowed = ", ".join(sorted(POLICY_ACTIONS))
        errors.add(join(ppath, "action"), "action", f"unknown action {policy.action!r} ({allowed})")
    if policy.timeout is not None and not is_go_duration(policy.timeout):
        errors.add(join(ppath, "timeout"), "duration", f"invalid duration {policy.timeout!r}")


def _validate_container(c: Container, path: str, errors: Errors) -> None:
    if c.name is not None and not is_dns1123_label(c.name):
        errors.add(join(path, "name"), "dns1123Label", f"invalid container name {c.name!r}")
    res = c.resources
    if res is not None:
        amounts: dict[str, dict[str, int]] = {}
        for kind in ("requests", "limits"):
            rl = getattr(res, kind) or {}
            amounts[kind] = {}
            for rname, value in rl.items():
                qpath = join(join(join(path, "resources"), kind), rname)
                amount = check_amount(rname, value, qpath, errors, whole_extended=True)
                if amount is not None:
                    amounts[kind][rname] = amount
        for rname, req in amounts["requests"].items():
            lim = amounts["limits"].get(rname)
            if lim is not None and req > lim:
                errors.add(
                    join(join(join(path, "resources"), "requests"), rname),
                    "requestsLessEqualLimits",
                    f"request must be less than or equal to the {rname} limit",
                )
    for k, port in enumerate(c.ports or []):
        ppath = join(join(path, "ports"), k)
        if port.container_port is not None and not 1 <= port.container_port <= 65535:
            errors.add(join(ppath, "containerPort"), "portRange", "must be in 1..65535")
        if port.host_port is not None and not 0 <= port.host_port <= 65535:
            errors.add(join(ppath, "hostPort"), "portRange", "must be in 0..65535")


def validate_pod_template(tmpl: PodTemplateSpec | None, path: str, errors: Errors) -> None:
    """The pod template checks Tephra performs (a subset of core/v1 pod validation)."""
    spec = tmpl.spec if tmpl is not None else None
    spath = join(path, "spec")
    if spec is None or not spec.containers:
        errors.add(join(spath, "containers"), "required", "a pod template needs a container")
        return
    names: dict[str, str] = {}
    for group in ("initContainers", "containers"):
        items = spec.init_containers if group == "initContainers" else spec.containers
        for k, c in enumerate(items or []):
            cpath = join(join(spath, group), k)
            if not c.name:
                errors.add(join(cpath, "name"), "required", "a container needs a name")
            elif c.name in names:
                errors.add(join(cpath, "name"), "unique", f"duplicate name (also {names[c.name]})")
            else:
                names[c.name] = cpath
            if not c.image:
                errors.add(join(cpath, "image"), "required", "a container needs an image")
            _validate_container(c, cpath, errors)
    for k, tol in enumerate(spec.tolerations or []):
        tpath = join(join(spath, "tolerations"), k)
        if tol.operator not in (None, "", "Exists", "Equal"):
            errors.add(join(tpath, "operator"), "enum", f"{tol.operator!r} is not Exists or Equal")
        elif tol.operator == "Exists" and tol.value:
            errors.add(join(tpath, "value"), "toleration", "must be empty when operator is Exists")
        elif not tol.key and tol.operator != "Exists":
            errors.add(join(tpath, "operator"), "toleration", "an empty key needs operator Exists")
        if tol.effect not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            errors.add(join(tpath, "effect"), "enum", f"unknown taint effect {tol.effect!r}")
    node_aff = spec.affinity.node_affinity if spec.affinity else None
    required = node_aff.required_during_scheduling_ignored_during_execution if node_aff else None
    for t, term in enumerate(required.node_selector_terms if required else []):
        tpath = f"{spath}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        for r, req in enumerate(term.match_expressions or []):
            rpath = f"{tpath}.nodeSelectorTerms[{t}].matchExpressions[{r}].operator"
            if req.operator not in _NODE_SELECTOR_OPERATORS:
                errors.add(rpath, "enum", f"unknown node selector operator {req.operator!r}")


_NODE_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def _plugin_arg(args: list[str], key: str, default: str) -> str:
    """A job plugin's `--key=value` or `--key value` (the last one wins), else `default`."""
    return parse_plugin_args(args).get(key, default)


def _tensorflow_hosts(tasks: list[TaskSpec], args: list[str]) -> int:
    """How many hosts the tensorflow plugin lists in each pod's TF_CONFIG (its roles' pods)."""
    roles = {_plugin_arg(args, role, role) for role in ("ps", "worker", "chief", "evaluator")}
    return sum(t.replicas or 0 for t in tasks if t.name in roles)


def _check_dag(tasks: list[TaskSpec], path: str, errors: Errors) -> None:
    names = {t.name: i for i, t in enumerate(tasks) if t.name}
    graph: dict[str, list[str]] = {}
    for i, t in enumerate(tasks):
        deps = (t.depends_on.name or []) if t.depends_on else []
        for k, dep in enumerate(deps):
            dpath = join(join(join(join(path, i), "dependsOn"), "name"), k)
            if dep not in names:
                errors.add(dpath, "dependsOnExists", f"task {dep!r} does not exist in the job")
            elif dep == t.name:
                errors.add(dpath, "dag", f"task {dep!r} depends on itself")
        if t.name:
            graph[t.name] = [d for d in deps if d in names and d != t.name]
    state: dict[str, int] = {}  # 1 = visiting, 2 = done

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*trail, node, nxt]
            if state.get(nxt) is None:
                cycle = visit(nxt, [*trail, node])
                if cycle:
                    return cycle
        state[node] = 2
        return None

    for node in graph:
        if state.get(node) is None:
            cycle = visit(node, [])
            if cycle:
                start = cycle.index(cycle[-1])
                loop = " -> ".join(cycle[start:])
                errors.add(
                    join(join(path, names[cycle[-1]]), "dependsOn"),
                    "dag",
                    f"task dependencies form a cycle: {loop}",
                )
                return


def _add(errors: Errors, path: str, rule: str, message: str | None) -> None:
    if message:
        errors.add(path, rule, message)


def _check_size(spec: JobSpec, path: str, limits: AdmissionLimits, errors: Errors) -> bool:
    """The size limits of a new job; False when it has too many tasks to look any further."""
    tasks = spec.tasks or []
    tpath = join(path, "tasks")
    too_many = limits.tasks_error(len(tasks))
    if too_many:
        errors.add(tpath, "maxTasks", too_many)
        return False
    for i, task in enumerate(tasks):
        message = limits.task_replicas_error(task.replicas or 0)
        _add(errors, join(join(tpath, i), "replicas"), "maxTaskReplicas", message)
    _add(errors, tpath, "maxPodsPerJob", limits.pods_error(sum(t.replicas or 0 for t in tasks)))
    return True


def _pod_amounts(task: TaskSpec) -> dict[str, int]:
    """What one pod of `task` asks for: Σ containers (requests, else limits); bad values skipped
    (the container checks report them)."""
    pod_spec = task.template.spec if task.template else None
    total: dict[str, int] = {}
    for cont in (pod_spec.containers or []) if pod_spec else []:
        res = cont.resources
        wanted = {**((res.limits or {}) if res else {}), **((res.requests or {}) if res else {})}
        for rname, value in wanted.items():
            amount = quantity_amount(rname, value)
            if amount is not None and amount > 0:
                total[rname] = total.get(rname, 0) + amount
    return total


def _check_totals(tasks: list[TaskSpec], path: str, errors: Errors) -> None:
    """The job's whole request (replicas x pod) is a PodGroup's minResources at most: it must fit
    Kubernetes' int64 bound too, or the scheduler could not account the gang."""
    total: dict[str, int] = {}
    for task in tasks:
        for rname, amount in _pod_amounts(task).items():
            total[rname] = total.get(rname, 0) + amount * (task.replicas or 0)
    for rname in sorted(total):
        try:
            check_int64(total[rname], f"{rname} of all replicas", "units")
        except QuantityRangeError as exc:
            errors.add(path, "maxQuantity", str(exc))


def validate_job_spec(
    spec: JobSpec,
    *,
    path: str,
    job_name: str | None,
    user_min_available: Mapping[int, bool],
    errors: Errors,
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> None:
    """CREATE-time rules of a (defaulted) JobSpec; `path` is where the spec sits (`spec`)."""
    if not _check_size(spec, path, limits, errors):
        return
    tasks = spec.tasks or []
    tpath = join(path, "tasks")
    if not tasks:
        errors.add(tpath, "required", "a job needs at least one task")
    names: dict[str, int] = {}  # task name -> index of its first task
    for i, task in enumerate(tasks):
        ipath = join(tpath, i)
        name = task.name or ""
        if name in names:
            message = f"duplicate task name {name!r} (also tasks[{names[name]}])"
            errors.add(join(ipath, "name"), "unique", message)
        else:
            names[name] = i
        _check_task(task, ipath, job_name, errors, limits=limits)
        _check_partition(task, ipath, bool(user_min_available.get(i)), errors)
    if tasks:
        _check_dag(tasks, tpath, errors)
        _check_totals(tasks, tpath, errors)
    _check_job_bounds(spec, path, sum(t.replicas or 0 for t in tasks), errors)
    validate_policies(spec.policies, join(path, "policies"), errors, limits=limits)
    _check_plugins(spec, path, set(names), errors, limits=limits)
    _check_volumes(spec, path, errors)
    validate_network_topology(spec.network_topology, join(path, "networkTopology"), errors)


def _check_task(
    task: TaskSpec, ipath: str, job_name: str | None, errors: Errors, *, limits: AdmissionLimits
) -> None:
    """One task's own rules: minAvailable, its pods' names, policies, template, topology policy."""
    replicas = task.replicas or 0
    if task.min_available is not None and task.min_available > replicas:
        errors.add(
            join(ipath, "minAvailable"),
            "minAvailableLessEqualReplicas",
            f"task minAvailable {task.min_available} is greater than replicas {replicas}",
        )
    name = task.name or ""
    if job_name and name and replicas > 0:
        pod_name = f"{job_name}-{name}-{replicas - 1}"
        if not is_qualified_name(pod_name):
            errors.add(
                join(ipath, "name"),
                "podName",
                f"pod name {pod_name!r} would not be a valid name (at most 63 characters)",
            )
    validate_policies(task.policies, join(ipath, "policies"), errors, limits=limits)
    validate_pod_template(task.template, join(ipath, "template"), errors)
    if task.topology_policy and task.topology_policy != "none":
        _check_integer_cpu(task, ipath, errors)


def _check_integer_cpu(task: TaskSpec, ipath: str, errors: Errors) -> None:
    """A topology policy pins whole cores: every container asks for an integer cpu."""
    pod_spec = task.template.spec if task.template else None
    for k, c in enumerate((pod_spec.containers or []) if pod_spec else []):
        req = (c.resources.requests or {}) if c.resources else {}
        milli = quantity_amount("cpu", req["cpu"]) if "cpu" in req else None
        if milli is None or milli % 1000 != 0:
            errors.add(
                f"{ipath}.template.spec.containers[{k}].resources.requests.cpu",
                "integerCpu",
                f"topologyPolicy {task.topology_policy} needs an integer cpu request",
            )


def _check_partition(task: TaskSpec, ipath: str, user_min_available: bool, errors: Errors) -> None:
    """A partition policy divides the replicas exactly, and a user's minAvailable matches its
    minPartitions (`user_min_available`: the user set the task's minAvailable)."""
    pp = task.partition_policy
    if pp is None:
        return
    replicas = task.replicas or 0
    ppath = join(ipath, "partitionPolicy")
    if replicas != pp.total_partitions * pp.partition_size:
        errors.add(
            ppath,
            "partitionPolicy",
            f"replicas {replicas} must equal totalPartitions*partitionSize "
            f"({pp.total_partitions}*{pp.partition_size})",
        )
    mp = pp.min_partitions or 0
    if mp > pp.total_partitions:
        errors.add(
            join(ppath, "minPartitions"),
            "partitionPolicy",
            f"minPartitions {mp} exceeds totalPartitions {pp.total_partitions}",
        )
    if mp > 0 and user_min_available and task.min_available != mp * pp.partition_size:
        errors.add(
            join(ipath, "minAvailable"),
            "partitionPolicy",
            f"minAvailable {task.min_available} must equal minPartitions*partitionSize "
            f"({mp}*{pp.partition_size})",
        )
    validate_network_topology(pp.network_topology, join(ppath, "networkTopology"), errors)


def _check_job_bounds(spec: JobSpec, path: str, total_replicas: int, errors: Errors) -> None:
    """The job's minAvailable and minSuccess are at most its total replicas."""
    if spec.min_available is not None and spec.min_available > total_replicas:
        errors.add(
            join(path, "minAvailable"),
            "minAvailableLessEqualReplicas",
            f"job minAvailable {spec.min_available} is greater than "
            f"total replicas {total_replicas}",
        )
    if spec.min_success is not None and spec.min_success > total_replicas:
        errors.add(
            join(path, "minSuccess"),
            "minSuccessLessEqualReplicas",
            f"minSuccess {spec.min_success} is greater than total replicas {total_replicas}",
        )


def _check_plugins(
    spec: JobSpec, path: str, task_names: set[str], errors: Errors, *, limits: AdmissionLimits
) -> None:
    """Known job plugins with valid arguments; mpi's master is a task; tensorflow's TF_CONFIG
    stays within the hosts limit."""
    for pname, args in (spec.plugins or {}).items():
        ppath = join(join(path, "plugins"), pname)
        for problem in plugin_arg_problems(pname, args):
            errors.add(ppath, "pluginArgument", problem)
        if pname not in JOB_PLUGINS:
            errors.add(
                ppath, "plugin", f"unknown job plugin {pname!r} ({', '.join(sorted(JOB_PLUGINS))})"
            )
        elif pname == "mpi":
            master = _plugin_arg(args, "master", "master")
            if master not in task_names:
                errors.add(ppath, "mpiMaster", f"mpi master task {master!r} is not a task")
        elif pname == "tensorflow":
            too_many = limits.hosts_error(_tensorflow_hosts(spec.tasks or [], args))
            _add(errors, ppath, "maxHostsPerPod", too_many and f"TF_CONFIG lists {too_many}")


def _check_volumes(spec: JobSpec, path: str, errors: Errors) -> None:
    """Each volume has a distinct mountPath without ':' and exactly one claim source."""
    mounts: dict[str, int] = {}  # mountPath -> index of its first volume
    for k, vol in enumerate(spec.volumes or []):
        vpath = join(join(path, "volumes"), k)
        mount = vol.mount_path
        if not mount:
            errors.add(join(vpath, "mountPath"), "required", "mountPath is required")
        elif ":" in mount:
            errors.add(join(vpath, "mountPath"), "mountPath", f"{mount!r} must not contain ':'")
        elif mount in mounts:
            errors.add(
                join(vpath, "mountPath"),
                "unique",
                f"duplicate mountPath (also volumes[{mounts[mount]}])",
            )
        else:
            mounts[mount] = k
        if bool(vol.volume_claim_name) == (vol.volume_claim is not None):
            errors.add(
                vpath,
                "volumeClaim",
                "exactly one of volumeClaimName and volumeClaim must be set",
            )


def check_queue(
    queue: str, path: str, lookup: AdmissionLookup | None, errors: Errors, *, what: str = "jobs"
) -> None:
    """`queue` may take new work (`what`: jobs, PodGroups): not `root`, and (with a `lookup`)
    an existing, Open leaf queue."""
    if queue == ROOT_QUEUE:
        errors.add(path, "queueNotRoot", f"{what} may not be submitted to the root queue")
        return
    if lookup is None:
        return
    found = lookup.get_queue(queue)
    if found is None:
        errors.add(path, "queueExists", f"queue {queue!r} does not exist")
        return
    status = as_dict(found.get("status")) or {}
    state = status.get("state") or QUEUE_OPEN
    if state != QUEUE_OPEN:
        errors.add(path, "queueOpen", f"queue {queue!r} is {state}, {what} need an Open queue")
    for other in lookup.list_queues():
        ospec = other.get("spec") if isinstance(other, Mapping) else None
        if isinstance(ospec, Mapping) and ospec.get("parent") == queue:
            oname = (as_dict(other.get("metadata")) or {}).get("name")
            errors.add(
                path, "queueLeaf", f"queue {queue!r} has child queue {oname!r}; use a leaf queue"
            )
            return


def validate_job_create(
    spec: JobSpec,
    raw: Mapping[str, Any],
    original: Mapping[str, Any],
    *,
    lookup: AdmissionLookup | None,
    errors: Errors,
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> None:
    meta = as_dict(raw.get("metadata")) or {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    gen = meta.get("generateName") if isinstance(meta.get("generateName"), str) else None
    if name:
        if not is_dns1123_label(name):
            errors.add(
                "metadata.name", "dns1123Label", f"job name {name!r} must be a DNS-1123 label"
            )
    elif not gen:
        errors.add("metadata.name", "required", "name or generateName is required")
    job_name = name or (f"{gen}xxxxx" if gen else None)
    otasks = as_list((as_dict(original.get("spec")) or {}).get("tasks")) or []
    user_min = {
        i: isinstance(t, dict) and t.get("minAvailable") is not None for i, t in enumerate(otasks)
    }
    validate_job_spec(
        spec,
        path="spec",
        job_name=job_name,
        user_min_available=user_min,
        errors=errors,
        limits=limits,
    )
    check_queue(spec.queue or DEFAULT_QUEUE, "spec.queue", lookup, errors)


_MUTABLE_JOB = ("minAvailable", "priorityClassName")
_MUTABLE_TASK = ("replicas", "minAvailable")


def _replicas_of(obj: Mapping[str, Any]) -> list[int]:
    tasks = as_list((as_dict(obj.get("spec")) or {}).get("tasks")) or []
    return [
        t["replicas"] if isinstance(t, dict) and _is_int(t.get("replicas")) else 0 for t in tasks
    ]


def _check_scale(
    spec: JobSpec, old: Mapping[str, Any], limits: AdmissionLimits, errors: Errors
) -> None:
    """A scale-up stays within the size limits; growth only is refused, so a lowered limit
    never freezes a job that is already over it."""
    before = _replicas_of(old)
    after = [t.replicas or 0 for t in spec.tasks or []]
    for i, n in enumerate(after):
        if n > (before[i] if i < len(before) else 0):
            message = limits.task_replicas_error(n)
            _add(errors, f"spec.tasks[{i}].replicas", "maxTaskReplicas", message)
    if sum(after) > sum(before):
        _add(errors, "spec.tasks", "maxPodsPerJob", limits.pods_error(sum(after)))


def validate_job_update(
    spec: JobSpec,
    raw: Mapping[str, Any],
    old: Mapping[str, Any],
    errors: Errors,
    *,
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> None:
    """UPDATE rules (`volcano-semantics.md#job-admission`): tasks fixed; only the scale fields may
    change, within the limits."""
    _check_scale(spec, old, limits, errors)
    new_spec = copy.deepcopy(as_dict(raw.get("spec")) or {})
    old_spec = copy.deepcopy(as_dict(old.get("spec")) or {})
    # compare with defaults applied to both, as the API server would have stored them
    mutate_job_spec(new_spec)
    mutate_job_spec(old_spec)
    _check_tasks_unchanged(
        as_list(new_spec.pop("tasks", None)) or [],
        as_list(old_spec.pop("tasks", None)) or [],
        errors,
    )
    _check_spec_unchanged(new_spec, old_spec, errors)
    _check_update_bounds(spec, errors)


def _check_tasks_unchanged(new_tasks: list[Any], old_tasks: list[Any], errors: Errors) -> None:
    """No task is added or removed, and only a task's scale fields change (the defaulted raw
    task lists; each task dict is consumed)."""
    if len(new_tasks) != len(old_tasks):
        errors.add(
            "spec.tasks",
            "immutable",
            f"tasks may not be added or removed ({len(old_tasks)} -> {len(new_tasks)})",
        )
        return
    for i, (nt, ot) in enumerate(zip(new_tasks, old_tasks, strict=True)):
        if not isinstance(nt, dict) or not isinstance(ot, dict):
            continue
        for key in _MUTABLE_TASK:
            nt.pop(key, None)
            ot.pop(key, None)
        for key in sorted(set(nt) | set(ot)):
            if nt.get(key) != ot.get(key):
                errors.add(
                    f"spec.tasks[{i}].{key}",
                    "immutable",
                    "only replicas and minAvailable of a task may change",
                )


def _check_spec_unchanged(
    new_spec: dict[str, Any], old_spec: dict[str, Any], errors: Errors
) -> None:
    """Nothing but the job's scale fields changes (the defaulted raw specs without their tasks;
    both are consumed). The controller may record the PVC it created for a volumeClaim."""
    for key in _MUTABLE_JOB:
        new_spec.pop(key, None)
        old_spec.pop(key, None)
    new_vols, old_vols = as_list(new_spec.get("volumes")), as_list(old_spec.get("volumes"))
    if new_vols is not None and old_vols is not None and len(new_vols) == len(old_vols):
        for nv, ov in zip(new_vols, old_vols, strict=True):
            if isinstance(nv, dict) and isinstance(ov, dict) and not ov.get("volumeClaimName"):
                nv.pop("volumeClaimName", None)
                ov.pop("volumeClaimName", None)
    for key in sorted(set(new_spec) | set(old_spec)):
        if new_spec.get(key) != old_spec.get(key):
            errors.add(
                f"spec.{key}",
                "immutable",
                "only spec.minAvailable, spec.priorityClassName and tasks' replicas/minAvailable "
                "may change",
            )


def _check_update_bounds(spec: JobSpec, errors: Errors) -> None:
    """After a scale, each task's and the job's minAvailable are at most their replicas."""
    total = 0
    for i, task in enumerate(spec.tasks or []):
        replicas = task.replicas or 0
        total += replicas
        if task.min_available is not None and task.min_available > replicas:
            errors.add(
                f"spec.tasks[{i}].minAvailable",
                "minAvailableLessEqualReplicas",
                f"task minAvailable {task.min_available} is greater than replicas {replicas}",
            )
    if spec.min_available is not None and spec.min_available > total:
        errors.add(
            "spec.minAvailable",
            "minAvailableLessEqualReplicas",
            f"job minAvailable {spec.min_available} is greater than total replicas {total}",
        )
