"""Spark: spark-operator's SparkApplication (sparkoperator.k8s.io/v1beta2) and spark-submit pods.

Why this exists: a Spark application is a driver that, once running, creates its executors.
spark-operator's Volcano support makes a PodGroup ``spark-<app>-pg`` with **minMember 1**, so the
executors are never placed as a gang (spark-operator#1343): half the executors may start and idle
while the rest wait. Tephra's gang covers the driver **and the minimum executors**:

* minMember = 1 + executors (``executor.instances``; with ``dynamicAllocation.enabled`` the
  floor ``minExecutors``), minTaskMember ``{spark-driver: 1, spark-executor: n}``;
* because the executors only exist once the driver runs, the gang has ``leader_role =
  spark-driver``: minResources (driver + n executors) is reserved at enqueue, the driver alone is
  placed first, and as soon as it runs the PodGroup's minMember becomes 1 + n, so the executors
  are placed all-or-nothing — a real gang without the deadlock a plain minMember 1 + n would hit.
* client mode (driver outside the cluster): the executors alone, no leader.

Pod requests are computed as Spark does (``BasicDriverFeatureStep``/``BasicExecutorFeatureStep``),
each setting from the ``driver``/``executor`` field, else its sparkConf key (spark-operator
leaves the field unset when sparkConf has it): cpu = ``coreRequest``
(``spark.kubernetes.<role>.request.cores``) else ``cores`` (``spark.<role>.cores``), default 1;
memory = ``memory`` (``spark.<role>.memory``; JVM string, default ``1g``; no suffix = MiB) +
``memoryOverhead`` (``spark.<role>.memoryOverhead``), else max(factor * memory, 384 MiB) with
factor = ``spark.<role>.memoryOverheadFactor``, else ``spec.memoryOverheadFactor`` (sparkConf
``spark.kubernetes.memoryOverheadFactor``), else 0.1 (0.4 for Python/R apps); plus
``gpu {name, quantity}``. The ``sidecars`` and ``initContainers`` spark-operator adds to the pods
count as kube-scheduler counts them (``pod_requests``). ``batchSchedulerOptions.resources``, when
given, replaces the computed minResources.

Queue = ``batchSchedulerOptions.queue`` (else the app annotation
``scheduling.volcano.sh/queue-name``); priority = ``batchSchedulerOptions.priorityClassName``
(else ``driver.priorityClassName``). ``batchScheduler: volcano`` means the operator makes the
PodGroup itself: Tephra adopts it (waiting up to the grace period, then creating it if the
operator turns out not to be configured for it — spark-operator#1585). Any other
``batchScheduler`` (yunikorn, kube-scheduler, ...) is the user's choice of another scheduler: no
gang.

spark-submit without the operator: the driver pod (labels ``spark-role=driver``,
``spark-app-selector=<app id>``) is the workload; the gang is ``<app id>-podgroup`` (the name
Spark's own ``VolcanoFeatureStep`` uses), minMember from the driver annotation
``scheduling.volcano.sh/group-min-member`` (total, driver included; default 1) and minResources
from ``scheduling.volcano.sh/group-min-resources`` (JSON ResourceList; default the driver's
requests — the executors' requests are not visible on the driver pod). Executors are owned by
the driver pod and carry the same ``spark-app-selector``. These pods get their group name from
the controller, never from the opt-in webhook: a group name on a spark-submit driver means Spark's
``VolcanoFeatureStep`` made the group (adopted after waiting for it), and an executor's owner pod
may be an ordinary pod — a notebook running the driver in client mode — which has no gang here,
so its executors take Volcano's default ``podgroup-<owner uid>``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from batch.api.integration import (
    GROUP_MIN_MEMBER_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    TASK_SPEC_ANNOTATION,
    GangError,
    GangSpec,
    WorkloadKind,
    WorkloadObservation,
    WorkloadRef,
    annotations_of,
    labels_of,
    owner_ref_of,
    pod_requests,
)
from batch.api.quantity import QuantityError
from batch.api.resources import CPU, MEMORY, Resource, to_internal
from batch.api.timestamps import parse_time
from integrations._common import (
    as_count,
    canonical_resource_list,
    copied_annotations,
    count_or_none,
    describe,
    is_kind,
    name_and_namespace,
)

__all__ = ["SPARK", "SparkAdapter", "application_for", "jvm_memory_mib", "spark_pod_requests"]

API_VERSION = "sparkoperator.k8s.io/v1beta2"
APP_NAME_LABEL = "sparkoperator.k8s.io/app-name"
SCHEDULED_APP_LABEL = "sparkoperator.k8s.io/scheduled-app-name"
ROLE_LABEL = "spark-role"
APP_SELECTOR_LABEL = "spark-app-selector"
MIN_RESOURCES_ANNOTATION = "scheduling.volcano.sh/group-min-resources"
DRIVER = "spark-driver"
EXECUTOR = "spark-executor"
_MIN_OVERHEAD_MIB = 384
_MIB = 2**20
_JVM_UNITS = {
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "p": 2**50,
    "pb": 2**50,
}
_JVM_MEMORY = re.compile(r"\s*(\d+)\s*([a-zA-Z]*)\s*")
_NON_JVM_TYPES = ("python", "r")


def podgroup_name(app: str) -> str:
    return f"spark-{app}-pg"


def jvm_memory_mib(value: Any, *, what: str) -> int:
    """A Spark/JVM memory string (``512m``, ``2g``, ``1024`` = MiB) in whole MiB, as Spark."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _JVM_MEMORY.fullmatch(str(value))
    unit = m.group(2).lower() if m else None
    if m is None or (unit and unit not in _JVM_UNITS):
        raise GangError(f"{what}: {value!r} is not a Spark memory size (e.g. 512m, 2g)")
    amount = int(m.group(1))
    return amount if not unit else amount * _JVM_UNITS[unit] // _MIB


def _factor(value: Any, *, what: str) -> Fraction:
    try:
        f = Fraction(str(value).strip())
    except ValueError:
        raise GangError(f"{what}: {value!r} is not a number") from None
    if f < 0:
        raise GangError(f"{what}: must be >= 0, got {value!r}")
    return f


def _setting(
    spec: Mapping[str, Any], field: str, conf: Mapping[str, Any], key: str, path: str
) -> tuple[Any, str]:
    """A pod setting from the field of ``spec`` (at ``path``, e.g. ``spec.driver``), else the
    sparkConf ``key`` (spark-operator leaves the field unset when sparkConf has it, and Spark
    honours the conf): (value or None, the path it came from, for messages)."""
    if spec.get(field) is not None:
        return spec[field], f"{path}.{field}"
    return conf.get(key), f"{path.rpartition('.')[0]}.sparkConf[{key}]"


def spark_pod_requests(
    app: Mapping[str, Any], role: str, *, path: str, overhead_factor: Fraction
) -> Resource:
    """The requests of the driver (``role='driver'``) or an executor pod as Spark makes it.

    The main container: cpu = ``coreRequest`` (else sparkConf
    ``spark.kubernetes.<role>.request.cores``), else ``cores`` (else ``spark.<role>.cores``),
    default 1; memory = ``memory`` (else ``spark.<role>.memory``, default ``1g``) +
    ``memoryOverhead`` (else ``spark.<role>.memoryOverhead``), else max(factor x memory,
    384 MiB) with factor ``spark.<role>.memoryOverheadFactor`` else ``overhead_factor``; plus
    ``gpu``. The ``sidecars`` (containers) and ``initContainers`` spark-operator adds to the pod
    are combined with it the way kube-scheduler does (:func:`pod_requests`).
    """
    spec: Mapping[str, Any] = (app.get("spec") or {}).get(role) or {}
    conf: Mapping[str, Any] = (app.get("spec") or {}).get("sparkConf") or {}
    where = f"{describe(app)}: {path}"
    request, at = _setting(
        spec, "coreRequest", conf, f"spark.kubernetes.{role}.request.cores", path
    )
    try:
        if request is not None:
            cpu = to_internal(CPU, str(request))
        else:
            cores, at = _setting(spec, "cores", conf, f"spark.{role}.cores", path)
            if cores is None:
                cores = 1
            if isinstance(cores, bool) or not isinstance(cores, int | float | str):
                raise GangError(f"{describe(app)}: {at}: must be a number, got {cores!r}")
            cpu = to_internal(CPU, str(cores))  # "0.5", never float arithmetic
    except QuantityError as exc:
        raise GangError(f"{describe(app)}: {at}: {exc}") from None
    memory, at = _setting(spec, "memory", conf, f"spark.{role}.memory", path)
    mem_mib = jvm_memory_mib("1g" if memory is None else memory, what=f"{describe(app)}: {at}")
    overhead, at = _setting(spec, "memoryOverhead", conf, f"spark.{role}.memoryOverhead", path)
    if overhead is not None:
        over_mib = jvm_memory_mib(overhead, what=f"{describe(app)}: {at}")
    else:
        key = f"spark.{role}.memoryOverheadFactor"
        factor = overhead_factor
        if conf.get(key) is not None:
            factor = _factor(conf[key], what=f"{describe(app)}: spec.sparkConf[{key}]")
        over_mib = max(int(factor * mem_mib), _MIN_OVERHEAD_MIB)
    amounts = {CPU: cpu, MEMORY: (mem_mib + over_mib) * _MIB}
    gpu = spec.get("gpu")
    if isinstance(gpu, Mapping) and gpu.get("name"):
        quantity = as_count(app, gpu.get("quantity"), f"{path}.gpu.quantity", default=0)
        try:
            amounts[str(gpu["name"])] = to_internal(str(gpu["name"]), quantity)
        except QuantityError as exc:
            raise GangError(f"{where}.gpu: {exc}") from None
    main = {
        "name": f"spark-kubernetes-{role}",
        "resources": {"requests": Resource(amounts).to_list()},
    }
    pod: dict[str, list[Any]] = {"containers": [main]}
    for field, into in (("sidecars", "containers"), ("initContainers", "initContainers")):
        containers = spec.get(field)
        if containers is None:
            continue
        if not isinstance(containers, list) or not all(isinstance(c, Mapping) for c in containers):
            raise GangError(f"{where}.{field}: must be a list of containers")
        pod.setdefault(into, []).extend(containers)
    try:
        return pod_requests(pod)
    except GangError as exc:
        raise GangError(f"{where}: {exc}") from None


def application_for(scheduled: Mapping[str, Any], run_name: str) -> dict[str, Any]:
    """The SparkApplication spark-operator creates for one run of a ScheduledSparkApplication."""
    if scheduled.get("kind") != "ScheduledSparkApplication":
        raise GangError(f"{describe(scheduled)}: not a ScheduledSparkApplication")
    name, namespace = name_and_namespace(scheduled)
    template = (scheduled.get("spec") or {}).get("template")
    if not isinstance(template, Mapping):
        raise GangError(f"{describe(scheduled)}: spec.template: required")
    labels = {**labels_of(scheduled), SCHEDULED_APP_LABEL: name}
    metadata: dict[str, Any] = {"name": run_name, "namespace": namespace, "labels": labels}
    ref = owner_ref_of(scheduled)
    if ref is not None:
        metadata["ownerReferences"] = [ref.to_dict()]
    return {
        "apiVersion": API_VERSION,
        "kind": "SparkApplication",
        "metadata": metadata,
        "spec": dict(template),
    }


def _overhead_factor(
    app: Mapping[str, Any], spec: Mapping[str, Any], conf: Mapping[str, Any]
) -> Fraction:
    """The memory overhead factor: the application's, else 0.4 for non-JVM types, else 0.1."""
    factor_src = spec.get("memoryOverheadFactor") or conf.get(
        "spark.kubernetes.memoryOverheadFactor"
    )
    if factor_src is not None:
        return _factor(factor_src, what=f"{describe(app)}: spec.memoryOverheadFactor")
    if str(spec.get("type", "")).lower() in _NON_JVM_TYPES:
        return Fraction(4, 10)
    return Fraction(1, 10)


#: The ledger's job phase for each SparkApplication ``applicationState.state``.
_APP_PHASES = {
    "": "Pending",
    "SUBMITTED": "Pending",
    "PENDING_RERUN": "Restarting",
    "RUNNING": "Running",
    "SUCCEEDING": "Completing",
    "COMPLETED": "Completed",
    "FAILING": "Failed",
    "FAILED": "Failed",
    "SUBMISSION_FAILED": "Failed",
    "INVALIDATING": "Restarting",
    "UNKNOWN": "Unknown",
}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _app_requests(app: Mapping[str, Any], executors: int) -> dict[str, int]:
    """The driver's and ``executors`` executors' requests ({} when a field is malformed)."""
    spec = _mapping(app.get("spec"))
    try:
        factor = _overhead_factor(app, spec, _mapping(spec.get("sparkConf")))
        driver = spark_pod_requests(app, "driver", path="spec.driver", overhead_factor=factor)
        executor = spark_pod_requests(app, "executor", path="spec.executor", overhead_factor=factor)
    except GangError:
        return {}
    return dict(driver.add(executor.scale(executors)))


def _app_phases(app: Mapping[str, Any]) -> list[tuple[str, dt.datetime]]:
    status = _mapping(app.get("status"))
    phase = _APP_PHASES.get(str(_mapping(status.get("applicationState")).get("state") or ""))
    terminal = phase in ("Completed", "Failed")
    at = parse_time(status.get("terminationTime")) if terminal else None
    at = at or parse_time(status.get("lastSubmissionAttemptTime"))
    return [(phase, at)] if phase and at else []


def _is_native_driver(pod: Mapping[str, Any]) -> bool:
    labels = labels_of(pod)
    return (
        pod.get("kind") == "Pod"
        and labels.get(ROLE_LABEL) == "driver"
        and bool(labels.get(APP_SELECTOR_LABEL))
        and APP_NAME_LABEL not in labels
    )


class SparkAdapter:
    """The Spark :class:`~batch.api.integration.WorkloadAdapter`."""

    _kinds = (
        WorkloadKind(API_VERSION, "SparkApplication", "sparkapplications"),
        WorkloadKind("v1", "Pod", "pods", label_selector=f"{ROLE_LABEL}=driver,!{APP_NAME_LABEL}"),
    )

    @property
    def name(self) -> str:
        return "spark"

    @property
    def kinds(self) -> Sequence[WorkloadKind]:
        return self._kinds

    def existing_podgroup_name(self, workload: Mapping[str, Any]) -> str | None:
        if self._kinds[0].matches(workload):
            name = (workload.get("metadata") or {}).get("name")
            return podgroup_name(name) if name else None
        if _is_native_driver(workload):
            named = annotations_of(workload).get(GROUP_NAME_ANNOTATION)
            return str(named) if named else None
        return None

    def gang_for_workload(self, workload: Mapping[str, Any]) -> GangSpec | None:
        if self._kinds[0].matches(workload):
            return self._application_gang(workload)
        if _is_native_driver(workload):
            return self._native_gang(workload)
        return None

    def observe(self, workload: Mapping[str, Any]) -> WorkloadObservation | None:
        """A SparkApplication for the ledger: the driver and ``executor.instances`` executors
        (their requests as Spark sizes the pods), and ``applicationState`` as its phase."""
        if not is_kind(workload, self._kinds, "SparkApplication"):
            return None
        spec = _mapping(workload.get("spec"))
        executors = count_or_none(_mapping(spec.get("executor")).get("instances")) or 1
        options = _mapping(spec.get("batchSchedulerOptions"))
        return WorkloadObservation(
            replicas={DRIVER: 1, EXECUTOR: executors},
            requests=_app_requests(workload, executors),
            queue=options.get("queue") or None,
            priority_class=options.get("priorityClassName") or None,
            phases=_app_phases(workload),
        )

    def workload_ref_for_pod(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        labels = labels_of(pod)
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        app = labels.get(APP_NAME_LABEL)
        if app and labels.get(ROLE_LABEL) in ("driver", "executor"):
            return WorkloadRef(API_VERSION, "SparkApplication", namespace, app, podgroup_name(app))
        selector = labels.get(APP_SELECTOR_LABEL)
        role = labels.get(ROLE_LABEL)
        if not selector or role not in ("driver", "executor"):
            return None
        # No gang name from the labels alone (the webhook must not name the group): a
        # spark-submit driver that names a group is taken to announce Spark's own
        # (VolcanoFeatureStep) PodGroup, so a name the webhook wrote would be waited for as if
        # Spark made it; and an executor's owner pod may be an ordinary pod (a notebook running
        # the driver in client mode) that has no gang at all. The controller names the group
        # once it knows which gang, if any, the driver pod has.
        if role == "driver":
            return WorkloadRef(
                "v1", "Pod", namespace, str(meta.get("name", "")), None, meta.get("uid")
            )
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == "Pod":
                return WorkloadRef(
                    "v1", "Pod", namespace, str(ref.get("name")), None, ref.get("uid")
                )
        return None  # an executor whose driver is not a pod of this cluster (client mode)

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        annotations = annotations_of(pod)
        if annotations.get(TASK_SPEC_ANNOTATION) and annotations.get(GROUP_NAME_ANNOTATION):
            return str(annotations[TASK_SPEC_ANNOTATION])
        role = labels_of(pod).get(ROLE_LABEL)
        return {"driver": DRIVER, "executor": EXECUTOR}.get(str(role))

    # -- SparkApplication -------------------------------------------------------------------
    def _application_gang(self, app: Mapping[str, Any]) -> GangSpec | None:
        name, namespace = name_and_namespace(app)
        spec: Mapping[str, Any] = app.get("spec") or {}
        if spec.get("suspend") is True:
            return None
        scheduler = spec.get("batchScheduler") or None
        if scheduler not in (None, "volcano"):
            return None  # the user picked another batch scheduler
        conf: Mapping[str, Any] = spec.get("sparkConf") or {}
        mode = spec.get("mode") or "cluster"
        if mode not in ("cluster", "client"):
            raise GangError(f"{describe(app)}: spec.mode: must be cluster or client, got {mode!r}")

        executors = self._min_executors(app, spec, conf)
        factor = _overhead_factor(app, spec, conf)
        executor_req = spark_pod_requests(
            app, "executor", path="spec.executor", overhead_factor=factor
        )
        min_task: dict[str, int] = {}
        total = Resource.zero()
        leader: str | None = None
        if mode == "cluster":
            min_task[DRIVER] = 1
            total = spark_pod_requests(app, "driver", path="spec.driver", overhead_factor=factor)
            leader = DRIVER
        if executors:
            min_task[EXECUTOR] = executors
            total = total.add(executor_req.scale(executors))
        if not min_task:
            return None  # client mode with no minimum executors: nothing to gang
        options: Mapping[str, Any] = spec.get("batchSchedulerOptions") or {}
        if options.get("resources") is not None:
            min_resources = canonical_resource_list(
                app, options["resources"], "spec.batchSchedulerOptions.resources"
            )
        else:
            min_resources = total.to_list()
        queue = options.get("queue") or annotations_of(app).get(QUEUE_NAME_ANNOTATION)
        driver = spec.get("driver") or {}
        priority = options.get("priorityClassName") or driver.get("priorityClassName") or None
        pg = podgroup_name(name)
        meta = app.get("metadata") or {}
        return GangSpec(
            name=pg,
            namespace=namespace,
            min_member=sum(min_task.values()),
            workload=WorkloadRef(
                API_VERSION, "SparkApplication", namespace, name, pg, meta.get("uid")
            ),
            adapter=self.name,
            min_task_member=min_task,
            min_resources=min_resources,
            queue=str(queue) if queue else None,
            priority_class_name=str(priority) if priority else None,
            owner=owner_ref_of(app),
            annotations=copied_annotations(app),
            adopt_existing=scheduler == "volcano",
            existing_podgroup_name=pg,
            leader_role=leader,
        )

    def _min_executors(
        self, app: Mapping[str, Any], spec: Mapping[str, Any], conf: Mapping[str, Any]
    ) -> int:
        dyn: Mapping[str, Any] = spec.get("dynamicAllocation") or {}
        dyn_enabled = dyn.get("enabled")
        if dyn_enabled is None:
            dyn_enabled = str(conf.get("spark.dynamicAllocation.enabled", "")).lower() == "true"
        if dyn_enabled:
            raw = dyn.get("minExecutors", conf.get("spark.dynamicAllocation.minExecutors"))
            return self._int(app, raw, "spec.dynamicAllocation.minExecutors", default=0)
        executor = spec.get("executor") or {}
        raw = executor.get("instances", conf.get("spark.executor.instances"))
        return self._int(app, raw, "spec.executor.instances", default=1)

    @staticmethod
    def _int(app: Mapping[str, Any], raw: Any, path: str, *, default: int) -> int:
        if isinstance(raw, str) and raw.strip().isdigit():
            raw = int(raw)
        return as_count(app, raw, path, default=default)

    # -- spark-submit driver pods -----------------------------------------------------------
    def _native_gang(self, driver: Mapping[str, Any]) -> GangSpec:
        name, namespace = name_and_namespace(driver)
        labels = labels_of(driver)
        annotations = annotations_of(driver)
        selector = str(labels[APP_SELECTOR_LABEL])
        named = annotations.get(GROUP_NAME_ANNOTATION)
        pg = str(named) if named else f"{selector}-podgroup"
        raw_min = annotations.get(GROUP_MIN_MEMBER_ANNOTATION)
        total = 1
        if raw_min is not None:
            if not str(raw_min).strip().isdigit() or int(raw_min) < 1:
                raise GangError(
                    f"{describe(driver)}: metadata.annotations[{GROUP_MIN_MEMBER_ANNOTATION}]: "
                    f"must be an integer >= 1, got {raw_min!r}"
                )
            total = int(raw_min)
        raw_res = annotations.get(MIN_RESOURCES_ANNOTATION)
        if raw_res is not None:
            try:
                parsed = json.loads(raw_res)
            except ValueError:
                parsed = None
            min_resources = canonical_resource_list(
                driver, parsed, f"metadata.annotations[{MIN_RESOURCES_ANNOTATION}]"
            )
        else:
            min_resources = pod_requests(driver.get("spec")).to_list()
        min_task = {DRIVER: 1}
        if total > 1:
            min_task[EXECUTOR] = total - 1
        queue = annotations.get(QUEUE_NAME_ANNOTATION)
        priority = (driver.get("spec") or {}).get("priorityClassName")
        meta = driver.get("metadata") or {}
        return GangSpec(
            name=pg,
            namespace=namespace,
            min_member=total,
            workload=WorkloadRef("v1", "Pod", namespace, name, pg, meta.get("uid")),
            adapter=self.name,
            min_task_member=min_task,
            min_resources=min_resources,
            queue=str(queue) if queue else None,
            priority_class_name=str(priority) if priority else None,
            owner=owner_ref_of(driver),
            adopt_existing=bool(named),
            existing_podgroup_name=pg if named else None,
            leader_role=DRIVER,
        )


SPARK = SparkAdapter()
