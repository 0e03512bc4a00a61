"""A dict-backed stand-in for `batch.kube.client.KubeClient`, with injectable failures.

Lets the tests drive `batch.controllers.operator.ControllerManager` (the shell around the pure
reconcilers) without an API server: `fail(method, kind, name, sub)` returns an HTTP status to
raise as an ApiError, or None to let the call through.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from batch.controllers.memory import apply_merge_patch
from batch.kube.client import ApiError, Resource

Failure = Callable[[str, str, "str | None", "str | None"], "int | None"]


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str | None, str | None]] = []
        self.fail: Failure = lambda *_: None
        self._uid = itertools.count(1)

    def _key(self, res: Resource, namespace: str | None, name: str) -> tuple[str, str, str]:
        return (res.kind, (namespace or "") if res.namespaced else "", name)

    def _call(self, method: str, res: Resource, name: str | None, sub: str | None = None) -> None:
        self.calls.append((method, res.kind, name, sub))
        status = self.fail(method, res.kind, name, sub)
        if status:
            raise ApiError(status, {"reason": "Injected"}, f"{method} {res.kind} {name}")

    def put(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(dict(obj))
        m = body.setdefault("metadata", {})
        m.setdefault("uid", f"uid-{next(self._uid)}")
        m.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        self.objects[(kind, str(m.get("namespace") or ""), str(m["name"]))] = body
        return body

    def get_obj(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _ns, _n), o in sorted(self.objects.items()) if k == kind]

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._call("GET", res, name)
        obj = self.objects.get(self._key(res, namespace, name))
        if obj is None:
            raise ApiError(404, {"reason": "NotFound"}, "get")
        return copy.deepcopy(obj)

    async def list(
        self, res: Resource, *, namespace: str | None = None, **params: str
    ) -> dict[str, Any]:
        self._call("LIST", res, None)
        items = [
            copy.deepcopy(o)
            for (k, ns, _n), o in sorted(self.objects.items())
            if k == res.kind and (namespace is None or ns == namespace)
        ]
        selector = params.get("labelSelector")
        if selector:
            key, value = selector.split("=", 1)
            items = [i for i in items if (i["metadata"].get("labels") or {}).get(key) == value]
        return {"items": items}

    async def create(
        self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        m = obj.get("metadata") or {}
        name = str(m.get("name") or f"{m.get('generateName', 'obj-')}{next(self._uid)}")
        self._call("CREATE", res, name)
        key = self._key(res, namespace, name)
        if key in self.objects:
            raise ApiError(409, {"reason": "AlreadyExists"}, "create")
        body = copy.deepcopy(dict(obj))
        body["metadata"]["name"] = name
        body["metadata"].setdefault("uid", f"uid-{next(self._uid)}")
        self.objects[key] = body
        return copy.deepcopy(body)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        sub: str | None = None,
        patch_type: str = "merge",
    ) -> dict[str, Any]:
        self._call("PATCH", res, name, sub)
        key = self._key(res, namespace, name)
        if key not in self.objects:
            raise ApiError(404, {"reason": "NotFound"}, "patch")
        self.objects[key] = apply_merge_patch(self.objects[key], patch)
        return copy.deepcopy(self.objects[key])

    async def delete(
        self, res: Resource, name: str, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        self._call("DELETE", res, name)
        key = self._key(res, namespace, name)
        if key not in self.objects:
            raise ApiError(404, {"reason": "NotFound"}, "delete")
        del self.objects[key]
        return {}
