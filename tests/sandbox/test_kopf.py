"""Contract: a tiny kopf operator runs against the sandbox through `kopf.testing.KopfRunner`.

It exercises what kopf needs: discovery, CRD list/watch, per-resource list+watch with bookmarks,
merge-patches of the object (finalizer, progress annotations), status-subresource patches,
adoption (ownerReferences) and deletion with a finalizer.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest
from kopf.testing import KopfRunner

from batch.sandbox.testing import SandboxHandle
from tests.waiting import wait_for

from .helpers import http

GROUP = "tests.tephra.io"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wd"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def _registry(url: str, deleted: list[str]) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=url, default_namespace="default", token="t")

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 10
        settings.persistence.finalizer = "tests.tephra.io/finalizer"

    @kopf.on.create(GROUP, "v1", "widgets", id="create", registry=registry)
    def create(body: Any, spec: Any, name: str, namespace: str, **_: Any) -> dict[str, Any]:
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-child"},
            "data": {"size": str(spec["size"])},
        }
        kopf.adopt(child, owner=body)
        code, resp = http(url, "POST", f"/api/v1/namespaces/{namespace}/configmaps", child)
        if code != 201:
            raise kopf.TemporaryError(f"child not created: {resp}", delay=0.2)
        return {"child": child["metadata"]["name"]}

    @kopf.on.delete(GROUP, "v1", "widgets", id="delete", registry=registry)
    def delete(name: str, **_: Any) -> None:
        deleted.append(name)

    return registry


@pytest.mark.timeout(120)
def test_kopf_operator_round_trip(sb: SandboxHandle) -> None:
    code, _ = http(sb.url, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert code == 201
    deleted: list[str] = []
    logging.getLogger("kopf").setLevel(logging.WARNING)
    base = f"/apis/{GROUP}/v1/namespaces/default/widgets"
    with KopfRunner(
        ["run", "--standalone", "-n", "default"], registry=_registry(sb.url, deleted), timeout=60
    ) as runner:
        code, _ = http(
            sb.url,
            "POST",
            base,
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"size": 3},
            },
        )
        assert code == 201

        def handled() -> Any:
            obj = http(sb.url, "GET", base + "/w1")[1]
            return (obj.get("status") or {}).get("create", {}).get("child") == "w1-child" and obj

        obj = wait_for(handled, timeout=30)
        assert "tests.tephra.io/finalizer" in obj["metadata"]["finalizers"]
        child = http(sb.url, "GET", "/api/v1/namespaces/default/configmaps/w1-child")[1]
        assert child["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
        assert http(sb.url, "DELETE", base + "/w1")[0] == 200
        wait_for(lambda: http(sb.url, "GET", base + "/w1")[0] == 404, timeout=30)
        wait_for(
            lambda: http(sb.url, "GET", "/api/v1/namespaces/default/configmaps/w1-child")[0] == 404
        )
    assert runner.exit_code == 0, runner.output
    assert runner.exception is None
    assert deleted == ["w1"]
