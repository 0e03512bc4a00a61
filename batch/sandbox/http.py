"""The HTTP face of the sandbox: Kubernetes REST paths, discovery, watch streams, Tables.

One catch-all aiohttp handler parses `/api/v1/...` and `/apis/<group>/<version>/...` paths itself
(faster and simpler than hundreds of routes), maps the verb to a `Core` call and renders the
answer as JSON, a `Table` when kubectl asks for one, or a watch stream of newline-delimited events.
Protobuf bodies are refused with 415, so clients fall back to JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from batch.sandbox import decode, schema, tables
from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError, success_status
from batch.sandbox.faults import Faults
from batch.sandbox.kubeconfig import ADMIN_GROUPS, ADMIN_USER
from batch.sandbox.meta import ResourceType
from batch.sandbox.openapi import OpenAPI, builtin_structural
from batch.sandbox.protobuf import MEDIA_TYPE, decode_protobuf
from batch.sandbox.selectors import parse_field_selector, parse_label_selector
from batch.sandbox.store import Obj, Watcher, dumps, event_line
from batch.sandbox.wire import Request, Response, Stream

log = logging.getLogger(__name__)

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-tephra-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_JSON = "application/json"
_BATCH = 500  # events per write while a watch catches up
_PROTOBUF = MEDIA_TYPE


def _is_admin(spec: Any) -> bool:
    """Whether an access review's subject is the sandbox's one user (by name or by group)."""
    if not isinstance(spec, dict):
        return False
    groups = spec.get("groups")
    groups = groups if isinstance(groups, list) else []
    return spec.get("user") == ADMIN_USER or ADMIN_GROUPS[0] in groups


def _json_response(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status=status)


def _unscheduled(rt: ResourceType, obj: Obj) -> list[str]:
    """A warning for a pod nothing in the sandbox will ever bind: it runs no kube-scheduler,
    and a pod for `default-scheduler` (the default) waited for ever without a hint."""
    if rt.kind != "Pod" or rt.group != "":
        return []
    spec = obj.get("spec") or {}
    if spec.get("nodeName") or spec.get("schedulerName") != "default-scheduler":
        return []
    return [
        f"pod {obj['metadata'].get('name')} is for default-scheduler, which the tephra sandbox "
        "does not run: it stays Pending; set spec.schedulerName: volcano to have Tephra "
        "schedule it"
    ]


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _emulated_log(pod: Obj, container: str | None) -> bytes:
    """What ``kubectl logs`` shows: the sandbox runs no container, so there is no output."""
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    which = container or (names[0] if names else "?")
    name = pod["metadata"].get("name")
    return (
        f"(tephra sandbox) container {which} of pod {name} is emulated: the node emulator runs "
        "no process, so it writes no logs (its run time and exit code come from the pod's "
        "sandbox.tephra.io/run-seconds and sandbox.tephra.io/exit-code annotations)\n"
    ).encode()


def _warn(resp: Response, warnings: list[str]) -> Response:
    """``resp`` with kube-apiserver's ``Warning`` header (code 299) for each warning."""
    if warnings:
        values = ", ".join('299 - "{}"'.format(w.replace('"', '\\"')) for w in warnings)
        resp.headers = {**(resp.headers or {}), "Warning": values}
    return resp


def _error_response(err: ApiError) -> Response:
    resp = _json_response(err.status(), err.code)
    if err.code == 429:
        resp.headers = {"Retry-After": "1"}
    return resp


_LOOPBACK_NAMES = frozenset({"localhost", "::1"})


class HostCheck:
    """The Host names the sandbox answers: loopback ones, plus those it was told to allow (`*`:
    any). A web page on another name that resolves to 127.0.0.1 (DNS rebinding) gets a 403, and
    so does a request whose `Origin` (a web page's, cross-site) is not one of those names or
    names no host at all (`Origin: null`)."""

    def __init__(self, allowed: tuple[str, ...] = ()) -> None:
        self.any = "*" in allowed
        self.allowed = frozenset(h.lower().strip("[]") for h in allowed)

    @staticmethod
    def name_of(host: str) -> str:
        host = host.strip().lower()
        if host.startswith("["):
            return host[1:].split("]", 1)[0]
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    def allows(self, host: str) -> bool:
        name = self.name_of(host)
        if self.any or not name or name in _LOOPBACK_NAMES or name in self.allowed:
            return True
        if name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def allows_origin(self, origin: str) -> bool:
        """A web page's origin: one with no host (`null` from a sandboxed iframe, a file: or
        data: page) is cross-site like any other, unless every name is allowed."""
        host = urlsplit(origin.strip()).netloc
        return self.any or (bool(self.name_of(host)) and self.allows(host))

    def check(self, request: Request) -> None:
        host = request.host
        if not self.allows(host):
            raise ApiError(
                403,
                f"Host {host!r} is not allowed: the sandbox answers loopback names only "
                "(localhost, 127.0.0.1, [::1]); allow others with --allow-host",
            )
        origin = request.headers.get("origin")
        if origin is not None and not self.allows_origin(origin):
            # a browser sends Origin with every cross-site write, whatever its body type
            raise ApiError(
                403,
                f"Origin {origin!r} is not allowed: the sandbox answers web pages served "
                "from loopback names only (see --allow-host)",
            )


class HttpApi:
    """The aiohttp application around a `Core`."""

    def __init__(
        self,
        core: Core,
        *,
        faults: Faults | None = None,
        bookmark_seconds: float = 5.0,
        drop_watch_every: float = 0.0,
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.core = core
        self.hosts = HostCheck(allowed_hosts)
        self.faults = faults
        self.bookmark_seconds = bookmark_seconds
        self.drop_watch_every = drop_watch_every
        self.watchers: set[Watcher] = set()
        self.requests = 0
        self.dropped_watches = 0  # watch streams cut by `drop_watch_every`
        self.openapi = OpenAPI()

    def close_watches(self) -> None:
        for w in list(self.watchers):
            w.close()

    # ------------------------------------------------------------------ entry
    async def handle(self, request: Request) -> Response | None:
        self.requests += 1
        try:
            self.hosts.check(request)
            if len(request.body) > decode.MAX_REQUEST_BYTES:
                raise decode.request_too_large()
            if self.faults is not None:
                delay = self.faults.delay()
                if delay:
                    await asyncio.sleep(delay)
                    self.faults.delayed += delay
                self.faults.check(request.method)
            return await self._route(request)
        except ApiError as err:
            return _error_response(err)
        except Exception as exc:  # a bug in the sandbox: answer 500 and keep serving
            log.exception("sandbox internal error on %s %s", request.method, request.path)
            return _error_response(ApiError(500, f"sandbox internal error: {exc}"))

    async def _route(self, request: Request) -> Response | None:
        path = request.path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        if not parts:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez"):
            return Response(b"ok", content_type="text/plain")
        if head == "version":
            return _json_response(SERVER_VERSION)
        if head == "openapi" or head == "swagger.json":
            return await self._openapi(parts)
        if head == "api":
            if len(parts) == 1:
                return _json_response(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
                        ],
                    }
                )
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                return _json_response(self._group_list())
            if len(parts) == 2:
                return _json_response(self._group(parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            return _json_response(self._resource_list(group, version))
        watch_path = False
        if rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        ns: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and (group, version, rest[2]) in self.core.types
            and self.core.types[(group, version, rest[2])].namespaced
        ):
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        rt = self.core.rt(group, version, plural)
        return await self._resource(request, rt, ns, name, sub, watch_path)

    # ------------------------------------------------------------------ discovery
    async def _openapi(self, parts: list[str]) -> Response:
        """`/openapi/v3`, `/openapi/v3/<group-version>` and `/openapi/v2` (built off the loop:
        the first built-in document takes a moment)."""
        doc: Obj | None = None
        types = dict(self.core.types)  # a snapshot: CRDs change on the loop
        if parts[:2] == ["openapi", "v3"]:
            rest = "/".join(parts[2:])
            if rest:
                doc = await asyncio.to_thread(self.openapi.v3, rest, types)
            else:
                doc = self.openapi.v3_index(types)
        elif parts == ["openapi", "v2"] or parts == ["swagger.json"]:
            doc = await asyncio.to_thread(self.openapi.v2, types)
        if doc is None:
            raise ApiError(404, "the server could not find the requested resource")
        return _json_response(doc)

    def _group_list(self) -> Obj:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self._group(g) for g in self.core.groups if g],
        }

    def _group(self, group: str) -> Obj:
        versions = self.core.groups.get(group)
        if not versions:
            raise ApiError(404, "the server could not find the requested resource")
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": gvs,
            "preferredVersion": gvs[0],
        }

    def _resource_list(self, group: str, version: str) -> Obj:
        if version not in self.core.groups.get(group, []):
            raise ApiError(404, "the server could not find the requested resource")
        resources: list[Obj] = []
        for (g, v, _p), rt in self.core.types.items():
            if g != group or v != version:
                continue
            entry: Obj = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            if rt.plural == "bindings":
                continue
            if rt.status_subresource:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if rt.scale is not None:
                resources.append(
                    {
                        "name": f"{rt.plural}/scale",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            for sub in rt.extra_subresources:
                sub_entry: Obj = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                }
                if sub == "binding":
                    sub_entry.update(kind="Binding", verbs=["create"])
                elif sub == "eviction":
                    sub_entry.update(
                        group="policy", version="v1", kind="Eviction", verbs=["create"]
                    )
                elif sub == "log":
                    sub_entry.update(kind="Pod", verbs=["get"])
                else:
                    sub_entry.update(kind=rt.kind, verbs=["update"])
                resources.append(sub_entry)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    # ------------------------------------------------------------------ resources
    async def _body(self, request: Request) -> Any:
        ctype = request.headers.get("content-type", "")
        if _PROTOBUF in ctype:
            return decode_protobuf(request.body)
        return decode.decode_object(request.body, ctype)

    async def _resource(
        self,
        request: Request,
        rt: ResourceType,
        ns: str | None,
        name: str,
        sub: str,
        watch_path: bool,
    ) -> Response | None:
        if rt.plural == "bindings" and request.method == "POST":
            body = await self._body(request)
            self.core.bind(ns or "default", str((body.get("metadata") or {}).get("name", "")), body)
            return _json_response(success_status(code=201), 201)
        if rt.virtual:
            return await self._virtual(request, rt, name)
        if not rt.namespaced and ns is not None:
            raise ApiError(404, "the server could not find the requested resource")
        if not name:
            return await self._collection(request, rt, ns, watch_path)
        if rt.namespaced and ns is None:
            raise ApiError(404, "the server could not find the requested resource")
        if watch_path:
            raise ApiError(405, "watch of a single object: use fieldSelector=metadata.name=")
        return await self._named(request, rt, ns or "", name, sub)

    async def _virtual(self, request: Request, rt: ResourceType, name: str) -> Response:
        """The review kinds: only created, never stored."""
        if request.method != "POST" or name:
            raise ApiError(405, f"{rt.plural} only supports create")
        body = await self._body(request)
        return _json_response(self._review(rt, body if isinstance(body, dict) else {}), 201)

    async def _collection(
        self, request: Request, rt: ResourceType, ns: str | None, watch_path: bool
    ) -> Response | None:
        """A request on the collection: list, watch, create or delete all."""
        method = request.method
        if method == "GET":
            if watch_path or request.query.get("watch") in ("true", "1"):
                return await self._watch(request, rt, ns)
            return self._list(request, rt, ns)
        if method == "POST":
            if rt.namespaced and ns is None:
                raise ApiError(405, "create requires a namespace in the path")
            body = await self._body(request)
            warnings = self._unknown(request, rt, body)
            dry_run = request.query.get("dryRun") == "All"
            obj = self.core.create(rt, ns or "", body, dry_run=dry_run)
            warnings += _unscheduled(rt, obj)
            return _warn(self._out(request, rt, obj, 201), warnings)
        if method == "DELETE":
            return await self._delete_collection(request, rt, ns)
        raise ApiError(405, f"method {method} is not allowed on a collection")

    async def _named(
        self, request: Request, rt: ResourceType, ns: str, name: str, sub: str
    ) -> Response | None:
        """A request on one object or one of its subresources."""
        dry_run = request.query.get("dryRun") == "All"
        if sub == "":
            return await self._object(request, rt, ns, name, "", dry_run)
        if sub == "status" and rt.status_subresource:
            return await self._object(request, rt, ns, name, "status", dry_run)
        if sub == "scale" and rt.scale is not None:
            return await self._scale(request, rt, ns, name)
        if rt.kind == "Pod" and rt.group == "":
            return await self._pod_subresource(request, rt, ns, name, sub)
        if rt.kind == "Namespace" and sub == "finalize" and request.method == "PUT":
            return await self._object(request, rt, ns, name, "", dry_run)
        raise ApiError(404, "the server could not find the requested resource")

    async def _pod_subresource(
        self, request: Request, rt: ResourceType, ns: str, name: str, sub: str
    ) -> Response:
        method = request.method
        if sub == "binding" and method == "POST":
            self.core.bind(ns, name, await self._body(request))
            return _json_response(success_status(code=201), 201)
        if sub == "eviction" and method == "POST":
            self.core.evict(ns, name, await self._body(request))
            return _json_response(success_status(code=201), 201)
        if sub == "log" and method == "GET":
            pod = self.core.get(rt, ns, name)
            return Response(
                _emulated_log(pod, request.query.get("container")), content_type="text/plain"
            )
        raise ApiError(404, "the server could not find the requested resource")

    @staticmethod
    def _review(rt: ResourceType, body: Obj) -> Obj:
        """The sandbox has one user, its admin, whom every request is from: every review about
        the requester is allowed; one about another user (a webhook asking for the requester
        of a queue Command) is denied, since no other user exists."""
        out: Obj = {**body, "apiVersion": rt.api_version, "kind": rt.kind}
        out.setdefault("metadata", {})
        if rt.kind == "SelfSubjectReview":
            out["status"] = {"userInfo": {"username": ADMIN_USER, "groups": list(ADMIN_GROUPS)}}
        elif rt.kind == "SelfSubjectRulesReview":
            out["status"] = {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        elif rt.kind.startswith("Self") or _is_admin(body.get("spec")):
            out["status"] = {"allowed": True, "reason": "the sandbox authorizes its admin"}
        else:
            reason = f"the sandbox has one user, {ADMIN_USER} ({ADMIN_GROUPS[0]}); no other"
            out["status"] = {"allowed": False, "reason": reason}
        return out

    async def _object(
        self,
        request: Request,
        rt: ResourceType,
        ns: str,
        name: str,
        sub: str,
        dry_run: bool,
    ) -> Response | None:
        core = self.core
        method = request.method
        if method == "GET":
            return self._out(request, rt, core.get(rt, ns, name), 200)
        if method == "PUT":
            body = await self._body(request)
            warnings = self._unknown(request, rt, body)
            obj = core.update(
                rt, ns, name, body, subresource=sub, dry_run=dry_run, manager=_manager(request)
            )
            return _warn(self._out(request, rt, obj, 200), warnings)
        if method == "PATCH":
            ctype = request.headers.get("content-type", "")
            if _PROTOBUF in ctype:
                raise ApiError(415, "the sandbox only accepts JSON bodies")
            raw = request.body
            warnings = self._unknown(request, rt, self._patch_body(ctype, raw))
            obj, created = core.patch(
                rt,
                ns,
                name,
                ctype,
                raw,
                subresource=sub,
                dry_run=dry_run,
                field_manager=request.query.get("fieldManager"),
                force=request.query.get("force") == "true",
                agent_manager=_agent_manager(request),
            )
            return _warn(self._out(request, rt, obj, 201 if created else 200), warnings)
        if method == "DELETE":
            opts = await self._delete_options(request)
            obj = core.delete(
                rt,
                ns,
                name,
                grace=opts.get("gracePeriodSeconds"),
                propagation=opts.get("propagationPolicy"),
                preconditions=opts.get("preconditions"),
                dry_run=dry_run,
            )
            return self._out(request, rt, obj, 200)
        raise ApiError(405, f"method {method} is not allowed")

    @staticmethod
    def _unknown(request: Request, rt: ResourceType, body: Any) -> list[str]:
        """`fieldValidation`, as kube-apiserver: with Strict, unknown
        fields are a 400 worded as its strict decoding error; with Warn, they come back as
        warnings (the object is pruned, as by default)."""
        mode = request.query.get("fieldValidation")
        if mode not in ("Strict", "Warn") or not isinstance(body, dict):
            return []
        structural = rt.schema if rt.crd else builtin_structural(rt)
        if not structural:
            return []
        unknown = schema.unknown_fields(body, structural)
        fields = [f'unknown field "{f}"' for f in unknown]
        if fields and mode == "Strict":
            raise ApiError(
                400,
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {', '.join(fields)}",
            )
        return fields

    @staticmethod
    def _patch_body(ctype: str, raw: bytes) -> Any:
        """A patch's object form, for the unknown-field check (a JSON patch has none)."""
        kind = decode.media_type(ctype)
        if kind == "application/apply-patch+yaml":
            return decode.decode_yaml(raw)
        if kind in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            return _without_nulls(decode.decode_json(raw))  # null removes a field
        return None

    async def _delete_options(self, request: Request) -> Obj:
        opts: Obj = {}
        if request.body:
            body = await self._body(request)
            if isinstance(body, dict):
                opts.update(body)
        q = request.query
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if opts.get("orphanDependents") is not None and "propagationPolicy" not in opts:
            opts["propagationPolicy"] = "Orphan" if opts["orphanDependents"] else "Background"
        if opts.get("gracePeriodSeconds") is not None:
            opts["gracePeriodSeconds"] = int(opts["gracePeriodSeconds"])
        return opts

    async def _delete_collection(
        self, request: Request, rt: ResourceType, ns: str | None
    ) -> Response | None:
        opts = await self._delete_options(request)
        result = self.core.list(rt, ns, **self._selectors(request, rt))
        deleted: list[Obj] = []
        for obj in result.items:
            meta = obj["metadata"]
            try:
                deleted.append(
                    self.core.delete(
                        rt,
                        meta.get("namespace", ""),
                        meta["name"],
                        grace=opts.get("gracePeriodSeconds"),
                        propagation=opts.get("propagationPolicy"),
                        dry_run=request.query.get("dryRun") == "All",
                    )
                )
            except ApiError as err:
                if err.code != 404:
                    raise
        return self._list_response(request, rt, deleted, str(self.core.store.rv), "", None)

    async def _scale(
        self, request: Request, rt: ResourceType, ns: str, name: str
    ) -> Response | None:
        method = request.method
        if method == "GET":
            return _json_response(self.core.get_scale(rt, ns, name))
        if method in ("PUT", "PATCH"):
            if method == "PUT":
                body = await self._body(request)
            else:
                from batch.api.mergepatch import apply_merge_patch
                from batch.sandbox.patch import json_patch

                current = self.core.get_scale(rt, ns, name)
                raw = decode.decode_json(request.body or b"{}")
                ctype = request.headers.get("content-type", "")
                body = (
                    json_patch(current, raw)
                    if "json-patch" in ctype
                    else apply_merge_patch(current, raw)
                )
            replicas = int(((body or {}).get("spec") or {}).get("replicas", 0))
            return _json_response(self.core.set_scale(rt, ns, name, replicas))
        raise ApiError(405, f"method {method} is not allowed")

    # ------------------------------------------------------------------ rendering
    @staticmethod
    def _wants_table(request: Request) -> bool:
        accept = request.headers.get("accept", "")
        return "as=Table" in accept

    def _out(self, request: Request, rt: ResourceType, obj: Obj, code: int) -> Response:
        if obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        if self._wants_table(request) and request.method == "GET":
            return _json_response(
                tables.table(
                    rt,
                    [obj],
                    rv=obj["metadata"].get("resourceVersion", ""),
                    include=request.query.get("includeObject", "Metadata"),
                ),
                code,
            )
        return _json_response(obj, code)

    def _selectors(self, request: Request, rt: ResourceType) -> dict[str, Any]:
        q = request.query
        return {
            "label": parse_label_selector(q.get("labelSelector")),
            "field": parse_field_selector(
                q.get("fieldSelector"), allowed=rt.allowed_fields(), kind=rt.kind
            ),
        }

    def _list(self, request: Request, rt: ResourceType, ns: str | None) -> Response:
        q = request.query
        try:
            limit = int(q.get("limit", "0") or 0)
        except ValueError as exc:
            raise ApiError(400, "limit must be an integer") from exc
        result = self.core.list(
            rt, ns, limit=limit, cont=q.get("continue", ""), **self._selectors(request, rt)
        )
        return self._list_response(
            request, rt, result.items, str(result.rv), result.cont, result.remaining
        )

    def _list_response(
        self,
        request: Request,
        rt: ResourceType,
        items: list[Obj],
        rv: str,
        cont: str,
        remaining: int | None,
    ) -> Response:
        if self._wants_table(request):
            return _json_response(
                tables.table(
                    rt,
                    items,
                    rv=rv,
                    include=request.query.get("includeObject", "Metadata"),
                    cont=cont,
                )
            )
        if rt.crd:
            items = [
                o if o.get("apiVersion") == rt.api_version else {**o, "apiVersion": rt.api_version}
                for o in items
            ]
        meta: Obj = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        # Serialize the envelope around the pre-encoded items without copying them.
        head = dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})
        body = head[:-1] + b',"items":[' + b",".join(dumps(o) for o in items) + b"]}"
        return Response(body)

    # ------------------------------------------------------------------ watch
    async def _watch(self, request: Request, rt: ResourceType, ns: str | None) -> Response | None:
        q = request.query
        sels = self._selectors(request, rt)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        send_initial = q.get("sendInitialEvents") in ("true", "1")
        w = Watcher(
            namespace=ns,
            label=sels["label"],
            field=sels["field"],
            api_version=rt.api_version if rt.crd else None,
            render=self._table_render(request, rt),
        )
        start = await self._watch_start(request, rt, ns, send_initial)
        if start is None:
            return None
        since, snapshot = start
        stream = await request.start_stream(content_type=_JSON)
        stream.on_close.append(w.close)
        if not await _write_snapshot(stream, w, snapshot):
            return None
        if send_initial and bookmarks:
            await stream.write(self._bookmark(rt, since, initial_end=True))
        if not await self._catch_up(stream, w, rt, since):
            return None
        bucket = self.core.store.buckets[rt.storage_key]
        bucket.watchers.add(w)
        self.watchers.add(w)
        try:
            await self._serve_live(stream, w, rt, _watch_timeout(q), bookmarks)
        finally:
            bucket.watchers.discard(w)
            self.watchers.discard(w)
        return None

    def _table_render(
        self, request: Request, rt: ResourceType
    ) -> Callable[[str, Obj], bytes] | None:
        """The event renderer of a watch asking for a Table (columns in the first event)."""
        if not self._wants_table(request):
            return None
        include = request.query.get("includeObject", "Metadata")
        first = [True]

        def render(etype: str, obj: Obj) -> bytes:
            t = tables.table(
                rt,
                [obj],
                rv=obj["metadata"].get("resourceVersion", ""),
                include=include,
                with_columns=first[0],
            )
            first[0] = False
            return event_line(etype, dumps(t))

        return render

    async def _watch_start(
        self, request: Request, rt: ResourceType, ns: str | None, send_initial: bool
    ) -> tuple[int, list[Obj]] | None:
        """Where the watch starts: (resourceVersion, the objects to send as ADDED first).
        None when the resourceVersion asked for is compacted (the 410 is sent)."""
        store = self.core.store
        bucket = store.buckets[rt.storage_key]
        rv_param = request.query.get("resourceVersion", "")
        if not rv_param or rv_param == "0" or send_initial:
            # A consistent start: the objects as of `since`, then every event after it.
            return store.rv, list(bucket.iter(ns))
        try:
            since = int(rv_param)
        except ValueError as exc:
            raise ApiError(400, f"invalid resourceVersion {rv_param!r}") from exc
        if store.events_since(rt.storage_key, since) is None:
            await self._gone(request, rv_param, bucket.compacted_rv)
            return None
        return since, []

    async def _catch_up(self, stream: Stream, w: Watcher, rt: ResourceType, since: int) -> bool:
        """Send the kept events after since in batches (bounded memory, other requests keep
        being served); the caller joins the live fan-out in the same step as the last read,
        so nothing is missed. False when the stream ended or fell behind the history."""
        store = self.core.store
        while True:
            events = store.events_since(rt.storage_key, since, _BATCH)
            if events is None:  # fell behind the kept history while catching up
                compacted = store.buckets[rt.storage_key].compacted_rv
                await stream.write(self._gone_line(str(since), compacted))
                return False
            if not events:
                return True
            for ev in events:
                w.offer(ev)
            since = events[-1].rv
            data = b"".join(w.pending)
            w.pending.clear()
            await stream.write(data)
            if stream.closed:
                return False

    async def _serve_live(
        self, stream: Stream, w: Watcher, rt: ResourceType, timeout: float, bookmarks: bool
    ) -> None:
        """Stream live events until the timeout, the client leaving or a planned drop, with a
        bookmark every bookmark_seconds when asked for."""
        started = time.monotonic()
        deadline = started + timeout
        drop_at = started + self.drop_watch_every if self.drop_watch_every else None
        next_bookmark = started + self.bookmark_seconds if bookmarks else None
        while True:
            if w.pending:
                data = b"".join(w.pending)
                w.pending.clear()
                await stream.write(data)
                continue
            if w.closed or stream.closed:
                return
            now = time.monotonic()
            if now >= deadline:
                return
            if drop_at is not None and now >= drop_at:
                self.dropped_watches += 1
                stream.abort()
                return
            if next_bookmark is not None and now >= next_bookmark:
                next_bookmark = now + self.bookmark_seconds
                await stream.write(self._bookmark(rt, self.core.store.rv))
                continue
            wait = min(t for t in (deadline, next_bookmark, drop_at) if t is not None) - now
            w.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.wake.wait(), timeout=max(wait, 0.001))

    @staticmethod
    def _gone_line(rv: str, compacted: int) -> bytes:
        err = ApiError(410, f"too old resource version: {rv} ({compacted})", reason="Expired")
        return event_line("ERROR", dumps(err.status()))

    async def _gone(self, request: Request, rv: str, compacted: int) -> None:
        """A watch from a compacted resourceVersion: 200, then one ERROR event (410)."""
        stream = await request.start_stream(content_type=_JSON)
        await stream.write(self._gone_line(rv, compacted))

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return event_line(
            "BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
        )


class _NoEventType:
    """Stand-in event for initial ADDED lines (no cached body to reuse)."""

    obj: Obj = {}

    def body(self) -> bytes:  # pragma: no cover - never called: obj is not ev.obj
        return b"{}"


_NoEvent: Any = _NoEventType()


def _watch_timeout(query: Any) -> float:
    """timeoutSeconds of a watch; 30 minutes when absent or not a number."""
    try:
        return float(query.get("timeoutSeconds", "1800") or 1800)
    except ValueError:
        return 1800.0


async def _write_snapshot(stream: Stream, w: Watcher, snapshot: list[Obj]) -> bool:
    """The initial objects as ADDED events, in batches; False when the client left."""
    for start in range(0, len(snapshot), _BATCH):
        lines = [
            w.line_for("ADDED", _NoEvent, o)
            for o in snapshot[start : start + _BATCH]
            if w.matches(o)
        ]
        await stream.write(b"".join(lines))
        if stream.closed:
            return False
    return True


def _agent_manager(request: Request) -> str:
    """The field manager kube-apiserver names for a write without fieldManager: the user
    agent up to its first "/", at most 128 characters."""
    return request.headers.get("user-agent", "").split("/", 1)[0][:128]


def _manager(request: Request) -> str:
    return request.query.get("fieldManager") or _agent_manager(request)
