"""Discovery: the server's version, API groups and resource lists, and its OpenAPI documents."""

from __future__ import annotations

import asyncio

from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError
from batch.sandbox.openapi import OpenAPI
from batch.sandbox.store import Obj

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


async def openapi_document(openapi: OpenAPI, core: Core, parts: list[str]) -> Obj:
    """`/openapi/v3`, `/openapi/v3/<group-version>` and `/openapi/v2` (built off the loop:
    the first built-in document takes a moment)."""
    doc: Obj | None = None
    types = dict(core.types)  # a snapshot: CRDs change on the loop
    if parts[:2] == ["openapi", "v3"]:
        rest = "/".join(parts[2:])
        if rest:
            doc = await asyncio.to_thread(openapi.v3, rest, types)
        else:
            doc = openapi.v3_index(types)
    elif parts == ["openapi", "v2"] or parts == ["swagger.json"]:
        doc = await asyncio.to_thread(openapi.v2, types)
    if doc is None:
        raise ApiError(404, "the server could not find the requested resource")
    return doc


def group_list(core: Core) -> Obj:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [group(core, g) for g in core.groups if g],
    }


def group(core: Core, group: str) -> Obj:
    versions = core.groups.get(group)
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


def resource_list(core: Core, group: str, version: str) -> Obj:
    """The APIResourceList of one group version, subresources included."""
    if version not in core.groups.get(group, []):
        raise ApiError(404, "the server could not find the requested resource")
    resources: list[Obj] = []
    for (g, v, _p), rt in core.types.items():
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
                sub_entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
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
