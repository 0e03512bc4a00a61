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

The rules themselves live beside it, one concept each: `kind_rules` (each kind's defaulting and
validation), `updates` (an update's body), `patch`, `deletion`, `listing`,
`pod_subresources` (binding, eviction) and `scale`.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.sandbox import admission, decode, defaults, managed, schema, validation
from batch.sandbox.clock import Clock
from batch.sandbox.deletion import (
    ORPHAN_BY_DEFAULT,
    check_delete_preconditions,
    deletion_finalizers,
    finalize,
    terminate_namespace,
    terminate_pod,
)
from batch.sandbox.errors import (
    ApiError,
    Cause,
    already_exists,
    conflict,
    invalid,
    not_found,
)
from batch.sandbox.kind_rules import TERMINAL, checked_status, prepare_kind
from batch.sandbox.listing import ListResult, list_page
from batch.sandbox.meta import ResourceType, builtin_types, crd_types
from batch.sandbox.patch import (
    APPLY_PATCH,
    PATCH_TYPES,
    field_manager_required,
    patched,
    strategic_merge_patch,
)
from batch.sandbox.pod_subresources import bound, check_pdb
from batch.sandbox.scale import no_scale, scale_of, scaled
from batch.sandbox.selectors import Matcher
from batch.sandbox.store import Obj, Store, dumps
from batch.sandbox.updates import (
    check_uid_kept,
    removes_now,
    spec_changed,
    status_body,
    update_body,
)

# The manager of an ordinary write with neither fieldManager nor user agent (in-process callers).
DEFAULT_MANAGER = "sandbox"

_KEEP_STATUS_ON_CREATE = frozenset({"Node", "Service", "PersistentVolume", "Event", "Namespace"})


def _check_size(obj: Obj) -> None:
    """etcd refuses a value over its request limit; the sandbox stores none either."""
    if len(dumps(obj)) > decode.MAX_OBJECT_BYTES:
        raise decode.object_too_large()


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
        """One page of a list (see `listing.list_page`)."""
        return list_page(self.store, rt, ns, label=label, field=field, limit=limit, cont=cont)

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
        prepare_kind(rt, obj, old, op, store=self.store, clock=self.clock)
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
        check_uid_kept(rt, obj, old_meta)
        obj = status_body(old, obj) if subresource == "status" else update_body(rt, old, obj)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if subresource == "status":
            obj = checked_status(rt, obj)
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
        if removes_now(rt, obj):
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
        if spec_changed(rt, obj, old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return obj

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
        if ctype not in PATCH_TYPES:
            raise decode.unsupported_media_type(PATCH_TYPES[1:])
        if ctype == APPLY_PATCH:
            if not field_manager:
                raise field_manager_required()
            return self._apply(rt, ns, name, raw, subresource, dry_run, field_manager, force)
        old = self.get(rt, ns, name)
        new = patched(rt, old, ctype, decode.decode_json(raw or b"null", "the patch"))
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.plural, name)
        manager = field_manager or agent_manager
        written = self.write(
            rt, old, new, subresource=subresource, dry_run=dry_run, manager=manager
        )
        return written, False

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
            check_delete_preconditions(rt, name, old["metadata"], preconditions)
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
        if propagation is None and (rt.group, rt.version, rt.kind) in ORPHAN_BY_DEFAULT:
            propagation = "Orphan"  # the kind's DefaultGarbageCollectionPolicy
        finalizers = deletion_finalizers(old["metadata"], propagation)
        if rt.kind == "Pod" and rt.group == "":
            terminating = terminate_pod(self.store, self.clock, rt, old, grace, finalizers)
            if terminating is not None:
                return terminating
        if rt.kind == "Namespace" and rt.group == "":
            return terminate_namespace(self.store, self.clock, rt, old)
        if finalizers:
            return finalize(self.store, self.clock, rt, old, finalizers)
        new_meta = dict(old["metadata"])
        if new_meta.get("deletionTimestamp") is None:
            new_meta["deletionTimestamp"] = self.clock.stamp()
            new_meta["deletionGracePeriodSeconds"] = 0
        return self._remove(rt, {**old, "metadata": new_meta})

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
        self.store.commit(pods.storage_key, bound(pod, name, binding, self.clock.stamp()), pod)

    def evict(self, ns: str, name: str, eviction: Obj) -> None:
        pods = self.rt("", "v1", "pods")
        pod = self.get(pods, ns, name)
        opts = eviction.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        # canIgnorePDB: a pod not running yet, finished, or already terminating goes at once
        if phase not in (*TERMINAL, "Pending") and not pod["metadata"].get("deletionTimestamp"):
            check_pdb(self.store, ns, pod)
        self.delete(
            pods,
            ns,
            name,
            grace=opts.get("gracePeriodSeconds"),
            propagation=opts.get("propagationPolicy"),
            preconditions=opts.get("preconditions"),
        )

    # ----------------------------------------------------------------- scale
    def get_scale(self, rt: ResourceType, ns: str, name: str) -> Obj:
        if rt.scale is None:
            raise no_scale()
        return scale_of(rt, self.get(rt, ns, name))

    def set_scale(self, rt: ResourceType, ns: str, name: str, replicas: int) -> Obj:
        if rt.scale is None:
            raise no_scale()
        old = self.get(rt, ns, name)
        self.write(rt, old, scaled(rt, old, replicas))
        return self.get_scale(rt, ns, name)
