"""The HTTP face of the sandbox: Kubernetes REST paths, discovery, watch streams, Tables.

One catch-all aiohttp handler parses `/api/v1/...` and `/apis/<group>/<version>/...` paths itself
(faster and simpler than hundreds of routes), maps the verb to a `Core` call and renders the
answer as JSON, a `Table` when kubectl asks for one, or a watch stream of newline-delimited events.
Protobuf bodies are refused with 415, so clients fall back to JSON.
Beside it: `hostcheck` (which Host and Origin names it answers), `discovery`, `reviews`,
`watchstream` (watch streams) and `responses`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from batch.sandbox import decode, discovery, schema, tables
from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError, success_status
from batch.sandbox.faults import Faults
from batch.sandbox.hostcheck import HostCheck
from batch.sandbox.meta import ResourceType
from batch.sandbox.openapi import OpenAPI, builtin_structural
from batch.sandbox.protobuf import MEDIA_TYPE, decode_protobuf
from batch.sandbox.responses import error_response, json_response, wants_table, warn
from batch.sandbox.reviews import review
from batch.sandbox.selectors import parse_field_selector, parse_label_selector
from batch.sandbox.store import Obj, dumps
from batch.sandbox.watchstream import WatchStreams
from batch.sandbox.wire import Request, Response

log = logging.getLogger(__name__)

_PROTOBUF = MEDIA_TYPE


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
        self.watches = WatchStreams(
            core, bookmark_seconds=bookmark_seconds, drop_watch_every=drop_watch_every
        )
        self.requests = 0
        self.openapi = OpenAPI()

    def close_watches(self) -> None:
        self.watches.close()

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
            return error_response(err)
        except Exception as exc:  # a bug in the sandbox: answer 500 and keep serving
            log.exception("sandbox internal error on %s %s", request.method, request.path)
            return error_response(ApiError(500, f"sandbox internal error: {exc}"))

    async def _route(self, request: Request) -> Response | None:
        path = request.path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        if not parts:
            return json_response({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez"):
            return Response(b"ok", content_type="text/plain")
        if head == "version":
            return json_response(discovery.SERVER_VERSION)
        if head == "openapi" or head == "swagger.json":
            return json_response(await discovery.openapi_document(self.openapi, self.core, parts))
        if head == "api":
            if len(parts) == 1:
                return json_response(
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
                return json_response(discovery.group_list(self.core))
            if len(parts) == 2:
                return json_response(discovery.group(self.core, parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            return json_response(discovery.resource_list(self.core, group, version))
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
            return json_response(success_status(code=201), 201)
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
        return json_response(review(rt, body if isinstance(body, dict) else {}), 201)

    async def _collection(
        self, request: Request, rt: ResourceType, ns: str | None, watch_path: bool
    ) -> Response | None:
        """A request on the collection: list, watch, create or delete all."""
        method = request.method
        if method == "GET":
            if watch_path or request.query.get("watch") in ("true", "1"):
                return await self.watches.serve(request, rt, ns, self._selectors(request, rt))
            return self._list(request, rt, ns)
        if method == "POST":
            if rt.namespaced and ns is None:
                raise ApiError(405, "create requires a namespace in the path")
            body = await self._body(request)
            warnings = self._unknown(request, rt, body)
            dry_run = request.query.get("dryRun") == "All"
            obj = self.core.create(rt, ns or "", body, dry_run=dry_run)
            warnings += _unscheduled(rt, obj)
            return warn(self._out(request, rt, obj, 201), warnings)
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
            return json_response(success_status(code=201), 201)
        if sub == "eviction" and method == "POST":
            self.core.evict(ns, name, await self._body(request))
            return json_response(success_status(code=201), 201)
        if sub == "log" and method == "GET":
            pod = self.core.get(rt, ns, name)
            return Response(
                _emulated_log(pod, request.query.get("container")), content_type="text/plain"
            )
        raise ApiError(404, "the server could not find the requested resource")

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
            return warn(self._out(request, rt, obj, 200), warnings)
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
            return warn(self._out(request, rt, obj, 201 if created else 200), warnings)
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
            return json_response(self.core.get_scale(rt, ns, name))
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
            return json_response(self.core.set_scale(rt, ns, name, replicas))
        raise ApiError(405, f"method {method} is not allowed")

    # ------------------------------------------------------------------ rendering
    def _out(self, request: Request, rt: ResourceType, obj: Obj, code: int) -> Response:
        if obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        if wants_table(request) and request.method == "GET":
            return json_response(
                tables.table(
                    rt,
                    [obj],
                    rv=obj["metadata"].get("resourceVersion", ""),
                    include=request.query.get("includeObject", "Metadata"),
                ),
                code,
            )
        return json_response(obj, code)

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
        if wants_table(request):
            return json_response(
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


def _agent_manager(request: Request) -> str:
    """The field manager kube-apiserver names for a write without fieldManager: the user
    agent up to its first "/", at most 128 characters."""
    return request.headers.get("user-agent", "").split("/", 1)[0][:128]


def _manager(request: Request) -> str:
    return request.query.get("fieldManager") or _agent_manager(request)
