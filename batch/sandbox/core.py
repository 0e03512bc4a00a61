"""The API semantics of the sandbox, independent of HTTP: create, update, patch, delete, bind.

`Core` is what the HTTP layer calls for every request and what the in-process node emulator and
workload controllers call directly (they act as the kubelet and kube-controller-manager would,
minus the HTTP hop). It owns the resource-type registry (built-in kinds plus CRDs registered the
moment their CustomResourceDefinition is stored) and enforces server-side metadata, object
metadata validation (`validation`), status subresources, generation, finalizers, graceful pod
deletion, pod spec immutability, eviction budgets, each kind's default deletion propagation,
admission and CRD schemas; server-side apply keeps managedFields through `managed`. A paged
list serves every page at the first page's resourceVersion, reconstructed from the watch
history (410 Expired once that is gone), as etcd does.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.sandbox import admission, decode, defaults, managed, schema, validation
from batch.sandbox.errors import (
    ApiError,
    Cause,
    already_exists,
    conflict,
    invalid,
    not_found,
)
from batch.sandbox.meta import ResourceType, builtin_types, crd_types
from batch.sandbox.patch import json_patch, strategic_merge_patch
from batch.sandbox.selectors import Matcher, selector_from_label_selector
from batch.sandbox.store import Obj, Store, dumps

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# application/json first: taken as a merge patch, but not named among the accepted types
# The manager of an ordinary write with neither fieldManager nor user agent (in-process callers).
DEFAULT_MANAGER = "sandbox"
_PATCH_TYPES = ("application/json", JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)

# Kinds whose DELETE without a propagationPolicy orphans dependents (for back compatibility).
_ORPHAN_BY_DEFAULT = frozenset({("batch", "v1", "Job"), ("", "v1", "ReplicationController")})
_KEEP_STATUS_ON_CREATE = frozenset({"Node", "Service", "PersistentVolume", "Event", "Namespace"})
_TERMINAL = ("Succeeded", "Failed")


def _check_size(obj: Obj) -> None:
    """etcd refuses a value over its request limit; the sandbox stores none either."""
    if len(dumps(obj)) > decode.MAX_OBJECT_BYTES:
        raise decode.object_too_large()


def _merge_string_data(secret: Obj) -> None:
    """A Secret's `stringData` is write-only: its values replace `data`'s, base64-encoded, as
    the apiserver's conversion does, and it is never stored."""
    string_data = secret.pop("stringData", None)
    if not isinstance(string_data, dict):
        return
    data = dict(secret.get("data") or {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    secret["data"] = data


def _prepare_data(kind: str, obj: Obj) -> None:
    """A Secret's stringData folded into data, then the size limit of either kind."""
    if kind == "Secret":
        _merge_string_data(obj)
    causes = defaults.data_size_causes(kind, obj)
    if causes:
        raise invalid(kind, "", obj["metadata"]["name"], causes)


def _prepare_namespace(obj: Obj, op: str) -> None:
    meta = obj["metadata"]
    labels = dict(meta.get("labels") or {})
    labels["kubernetes.io/metadata.name"] = meta["name"]
    meta["labels"] = labels
    if op == "CREATE":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}


def _check_priority_class(obj: Obj, old: Obj | None) -> None:
    """A PriorityClass needs a value, and the value is immutable."""
    if "value" not in obj:
        cause = Cause("value", "FieldValueRequired", "Required value")
    elif old is not None and old.get("value") != obj.get("value"):
        cause = Cause("value", "FieldValueForbidden", "Forbidden: may not be changed in an update.")
    else:
        return
    raise invalid("PriorityClass", "scheduling.k8s.io", obj["metadata"]["name"], [cause])


class Clock:
    """Wall clock with cached RFC 3339 second-precision formatting."""

    def __init__(self) -> None:
        self._sec = -1
        self._text = ""

    def now(self) -> float:
        return time.time()

    def stamp(self, at: float | None = None) -> str:
        t = self.now() if at is None else at
        sec = int(t)
        if at is not None:
            return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if sec != self._sec:
            self._sec = sec
            self._text = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._text


def parse_stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


class ListResult:
    __slots__ = ("cont", "items", "remaining", "rv")

    def __init__(self, items: list[Obj], rv: int, cont: str, remaining: int | None) -> None:
        self.items = items
        self.rv = rv
        self.cont = cont
        self.remaining = remaining


def _field_manager_required() -> ApiError:
    """An apply patch without ?fieldManager= (kube-apiserver's answer, word for word)."""
    return ApiError(
        422,
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch",
        details={
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
    )


class Core:
    """Registry + store + semantics. All methods run on the server's event loop thread."""

    def __init__(self, *, store: Store | None = None, seed: int = 0) -> None:
        self.store = store or Store()
        self.clock = Clock()
        self.rand = random.Random(seed)
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.by_kind: dict[tuple[str, str], ResourceType] = {}
        self.groups: dict[str, list[str]] = {}  # group -> versions (preferred first)
        for rt in builtin_types():
            self.register(rt)
        self.lookup = admission.StoreLookup(self.store.get, self._list_all)
        # Called after an object is removed (GC of dependents) - set by the runtime.
        self.after_remove: list[Callable[[str, Obj], None]] = []
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.rt("", "v1", "namespaces"), "", {"metadata": {"name": ns}})
        pcs = self.rt("scheduling.k8s.io", "v1", "priorityclasses")
        for name, value in (
            ("system-cluster-critical", 2000000000),
            ("system-node-critical", 2000001000),
        ):
            self.create(
                pcs,
                "",
                {
                    "metadata": {"name": name},
                    "value": value,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "description": "built-in priority class",
                },
            )

    # ----------------------------------------------------------------- registry
    def register(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self.by_kind[(rt.api_version, rt.kind)] = rt
        versions = self.groups.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
        if rt.plural != "bindings" and not rt.virtual:
            self.store.bucket(rt.storage_key, rt.namespaced)

    def unregister_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self.types if k[0] == group and k[2] == plural]:
            rt = self.types.pop(key)
            self.by_kind.pop((rt.api_version, rt.kind), None)
            versions = self.groups.get(group, [])
            still = any(k[0] == group and k[1] == rt.version for k in self.types)
            if not still and rt.version in versions:
                versions.remove(rt.version)
            if not versions:
                self.groups.pop(group, None)

    def rt_for_key(self, key: str) -> ResourceType | None:
        """Some served version of the group/resource stored under key."""
        for rt in self.types.values():
            if rt.storage_key == key and rt.plural != "bindings" and not rt.virtual:
                return rt
        return None

    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        t = self.types.get((group, version, plural))
        if t is None:
            raise ApiError(
                404,
                "the server could not find the requested resource",
                reason="NotFound",
                details={"group": group, "kind": plural},
            )
        return t

    def _list_all(self, key: str) -> list[Obj]:
        b = self.store.buckets.get(key)
        return list(b.iter(None)) if b else []

    # ----------------------------------------------------------------- reads
    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, ns if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return obj

    def find(self, rt: ResourceType, ns: str, name: str) -> Obj | None:
        return self.store.get(rt.storage_key, ns if rt.namespaced else "", name)

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        *,
        label: Matcher | None = None,
        field: Matcher | None = None,
        limit: int = 0,
        cont: str = "",
    ) -> ListResult:
        """One page of a list. A continuation (`cont`) serves the objects as they were at the
        first page's resourceVersion, which it also answers with (etcd's snapshot semantics),
        so list + watch from that resourceVersion misses nothing changed between pages."""
        bucket = self.store.buckets[rt.storage_key]
        rv = self.store.rv
        start: tuple[str, str] | None = None
        # (namespace, name) -> the object at the snapshot's resourceVersion (None: absent).
        past: dict[tuple[str, str], Obj | None] = {}
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                start = (str(token["ns"]), str(token["name"]))
                rv = int(token["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(400, "continue key is not valid") from exc
            past = self._snapshot_changes(rt, bucket.namespaced, rv)
        changed: dict[str, set[str]] = {}
        for space, name in past:
            changed.setdefault(space, set()).add(name)
        namespaces = [ns] if ns is not None else sorted(set(bucket.objects) | set(changed))
        items: list[Obj] = []
        paging = limit > 0
        remaining = 0
        last: tuple[str, str] | None = None
        for space in namespaces:
            if start is not None and space < start[0]:
                continue
            objs = bucket.objects.get(space) or {}
            if past:
                names: Iterable[str] = sorted(set(objs) | changed.get(space, set()))
            elif not objs:
                continue
            else:
                names = sorted(objs) if paging or start is not None else objs
            for name in names:
                if start is not None and (space, name) <= start:
                    continue
                obj = past[(space, name)] if (space, name) in past else objs.get(name)
                if obj is None:
                    continue
                if label is not None and not label(obj["metadata"].get("labels") or {}):
                    continue
                if field is not None and not field(obj):
                    continue
                if paging and len(items) >= limit:
                    remaining += 1
                    continue
                items.append(obj)
                last = (space, name)
        next_token = ""
        if paging and remaining and last is not None:
            next_token = base64.urlsafe_b64encode(
                json.dumps({"ns": last[0], "name": last[1], "rv": rv}).encode()
            ).decode()
        return ListResult(items, rv, next_token, remaining if next_token else None)

    def _snapshot_changes(
        self, rt: ResourceType, namespaced: bool, rv: int
    ) -> dict[tuple[str, str], Obj | None]:
        """The objects changed since rv, as they were at rv (None: did not exist then)."""
        events = self.store.events_since(rt.storage_key, rv)
        if events is None:
            raise ApiError(
                410,
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
                reason="Expired",
            )
        past: dict[tuple[str, str], Obj | None] = {}
        for ev in events:
            meta = ev.obj["metadata"]
            key = (meta.get("namespace", "") if namespaced else "", str(meta["name"]))
            if key not in past:
                past[key] = None if ev.type == "ADDED" else (ev.old or ev.obj)
        return past

    def ns_check(self, rt: ResourceType, ns: str, *, creating: bool) -> None:
        if not rt.namespaced:
            return
        nso = self.store.get("namespaces", "", ns)
        if nso is None:
            raise not_found("", "namespaces", ns)
        if creating and nso["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                f"unable to create new content in namespace {ns} because it is being terminated",
                details={
                    "name": ns,
                    "kind": "namespaces",
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {ns} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    # ----------------------------------------------------------------- create
    def _check_kind(self, rt: ResourceType, body: Obj) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was not a JSON object")
        kind = body.get("kind")
        api_version = body.get("apiVersion")
        if kind is not None and kind != rt.kind:
            raise ApiError(400, f"the kind {kind!r} of the body does not match {rt.kind!r}")
        if api_version is not None and api_version != rt.api_version:
            other = self.by_kind.get((str(api_version), str(kind)))
            if other is None or other.storage_key != rt.storage_key:
                raise ApiError(
                    400,
                    f"the API version {api_version!r} of the body does not match "
                    f"{rt.api_version!r}",
                )

    def create(self, rt: ResourceType, ns: str, body: Obj, *, dry_run: bool = False) -> Obj:
        self._check_kind(rt, body)
        obj: Obj = dict(body)
        meta = dict(obj.get("metadata") or {})
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the "
                    "namespace sent on the request",
                )
            ns = ns or body_ns or "default"
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        name = self._create_name(rt, ns, meta)
        self.ns_check(rt, ns, creating=True)
        if self.find(rt, ns, str(name)) is not None:
            raise already_exists(rt.group, rt.plural, str(name))
        sent_rv = meta.get("resourceVersion")
        for k in (
            "resourceVersion",
            "uid",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.clock.stamp()
        meta["generation"] = 1
        obj["metadata"] = meta
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if rt.status_subresource and rt.kind not in _KEEP_STATUS_ON_CREATE:
            obj.pop("status", None)
        obj = self._prepare(rt, obj, None, "CREATE")
        causes = validation.object_meta_causes(obj["metadata"], kind=rt.kind)
        if causes:
            raise invalid(rt.kind, rt.group, str(name), causes)
        if dry_run:
            return obj
        if sent_rv:
            # etcd3's store.Create, after validation (a dry run never reaches it)
            raise ApiError(
                500, "resourceVersion should not be set on objects to be created", reason=""
            )
        _check_size(obj)
        stored = self.store.commit(rt.storage_key, obj, None)
        if rt.kind == "CustomResourceDefinition":
            self._crd_changed(stored)
        return stored

    def _create_name(self, rt: ResourceType, ns: str, meta: Obj) -> str:
        """The name of an object to create: its own or one made from generateName (set in
        meta), checked against the kind's name rule."""
        name = meta.get("name")
        if not name:
            gen = meta.get("generateName")
            if not gen:
                raise invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [
                        Cause(
                            "metadata.name",
                            "FieldValueRequired",
                            "name or generateName is required",
                        )
                    ],
                )
            # names.SimpleNameGenerator: the prefix is cut to 63 - 5 characters
            base = str(gen)[:58]
            name = base + defaults.generate_suffix(self.rand)
            while self.find(rt, ns, name) is not None:
                name = base + defaults.generate_suffix(self.rand)
            meta["name"] = name
        causes = defaults.name_causes(
            str(name),
            "label"
            if rt.name_rule == "label"
            else ("path" if rt.crd or rt.kind in ("Event", "Lease") else rt.name_rule),
        )
        if causes:
            raise invalid(rt.kind, rt.group, str(name), causes)
        return str(name)

    # ----------------------------------------------------------------- kind hooks
    def _prepare(self, rt: ResourceType, obj: Obj, old: Obj | None, op: str) -> Obj:
        """Defaulting, schema and admission for a write; obj is private to this request."""
        self._prepare_kind(rt, obj, old, op)
        if rt.crd and rt.schema:
            obj = copy.deepcopy(obj) if old is not None else obj
            schema.prune_and_default(obj, rt.schema)
        if (rt.group, rt.kind) in admission.TEPHRA_KINDS:
            result = admission.admit(
                group=rt.group, kind=rt.kind, operation=op, obj=obj, old=old, lookup=self.lookup
            )
            if result is not None:
                obj = result
        if rt.crd and rt.schema:
            causes = schema.validate(obj, rt.schema)
            if causes:
                raise invalid(rt.kind, rt.group, obj["metadata"]["name"], causes)
        return obj

    def _prepare_kind(self, rt: ResourceType, obj: Obj, old: Obj | None, op: str) -> None:
        """The built-in kind's own defaulting and validation, in place."""
        kind, group = rt.kind, rt.group
        if group == "" and kind == "Pod":
            self._prepare_pod(obj, old, op)
        elif group == "" and kind in ("Secret", "ConfigMap"):
            _prepare_data(kind, obj)
        elif group == "" and kind == "Service":
            obj["spec"] = copy.deepcopy(obj.get("spec") or {})
            defaults.service_defaults(obj)
        elif group == "" and kind == "Namespace":
            _prepare_namespace(obj, op)
        elif group == "" and kind == "Node":
            if op == "CREATE":
                obj["status"] = copy.deepcopy(obj.get("status") or {})
                defaults.node_defaults(obj)
        elif group == "scheduling.k8s.io" and kind == "PriorityClass":
            _check_priority_class(obj, old)
        elif group == "apiextensions.k8s.io" and kind == "CustomResourceDefinition":
            self._validate_crd(obj, old)
        elif (group, kind) in validation.MICRO_TIME_FIELDS:
            validation.check_micro_times(group, kind, rt.api_version, obj)

    def _prepare_pod(self, obj: Obj, old: Obj | None, op: str) -> None:
        if op == "CREATE":
            # create() owns its body (decoded JSON or a fresh copy made by the caller)
            obj["spec"] = dict(obj.get("spec") or {})
            defaults.default_pod(obj)
            ns_obj = self.store.get("namespaces", "", obj["metadata"].get("namespace", ""))
            admission.inject_gang(obj, ns_obj)
            self._resolve_priority(obj)
        causes = defaults.validate_pod(obj)
        if causes:
            raise invalid("Pod", "", obj["metadata"]["name"], causes)
        if old is not None:
            self._pod_update(obj, old)

    def _resolve_priority(self, pod: Obj) -> None:
        spec = pod["spec"]
        pcname = spec.get("priorityClassName")
        pcs = self.store.buckets["priorityclasses.scheduling.k8s.io"]
        if pcname:
            pc = pcs.objects.get("", {}).get(pcname)
            if pc is None:
                raise ApiError(
                    403,
                    f'pods "{pod["metadata"]["name"]}" is forbidden: no '
                    f"PriorityClass with name {pcname} was found",
                )
        else:
            pc = next((p for p in pcs.iter(None) if p.get("globalDefault")), None)
            if pc is not None:
                spec["priorityClassName"] = pc["metadata"]["name"]
        value = int(pc.get("value", 0)) if pc is not None else 0
        if "priority" in spec and spec["priority"] != value and pcname:
            raise ApiError(
                403,
                "the integer value of priority must not be provided in pod spec; "
                "priority admission controller computed "
                f"{value} from the given PriorityClass name",
            )
        spec["priority"] = value
        if pc is not None and pc.get("preemptionPolicy"):
            spec["preemptionPolicy"] = pc["preemptionPolicy"]

    def _pod_update(self, pod: Obj, old: Obj) -> None:
        """Defaulting and ValidatePodUpdate for a write of the pod itself (the binding and
        status subresources do not come here): the spec is immutable but for a few fields."""
        old_spec = old.get("spec") or {}
        spec = pod.get("spec")
        if spec is old_spec or spec == old_spec:
            return
        spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
        defaults.default_pod_spec(spec)
        defaults.default_tolerations(spec)
        # the Priority admission plugin keeps what it set on create
        for key in ("priority", "preemptionPolicy"):
            if key not in spec and key in old_spec:
                spec[key] = old_spec[key]
        pod["spec"] = spec
        causes = defaults.pod_update_causes(spec, old_spec)
        if causes:
            raise invalid("Pod", "", pod["metadata"]["name"], causes)

    def _validate_crd(self, crd: Obj, old: Obj | None) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group", "")
        name = crd["metadata"]["name"]
        causes: list[Cause] = []
        if not group:
            causes.append(Cause("spec.group", "FieldValueRequired", "Required value"))
        if not names.get("plural"):
            causes.append(Cause("spec.names.plural", "FieldValueRequired", "Required value"))
        if not names.get("kind"):
            causes.append(Cause("spec.names.kind", "FieldValueRequired", "Required value"))
        if not spec.get("versions"):
            causes.append(Cause("spec.versions", "FieldValueRequired", "Required value"))
        if names.get("plural") and group and name != f"{names['plural']}.{group}":
            causes.append(
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
        if causes:
            raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)
        # A CRD is established at once: the sandbox has no separate naming controller.
        conds = [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": self.clock.stamp(),
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": self.clock.stamp(),
            },
        ]
        crd["status"] = {
            "conditions": conds,
            "acceptedNames": copy.deepcopy(names),
            "storedVersions": [
                v.get("name") for v in spec.get("versions") or [] if v.get("storage")
            ],
        }

    def _crd_changed(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group = spec.get("group", "")
        plural = (spec.get("names") or {}).get("plural", "")
        self.unregister_group_resource(group, plural)
        for rt in crd_types(crd):
            self.register(rt)

    def _crd_removed(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group = spec.get("group", "")
        plural = (spec.get("names") or {}).get("plural", "")
        key = f"{plural}.{group}"
        bucket = self.store.buckets.get(key)
        if bucket is not None:
            for obj in list(bucket.iter(None)):
                self.store.commit(key, dict(obj), obj, deleted=True)
        self.unregister_group_resource(group, plural)

    # ----------------------------------------------------------------- update
    def update(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> Obj:
        self._check_kind(rt, body)
        old = self.find(rt, ns, name)
        if old is None:
            if rt.allow_create_on_update and not subresource:
                # create on update: GuaranteedUpdate stores it whatever resourceVersion it has
                body = dict(body)
                meta = {**(body.get("metadata") or {}), "name": name}
                meta.pop("resourceVersion", None)
                body["metadata"] = meta
                return self.create(rt, ns, body, dry_run=dry_run)
            raise not_found(rt.group, rt.plural, name)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiError(
                400,
                f"the name of the object ({meta.get('name')}) does not match the "
                f"name on the URL ({name})",
            )
        want_uid = meta.get("uid")
        if want_uid and want_uid != old["metadata"].get("uid"):
            # the body's uid is a precondition (rest.DefaultUpdatedObjectInfo.Preconditions)
            raise conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {want_uid}, "
                f"UID in object meta: {old['metadata'].get('uid')}",
            )
        want_rv = meta.get("resourceVersion")
        if want_rv:
            if want_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name)
        elif rt.crd:
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    Cause(
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )
        return self.write(
            rt, old, dict(body), subresource=subresource, dry_run=dry_run, manager=manager
        )

    def write(
        self,
        rt: ResourceType,
        old: Obj,
        obj: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
        track: bool = True,
    ) -> Obj:
        """Store obj as the new version of old (server fields are taken from old)."""
        old_meta = old["metadata"]
        _check_uid_kept(rt, obj, old_meta)
        obj = _status_body(old, obj) if subresource == "status" else _update_body(rt, old, obj)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if subresource == "status":
            obj = self._checked_status(rt, obj)
        else:
            obj = self._checked_update(rt, obj, old)
        obj["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        sent = obj["metadata"].get("managedFields", [])
        if sent in ([], [{}]):
            obj["metadata"].pop("managedFields", None)  # [{}] clears them
        if track and sent != [{}] and old_meta.get("managedFields"):
            self._track_update(rt, old, obj, manager, subresource)
        if obj == old:
            return old
        if dry_run:
            return obj
        if self._removes_now(rt, obj):
            return self._remove(rt, obj)
        _check_size(obj)
        stored = self.store.commit(rt.storage_key, obj, old)
        if rt.kind == "CustomResourceDefinition":
            self._crd_changed(stored)
        return stored

    def _track_update(
        self, rt: ResourceType, old: Obj, obj: Obj, manager: str, subresource: str
    ) -> None:
        """managedFields of an ordinary write to an object that has them (see `managed`): a
        body without them keeps old's, a body with other ones stores those."""
        sent = obj["metadata"].get("managedFields")
        if sent and sent != old["metadata"]["managedFields"]:
            return
        managed.track_update(
            old,
            obj,
            manager=manager or DEFAULT_MANAGER,
            api_version=rt.api_version,
            stamp=self.clock.stamp(),
            subresource=subresource,
            status_subresource=rt.status_subresource,
            keyed=not rt.crd,
        )

    def _checked_update(self, rt: ResourceType, obj: Obj, old: Obj) -> Obj:
        """Admission and metadata validation of a write of the object itself; a changed spec
        bumps the generation."""
        obj = self._prepare(rt, obj, old, "UPDATE")
        meta, old_meta = obj["metadata"], old["metadata"]
        causes = validation.object_meta_causes(meta, kind=rt.kind)
        causes += validation.object_meta_update_causes(meta, old_meta)
        if causes:
            raise invalid(rt.kind, rt.group, meta["name"], causes)
        if self._spec_changed(rt, obj, old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return obj

    @staticmethod
    def _checked_status(rt: ResourceType, obj: Obj) -> Obj:
        """Validation of a write through /status: a pod's status rules, a CRD's schema."""
        if rt.group == "" and rt.kind == "Pod":
            causes = defaults.pod_status_causes(obj.get("status") or {})
            if causes:
                raise invalid(rt.kind, rt.group, obj["metadata"]["name"], causes)
        elif rt.crd and rt.schema:
            obj = copy.deepcopy(obj)
            schema.prune_and_default(obj, rt.schema)
            causes = schema.validate(obj, rt.schema)
            if causes:
                raise invalid(rt.kind, rt.group, obj["metadata"]["name"], causes)
        return obj

    def _removes_now(self, rt: ResourceType, obj: Obj) -> bool:
        """A write that leaves a deleted object without finalizers removes it, but for a
        pod still running on its node and a namespace (its controller finishes it)."""
        meta = obj["metadata"]
        return bool(
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not (rt.kind == "Pod" and rt.group == "" and self._pod_running(obj))
            and rt.kind != "Namespace"
        )

    @staticmethod
    def _pod_running(pod: Obj) -> bool:
        return (
            bool((pod.get("spec") or {}).get("nodeName"))
            and ((pod.get("status") or {}).get("phase") not in _TERMINAL)
            and int(pod["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
        )

    @staticmethod
    def _spec_changed(rt: ResourceType, new: Obj, old: Obj) -> bool:
        skip = ("metadata", "status") if rt.status_subresource else ("metadata",)
        keys = (set(new) | set(old)) - set(skip) - {"apiVersion", "kind"}
        return any(new.get(k) != old.get(k) for k in keys)

    # ----------------------------------------------------------------- patch
    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool = False,
        agent_manager: str = "",
    ) -> tuple[Obj, bool]:
        """Apply a patch; returns (object, created). agent_manager names the writer of an
        ordinary patch sent without fieldManager (kube-apiserver: the user agent's prefix)."""
        ctype = decode.media_type(content_type)
        if ctype not in _PATCH_TYPES:
            raise decode.unsupported_media_type(_PATCH_TYPES[1:])
        if ctype == APPLY_PATCH:
            if not field_manager:
                raise _field_manager_required()
            return self._apply(rt, ns, name, raw, subresource, dry_run, field_manager, force)
        old = self.get(rt, ns, name)
        new = self._patched(rt, old, ctype, decode.decode_json(raw or b"null", "the patch"))
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.plural, name)
        manager = field_manager or agent_manager
        written = self.write(
            rt, old, new, subresource=subresource, dry_run=dry_run, manager=manager
        )
        return written, False

    @staticmethod
    def _patched(rt: ResourceType, old: Obj, ctype: str, patch_body: Any) -> Obj:
        """``old`` with an ordinary patch (merge, JSON or strategic merge) applied."""
        if ctype == MERGE_PATCH or ctype == "application/json":
            if not isinstance(patch_body, dict):
                raise ApiError(400, "merge patch must be a JSON object")
            new = apply_merge_patch(copy.deepcopy(old), patch_body)
        elif ctype == JSON_PATCH:
            new = json_patch(old, patch_body)
        else:  # STRATEGIC_PATCH
            if rt.crd:
                raise ApiError(
                    415,
                    "strategic merge patch is not supported for custom "
                    "resources; use a merge patch or a JSON patch",
                )
            if not isinstance(patch_body, dict):
                raise ApiError(400, "strategic merge patch must be a JSON object")
            new = strategic_merge_patch(copy.deepcopy(old), patch_body)
        if not isinstance(new, dict):
            raise ApiError(422, "the patch did not produce an object")
        return new

    def _apply(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        raw: bytes,
        subresource: str,
        dry_run: bool,
        manager: str,
        force: bool,
    ) -> tuple[Obj, bool]:
        """Server-side apply by ``manager`` (managed.py keeps managedFields)."""
        applied = decode.decode_yaml(raw or b"{}")
        if not isinstance(applied, dict):
            raise ApiError(400, "apply body must be an object")
        old = self.find(rt, ns, name)
        stamp = self.clock.stamp()
        if old is None:
            if subresource:
                raise not_found(rt.group, rt.plural, name)
            meta = {**(applied.get("metadata") or {}), "name": name}
            meta.pop("resourceVersion", None)
            applied["metadata"] = meta
            config = managed.stripped(
                applied, subresource="", status_subresource=rt.status_subresource
            )
            fs = managed.field_set(config, keyed=not rt.crd)
            body = {**applied, "metadata": dict(meta)}
            if fs:
                entry = managed.entry(manager, "Apply", rt.api_version, stamp, fs, "")
                body["metadata"]["managedFields"] = [entry]
            return self.create(rt, ns, body, dry_run=dry_run), True
        self._check_kind(rt, applied)
        merged = (apply_merge_patch if rt.crd else strategic_merge_patch)(
            copy.deepcopy(old), applied
        )
        merged = managed.apply(
            old,
            merged,
            applied,
            manager=manager,
            api_version=rt.api_version,
            stamp=stamp,
            subresource=subresource,
            status_subresource=rt.status_subresource,
            keyed=not rt.crd,
            force=force,
        )
        written = self.write(rt, old, merged, subresource=subresource, dry_run=dry_run, track=False)
        return written, False

    # ----------------------------------------------------------------- delete
    def delete(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        *,
        grace: int | None = None,
        propagation: str | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        old = self.get(rt, ns, name)
        if preconditions:
            _check_delete_preconditions(rt, name, old["metadata"], preconditions)
        if (rt.group, rt.kind) in admission.TEPHRA_KINDS and rt.kind != "Pod":
            admission.admit(
                group=rt.group,
                kind=rt.kind,
                operation="DELETE",
                obj=old,
                old=old,
                lookup=self.lookup,
            )
        if dry_run:
            return old
        if propagation is None and (rt.group, rt.version, rt.kind) in _ORPHAN_BY_DEFAULT:
            propagation = "Orphan"  # the kind's DefaultGarbageCollectionPolicy
        finalizers = _deletion_finalizers(old["metadata"], propagation)
        if rt.kind == "Pod" and rt.group == "":
            terminating = self._terminate_pod(rt, old, grace, finalizers)
            if terminating is not None:
                return terminating
        if rt.kind == "Namespace" and rt.group == "":
            return self._terminate_namespace(rt, old)
        if finalizers:
            return self._finalize(rt, old, finalizers)
        new_meta = dict(old["metadata"])
        if new_meta.get("deletionTimestamp") is None:
            new_meta["deletionTimestamp"] = self.clock.stamp()
            new_meta["deletionGracePeriodSeconds"] = 0
        return self._remove(rt, {**old, "metadata": new_meta})

    def _terminate_pod(
        self, rt: ResourceType, old: Obj, grace: int | None, finalizers: Sequence[str]
    ) -> Obj | None:
        """A graceful delete of a pod bound to a node: it is marked, not removed (the kubelet
        finishes it). None when the grace comes to 0 and the pod goes as any object."""
        spec = old.get("spec") or {}
        if grace is None:
            grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        if not spec.get("nodeName") or (old.get("status") or {}).get("phase") in _TERMINAL:
            grace = 0
        if grace <= 0:
            return None
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if current is not None and int(current) <= grace:
            return old  # already terminating with a shorter grace
        new_meta = dict(meta)
        _deletion_generation(meta, new_meta)
        new_meta["deletionTimestamp"] = self.clock.stamp(self.clock.now() + grace)
        new_meta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            new_meta["finalizers"] = finalizers
        return self.store.commit(rt.storage_key, {**old, "metadata": new_meta}, old)

    def _terminate_namespace(self, rt: ResourceType, old: Obj) -> Obj:
        """A namespace is marked Terminating; finish_namespace removes it once empty."""
        meta = old["metadata"]
        if meta.get("deletionTimestamp"):
            return old
        new_meta = dict(meta)
        new_meta["deletionTimestamp"] = self.clock.stamp()
        new_meta["deletionGracePeriodSeconds"] = 0
        obj = {**old, "metadata": new_meta, "status": {"phase": "Terminating"}}
        return self.store.commit(rt.storage_key, obj, old)

    def _finalize(self, rt: ResourceType, old: Obj, finalizers: Sequence[str]) -> Obj:
        """An object with finalizers is marked deleted and kept until they are removed."""
        meta = old["metadata"]
        unchanged = finalizers == list(meta.get("finalizers") or [])
        if (
            meta.get("deletionTimestamp")
            and unchanged
            and meta.get("deletionGracePeriodSeconds") in (None, 0)
        ):
            return old
        new_meta = dict(meta)
        _deletion_generation(meta, new_meta)
        new_meta.setdefault("deletionTimestamp", self.clock.stamp())
        new_meta["deletionGracePeriodSeconds"] = 0
        new_meta["finalizers"] = finalizers
        return self.store.commit(rt.storage_key, {**old, "metadata": new_meta}, old)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        key = rt.storage_key
        meta = obj["metadata"]
        old = self.store.get(key, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        stored = self.store.commit(key, obj, old, deleted=True)
        if rt.kind == "CustomResourceDefinition":
            self._crd_removed(stored)
        for hook in self.after_remove:
            hook(key, stored)
        return stored

    def finish_namespace(self, name: str) -> None:
        """Remove a terminating namespace once it holds nothing."""
        nsrt = self.rt("", "v1", "namespaces")
        obj = self.find(nsrt, "", name)
        if obj is not None and obj["metadata"].get("deletionTimestamp"):
            self._remove(nsrt, obj)

    # ----------------------------------------------------------------- pods
    def bind(self, ns: str, name: str, binding: Obj) -> None:
        pods = self.rt("", "v1", "pods")
        pod = self.get(pods, ns, name)
        target = (binding.get("target") or {}).get("name")
        if not target:
            raise invalid(
                "Binding", "", name, [Cause("target.name", "FieldValueRequired", "Required value")]
            )
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            raise conflict(
                "", "pods", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise conflict(
                "", "pods", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        want_uid = (binding.get("metadata") or {}).get("uid")
        if want_uid and want_uid != pod["metadata"].get("uid"):
            raise conflict("", "pods", name, "Precondition failed: UID mismatch")
        status = dict(pod.get("status") or {})
        conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.clock.stamp(),
            }
        )
        status["conditions"] = conds
        status.pop("nominatedNodeName", None)
        new = {**pod, "spec": {**spec, "nodeName": target}, "status": status}
        annotations = (binding.get("metadata") or {}).get("annotations")
        if annotations:
            meta = dict(pod["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            new["metadata"] = meta
        self.store.commit(pods.storage_key, new, pod)

    def evict(self, ns: str, name: str, eviction: Obj) -> None:
        pods = self.rt("", "v1", "pods")
        pod = self.get(pods, ns, name)
        opts = eviction.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        # canIgnorePDB: a pod not running yet, finished, or already terminating goes at once
        if phase not in (*_TERMINAL, "Pending") and not pod["metadata"].get("deletionTimestamp"):
            self._check_pdb(ns, pod)
        self.delete(
            pods,
            ns,
            name,
            grace=opts.get("gracePeriodSeconds"),
            propagation=opts.get("propagationPolicy"),
            preconditions=opts.get("preconditions"),
        )

    def _check_pdb(self, ns: str, pod: Obj) -> None:
        bucket = self.store.buckets["poddisruptionbudgets.policy"]
        labels = pod["metadata"].get("labels") or {}
        matching: list[tuple[Obj, Matcher]] = []
        for pdb in bucket.iter(ns):
            raw = (pdb.get("spec") or {}).get("selector")
            if raw is None:
                continue  # policy/v1: a null selector selects no pod
            # ... and an empty one every pod of the namespace
            sel = selector_from_label_selector(raw) or _everything
            if sel(labels):
                matching.append((pdb, sel))
        if len(matching) > 1:
            raise ApiError(  # a plain error in kube-apiserver's eviction REST: 500, no reason
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
                reason="",
            )
        for pdb, sel in matching:
            spec = pdb.get("spec") or {}
            members = [
                p
                for p in self.store.buckets["pods"].iter(ns)
                if sel(p["metadata"].get("labels") or {})
            ]
            healthy = sum(
                1 for p in members if _pod_ready(p) and not p["metadata"].get("deletionTimestamp")
            )
            expected = len(members)
            if "minAvailable" in spec:
                need = _int_or_percent(spec["minAvailable"], expected, round_up=True)
            else:
                need = expected - _int_or_percent(
                    spec.get("maxUnavailable", 0), expected, round_up=True
                )
            if healthy - (1 if _pod_ready(pod) else 0) < need:
                raise ApiError(
                    429,
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    reason="TooManyRequests",
                    details={
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget "
                                f"{pdb['metadata']['name']} needs {need} "
                                f"healthy pods and has {healthy} currently",
                            }
                        ]
                    },
                )

    # ----------------------------------------------------------------- scale
    def get_scale(self, rt: ResourceType, ns: str, name: str) -> Obj:
        if rt.scale is None:
            raise ApiError(404, "the server could not find the requested resource")
        obj = self.get(rt, ns, name)
        spec_path, status_path, sel_path = rt.scale
        replicas = _path(obj, spec_path) or 0
        out: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: obj["metadata"][k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in obj["metadata"]
            },
            "spec": {"replicas": replicas},
            "status": {"replicas": _path(obj, status_path) or 0},
        }
        selector = _path(obj, sel_path) if sel_path else None
        if not selector and isinstance(_path(obj, "spec.selector"), dict):
            sel = _path(obj, "spec.selector") or {}
            ml = sel.get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(ml.items()))
        if selector:
            out["status"]["selector"] = selector
        return out

    def set_scale(self, rt: ResourceType, ns: str, name: str, replicas: int) -> Obj:
        if rt.scale is None:
            raise ApiError(404, "the server could not find the requested resource")
        old = self.get(rt, ns, name)
        new = copy.deepcopy(old)
        parts = rt.scale[0].split(".")
        cur = new
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = int(replicas)
        self.write(rt, old, new)
        return self.get_scale(rt, ns, name)


def _path(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _check_uid_kept(rt: ResourceType, obj: Obj, old_meta: Obj) -> None:
    """A write naming another uid fails (through /status too: it must not land there)."""
    uid = (obj.get("metadata") or {}).get("uid")
    if uid and uid != old_meta.get("uid"):
        raise invalid(
            rt.kind,
            rt.group,
            old_meta["name"],
            [
                Cause(
                    "metadata.uid",
                    "FieldValueInvalid",
                    f'Invalid value: "{uid}": field is immutable',
                )
            ],
        )


_SERVER_META = (
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def _status_body(old: Obj, obj: Obj) -> Obj:
    """Through /status only the status stanza changes: the rest, metadata too, is old's."""
    new = {k: v for k, v in old.items() if k != "status"}
    if "status" in obj:
        new["status"] = obj["status"]
    new["metadata"] = dict(old["metadata"])
    return new


def _update_body(rt: ResourceType, old: Obj, obj: Obj) -> Obj:
    """obj with old's server-owned metadata, and old's status where /status owns it."""
    old_meta = old["metadata"]
    meta = dict(obj.get("metadata") or {})
    for k in _SERVER_META:
        if k in old_meta:
            meta[k] = old_meta[k]
        else:
            meta.pop(k, None)
    if rt.status_subresource:
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
    obj["metadata"] = meta
    return obj


def _check_delete_preconditions(
    rt: ResourceType, name: str, meta: Obj, preconditions: dict[str, Any]
) -> None:
    if preconditions.get("uid") and preconditions["uid"] != meta.get("uid"):
        raise conflict(
            rt.group,
            rt.plural,
            name,
            f"Precondition failed: UID in precondition: "
            f"{preconditions['uid']}, UID in object meta: {meta.get('uid')}",
        )
    want = preconditions.get("resourceVersion")
    if want and want != meta.get("resourceVersion"):
        raise conflict(
            rt.group,
            rt.plural,
            name,
            f"Precondition failed: ResourceVersion in precondition: {want}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _deletion_finalizers(meta: Obj, propagation: str | None) -> list[str]:
    """The object's finalizers plus the one the propagation policy asks for."""
    finalizers = list(meta.get("finalizers") or [])
    if propagation == "Foreground" and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    elif propagation == "Orphan" and "orphan" not in finalizers:
        finalizers.append("orphan")
    return finalizers


def _deletion_generation(meta: Obj, new_meta: Obj) -> None:
    """rest.BeforeDelete / markAsDeleting: an object that starts its deletion and stays (graceful
    deletion, finalizers) gets a new generation, when it has one."""
    if not meta.get("deletionTimestamp") and int(meta.get("generation") or 0) > 0:
        new_meta["generation"] = int(meta["generation"]) + 1


def _everything(_labels: Any) -> bool:
    return True


def _pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        q, r = divmod(pct * total, 100)
        return q + (1 if r and round_up else 0)
    return int(value)
