"""Contract: CRDs are served once created, their schemas enforced and unknown fields pruned;
Tephra's kinds go through `batch.api` admission (defaulting, 422 with field paths)."""

from __future__ import annotations

from typing import Any

from tests.waiting import wait_for

from .helpers import SANDBOX_ONLY, Server, http

GROUP = "schema.tephra.io"


def _crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "gadgets",
                "singular": "gadget",
                "kind": "Gadget",
                "shortNames": ["gd"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {
                                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                        "mode": {
                                            "type": "string",
                                            "enum": ["fast", "slow"],
                                            "default": "slow",
                                        },
                                        "name": {"type": "string", "maxLength": 5},
                                        "extra": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                        "tags": {
                                            "type": "array",
                                            "items": {"type": "string"},
                                            "maxItems": 2,
                                        },
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"phase": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def _gadget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


def test_crd_served_validated_pruned(server: Server) -> None:
    base = f"/apis/{GROUP}/v1/namespaces/default/gadgets"
    assert http(server, "GET", base)[0] == 404
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    code, crd = http(server, "POST", crds, _crd())
    assert code == 201

    def established() -> bool:
        # kube-apiserver answers `"conditions": null` until the CRD's controllers have run
        status = http(server, "GET", f"{crds}/gadgets.{GROUP}")[1].get("status") or {}
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in status.get("conditions") or []
        )

    if server.name == "sandbox":  # Established at once (a cluster takes a moment: docs/sandbox.md)
        assert any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd["status"]["conditions"]
        )
    wait_for(established, "CRD Established")
    wait_for(lambda: http(server, "GET", base)[0] == 200, "served")  # soon after Established
    code, obj = http(
        server,
        "POST",
        base,
        _gadget("ok", {"size": 2, "unknown": 1, "extra": {"anything": {"goes": True}}}),
    )
    assert code == 201
    assert "unknown" not in obj["spec"]  # pruned
    assert obj["spec"]["extra"] == {"anything": {"goes": True}}  # preserved
    assert obj["spec"]["mode"] == "slow"  # defaulted
    cases = {
        "spec.size": {"size": "two"},
        "spec.mode": {"size": 1, "mode": "medium"},
        "spec.name": {"size": 1, "name": "toolong"},
        "spec.tags": {"size": 1, "tags": ["a", "b", "c"]},
    }
    for field, spec in cases.items():
        code, body = http(server, "POST", base, _gadget("bad", spec))
        assert code == 422, (field, body)
        assert body["reason"] == "Invalid"
        assert [c["field"] for c in body["details"]["causes"]] == [field], body
    code, body = http(server, "POST", base, _gadget("big", {"size": 11}))
    assert code == 422 and "less than or equal to 10" in body["message"]
    code, body = http(server, "POST", base, _gadget("req", {}))
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.size"
    assert body["details"]["causes"][0]["reason"] == "FieldValueRequired"
    # updates are validated too
    code, body = http(
        server, "PATCH", base + "/ok", {"spec": {"size": 0}}, ctype="application/merge-patch+json"
    )
    assert code == 422
    # strategic merge patch is refused for custom resources, as by kube-apiserver
    code, _ = http(
        server,
        "PATCH",
        base + "/ok",
        {"spec": {"size": 3}},
        ctype="application/strategic-merge-patch+json",
    )
    assert code == 415
    # printer columns
    code, table = http(
        server, "GET", base, accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    )
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size"]
    assert table["rows"][0]["cells"][:2] == ["ok", 2]
    # deleting the CRD removes the resource and its objects
    http(
        server, "DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{GROUP}"
    )
    wait_for(lambda: http(server, "GET", base)[0] == 404)


# Sandbox only: the sandbox embeds Tephra's admission; a cluster has the webhook (tests/real).
@SANDBOX_ONLY
def test_tephra_admission_defaults_and_rejects(server: Server) -> None:
    base = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "adm"},
        "spec": {
            "tasks": [
                {
                    "name": "t",
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}},
                }
            ]
        },
    }
    code, body = http(server, "POST", base, job)
    assert code == 201, body
    assert body["spec"]["queue"] == "default"  # defaulted by batch.api admission
    assert body["spec"]["minAvailable"] == 2
    bad = {**job, "metadata": {"name": "adm-bad"}, "spec": {**job["spec"], "minAvailable": 5}}
    code, body = http(server, "POST", base, bad)
    assert code == 422, body
    assert body["reason"] == "Invalid"
    causes = body["details"]["causes"]
    assert causes and all(c["field"] and c["message"] for c in causes)
    assert any("minAvailable" in c["field"] for c in causes), causes
    missing_queue = {
        **job,
        "metadata": {"name": "adm-q"},
        "spec": {**job["spec"], "queue": "no-such-queue"},
    }
    code, body = http(server, "POST", base, missing_queue)
    assert code == 422 and any("queue" in c["field"] for c in body["details"]["causes"])


# Sandbox only: the sandbox creates the default queues; on a cluster Tephra's controller does.
@SANDBOX_ONLY
def test_default_queues_exist(server: Server) -> None:
    code, body = http(server, "GET", "/apis/scheduling.volcano.sh/v1beta1/queues")
    assert code == 200
    queues = {q["metadata"]["name"]: q for q in body["items"]}
    assert {"root", "default"} <= set(queues)
    assert queues["root"]["spec"]["reclaimable"] is False
    assert queues["default"]["status"]["state"] == "Open"


# Sandbox only: the sandbox embeds Tephra's admission; on a cluster it is the webhook.
@SANDBOX_ONLY
def test_queue_delete_admission(server: Server) -> None:
    code, body = http(server, "DELETE", "/apis/scheduling.volcano.sh/v1beta1/queues/root")
    assert code == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    assert http(server, "GET", "/apis/scheduling.volcano.sh/v1beta1/queues/root")[0] == 200


# Sandbox only: the sandbox embeds Tephra's admission; on a cluster it is the webhook.
@SANDBOX_ONLY
def test_podgroup_updates_and_cronjobs_go_through_admission(server: Server) -> None:
    # issue 30 item 9: a PodGroup could be moved into root; CronJob schedules went unchecked
    base = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "moved"},
        "spec": {"minMember": 1, "queue": "default"},
    }
    assert http(server, "POST", base, pg)[0] == 201
    patch = {"spec": {"queue": "root"}}
    code, body = http(server, "PATCH", f"{base}/moved", patch, ctype="application/merge-patch+json")
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.queue", body
    assert http(server, "GET", f"{base}/moved")[1]["spec"]["queue"] == "default"
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "tz"},
        "spec": {
            "schedule": "TZ=../../etc/passwd 0 1 * * *",
            "jobTemplate": {"spec": {"tasks": []}},
        },
    }
    code, body = http(
        server, "POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/cronjobs", cron
    )
    assert code == 422 and "spec.schedule" in {c["field"] for c in body["details"]["causes"]}
