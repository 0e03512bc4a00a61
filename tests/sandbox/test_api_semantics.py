"""Contract: the API semantics clients rely on, checked over HTTP (raw and python client)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from batch.sandbox.testing import SandboxHandle
from tests.waiting import wait_for

from .helpers import SANDBOX_ONLY, Server, bind, diverges, http, pod, watch_lines


def test_discovery(server: Server) -> None:
    code, body = http(server, "GET", "/api")
    assert code == 200 and body["versions"] == ["v1"]
    code, body = http(server, "GET", "/version")
    assert code == 200 and body["major"] == "1"
    code, groups = http(server, "GET", "/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {
        "apps",
        "batch",
        "coordination.k8s.io",
        "batch.volcano.sh",
        "scheduling.volcano.sh",
        "events.k8s.io",
        "scheduling.k8s.io",
    } <= names
    code, rl = http(server, "GET", "/apis/batch.volcano.sh/v1alpha1")
    jobs = next(r for r in rl["resources"] if r["name"] == "jobs")
    assert jobs["kind"] == "Job" and "vcjob" in jobs["shortNames"] and jobs["namespaced"]
    assert {"create", "get", "list", "watch", "patch", "delete"} <= set(jobs["verbs"])
    assert any(r["name"] == "jobs/status" for r in rl["resources"])
    code, core = http(server, "GET", "/api/v1")
    subs = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "pods/binding", "pods/eviction", "nodes", "namespaces"} <= subs
    code, pg = http(server, "GET", "/apis/scheduling.volcano.sh/v1beta1")
    short = {s for r in pg["resources"] for s in r.get("shortNames", [])}
    assert {"pg", "q"} <= short


@diverges("a ConfigMap has no metadata.generation on kube-apiserver; every sandbox object has")
def test_create_sets_server_metadata(kube_api: Any) -> None:
    v1 = client.CoreV1Api(kube_api)
    cm = v1.create_namespaced_config_map(
        "default", {"metadata": {"generateName": "meta-"}, "data": {"a": "1"}}
    )
    m = cm.metadata
    assert m.name.startswith("meta-") and len(m.name) == 10
    assert m.uid and m.resource_version and m.creation_timestamp is not None
    assert m.generation == 1
    other = v1.create_namespaced_config_map("default", {"metadata": {"generateName": "meta-"}})
    assert int(other.metadata.resource_version) > int(m.resource_version)


def test_error_bodies(server: Server) -> None:
    code, body = http(server, "GET", "/api/v1/namespaces/default/pods/nope")
    assert code == 404
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404
    assert body["details"]["name"] == "nope"
    http(server, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "dup"}})
    code, body = http(
        server, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "dup"}}
    )
    assert code == 409 and body["reason"] == "AlreadyExists"
    code, body = http(
        server, "POST", "/api/v1/namespaces/nowhere/configmaps", {"metadata": {"name": "x"}}
    )
    assert code == 404 and "nowhere" in body["message"]
    code, body = http(
        server, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "Bad_Name"}}
    )
    assert code == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    code, body = http(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        None,
        raw=b"\x6b\x38\x73\x00",
        ctype="application/vnd.kubernetes.protobuf",
    )
    assert code == 400 and body["reason"] == "BadRequest"  # an envelope without a kind
    code, body = http(server, "GET", "/apis/nothing.example.com/v1/things")
    assert code == 404


def test_conflict_on_stale_resource_version(kube_api: Any) -> None:
    v1 = client.CoreV1Api(kube_api)
    cm = v1.create_namespaced_config_map(
        "default", {"metadata": {"name": "stale"}, "data": {"v": "1"}}
    )
    cm.data = {"v": "2"}
    v1.replace_namespaced_config_map("stale", "default", cm)
    cm.data = {"v": "3"}
    with pytest.raises(ApiException) as exc:
        v1.replace_namespaced_config_map("stale", "default", cm)  # old resourceVersion
    assert exc.value.status == 409
    assert json.loads(exc.value.body)["reason"] == "Conflict"


def test_generation_bumps_on_spec_change_only(kube_api: Any) -> None:
    apps = client.AppsV1Api(kube_api)
    dep = apps.create_namespaced_deployment("default", _deployment("gen", 0))
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("gen", "default", {"metadata": {"labels": {"x": "y"}}})
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment(
        "gen", "default", {"spec": {"replicas": 0, "paused": True}}
    )
    assert dep.metadata.generation == 2
    wait_for(
        lambda: apps.read_namespaced_deployment("gen", "default").status.observed_generation == 2
    )
    before = apps.read_namespaced_deployment("gen", "default").metadata.resource_version
    dep = apps.patch_namespaced_deployment("gen", "default", {"spec": {"paused": True}})
    assert dep.metadata.resource_version == before  # a no-op write stores nothing


def test_server_side_apply_then_put(server: Server) -> None:
    assert _apply(server, "ssa-u", "one", "data:\n  a: '1'\n")[0] == 201
    _code, cur = http(server, "GET", f"{CMS}/ssa-u")
    cur["data"]["a"] = "2"
    code, body = http(server, "PUT", f"{CMS}/ssa-u?fieldManager=putter", cur)
    assert code == 200 and _owners(body) == [("putter", "Update", {"f:data": {"f:a": {}}})]
    # a PUT without managedFields keeps them; [{}] clears them
    del body["metadata"]["managedFields"]
    body["data"]["b"] = "3"
    code, body = http(server, "PUT", f"{CMS}/ssa-u", body)
    assert code == 200 and sorted(_owners(body)) == [
        ("Python-urllib", "Update", {"f:data": {"f:b": {}}}),
        ("putter", "Update", {"f:data": {"f:a": {}}}),
    ]
    body["metadata"]["managedFields"] = [{}]
    code, body = http(server, "PUT", f"{CMS}/ssa-u", body)
    assert code == 200 and "managedFields" not in body["metadata"]
    http(server, "DELETE", f"{CMS}/ssa-u")


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }


def test_patch_flavours(server: Server) -> None:
    base = "/api/v1/namespaces/default/pods/patchme"
    assert (
        http(
            server,
            "POST",
            "/api/v1/namespaces/default/pods",
            {
                **pod("patchme"),
                "spec": {
                    "containers": [
                        {"name": "a", "image": "busybox:1"},
                        {"name": "b", "image": "busybox:1"},
                    ]
                },
            },
        )[0]
        == 201
    )
    code, body = http(
        server,
        "PATCH",
        base,
        {"metadata": {"labels": {"k": "v"}}},
        ctype="application/merge-patch+json",
    )
    assert code == 200 and body["metadata"]["labels"] == {"k": "v"}
    code, body = http(
        server,
        "PATCH",
        base,
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"n": "1"}},
            {"op": "replace", "path": "/metadata/labels/k", "value": "w"},
        ],
        ctype="application/json-patch+json",
    )
    assert code == 200 and body["metadata"]["annotations"] == {"n": "1"}
    assert body["metadata"]["labels"]["k"] == "w"
    code, body = http(
        server,
        "PATCH",
        base,
        [{"op": "test", "path": "/metadata/labels/k", "value": "zzz"}],
        ctype="application/json-patch+json",
    )
    assert code == 422
    # strategic merge: containers merged by name, not replaced
    code, body = http(
        server,
        "PATCH",
        base,
        {"spec": {"containers": [{"name": "b", "image": "busybox:2"}]}},
        ctype="application/strategic-merge-patch+json",
    )
    assert code == 200
    images = {c["name"]: c["image"] for c in body["spec"]["containers"]}
    assert images == {"a": "busybox:1", "b": "busybox:2"}
    # a merge patch replaces lists
    code, body = http(
        server,
        "PATCH",
        base,
        {"metadata": {"finalizers": ["x/y"]}},
        ctype="application/merge-patch+json",
    )
    code, body = http(
        server,
        "PATCH",
        base,
        {"metadata": {"finalizers": None}},
        ctype="application/merge-patch+json",
    )
    assert "finalizers" not in body["metadata"]


APPLY = "application/apply-patch+yaml"
CMS = "/api/v1/namespaces/default/configmaps"
MERGE_PATCH = "application/merge-patch+json"


def _apply(server: Server, name: str, manager: str, body: str, force: bool = False) -> Any:
    doc = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{body}"
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return http(server, "PATCH", f"{CMS}/{name}{query}", raw=doc.encode(), ctype=APPLY)


def _owners(obj: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(e["manager"], e["operation"], e["fieldsV1"]) for e in obj["metadata"]["managedFields"]]


def test_server_side_apply_create_then_merge(server: Server) -> None:
    code, body = _apply(server, "ssa", "test", "data:\n  a: '1'\n")
    assert code == 201 and body["data"] == {"a": "1"}
    code, body = _apply(server, "ssa", "test", "data:\n  a: '1'\n  b: '2'\n")
    assert code == 200 and body["data"] == {"a": "1", "b": "2"}
    code, body = _apply(server, "ssa", "test", "data:\n  b: '2'\n")
    assert code == 200 and body["data"] == {"b": "2"}  # a, no longer applied, is removed
    doc = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n"
    code, body = http(server, "PATCH", f"{CMS}/ssa", raw=doc, ctype=APPLY)
    assert code == 422 and body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: is required for apply patch",
            "field": "fieldManager",
        }
    ]  # fieldManager is required
    http(server, "DELETE", f"{CMS}/ssa")


def test_server_side_apply_managed_fields_shape(server: Server) -> None:
    code, body = _apply(server, "ssa-m", "mgr", "  labels: {l: x}\ndata:\n  a: '1'\n")
    assert code == 201
    (entry,) = body["metadata"]["managedFields"]
    assert set(entry) == {"manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"}
    assert entry["manager"] == "mgr" and entry["operation"] == "Apply"
    assert entry["apiVersion"] == "v1" and entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:l": {}}}}
    # an ordinary patch records its fields under its manager, operation Update
    code, body = http(
        server,
        "PATCH",
        f"{CMS}/ssa-m?fieldManager=patcher",
        {"data": {"c": "3"}},
        ctype="application/merge-patch+json",
    )
    assert code == 200
    assert _owners(body) == [
        ("mgr", "Apply", {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:l": {}}}}),
        ("patcher", "Update", {"f:data": {"f:c": {}}}),
    ]
    # without fieldManager the manager is the user agent's product name
    code, body = http(
        server, "PATCH", f"{CMS}/ssa-m", {"data": {"d": "4"}}, ctype="application/merge-patch+json"
    )
    assert ("Python-urllib", "Update", {"f:data": {"f:d": {}}}) in _owners(body)
    # dropping everything it applied removes the fields and the now empty labels
    code, body = _apply(server, "ssa-m", "mgr", "data: {}\n")
    assert code == 200 and body["data"] == {"c": "3", "d": "4"}
    assert "labels" not in body["metadata"]
    assert ("mgr", "Apply", {"f:data": {}}) in _owners(body)
    http(server, "DELETE", f"{CMS}/ssa-m")


def test_server_side_apply_shared_field_stays(server: Server) -> None:
    assert _apply(server, "ssa-s", "one", "data:\n  a: '1'\n  b: '2'\n")[0] == 201
    code, body = _apply(server, "ssa-s", "two", "data:\n  a: '1'\n")  # same value: shared
    assert code == 200
    # an apply that changes nothing sets no time
    (two,) = [e for e in body["metadata"]["managedFields"] if e["manager"] == "two"]
    assert "time" not in two
    code, body = _apply(server, "ssa-s", "one", "data: {}\n")
    assert code == 200 and body["data"] == {"a": "1"}  # two still owns a; b had one owner
    code, body = _apply(server, "ssa-s", "two", "")
    assert code == 200 and "a" not in (body.get("data") or {})
    assert [e["manager"] for e in body["metadata"]["managedFields"]] == ["one"]
    http(server, "DELETE", f"{CMS}/ssa-s")


def test_server_side_apply_conflicts_and_force(server: Server) -> None:
    assert _apply(server, "ssa-c", "one", "data:\n  a: '1'\n  b: '2'\n")[0] == 201
    code, body = _apply(server, "ssa-c", "two", "data:\n  a: '9'\n  b: '8'\n")
    assert code == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 2 conflicts: conflicts with "one":\n- .data.a\n- .data.b'
    )
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "one"', "field": ".data.a"},
        {"reason": "FieldManagerConflict", "message": 'conflict with "one"', "field": ".data.b"},
    ]
    # a field an ordinary update changed belongs to its manager: applying it conflicts too
    http(
        server,
        "PATCH",
        f"{CMS}/ssa-c?fieldManager=editor",
        {"data": {"a": "7"}},
        ctype="application/merge-patch+json",
    )
    code, body = _apply(server, "ssa-c", "one", "data:\n  a: '1'\n  b: '2'\n")
    assert code == 409
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "editor" using v1: .data.a'
    )
    # force takes the field over
    code, body = _apply(server, "ssa-c", "one", "data:\n  a: '1'\n  b: '2'\n", force=True)
    assert code == 200 and body["data"] == {"a": "1", "b": "2"}
    assert [m for m, _op, _f in _owners(body)] == ["one"]
    http(server, "DELETE", f"{CMS}/ssa-c")


def test_server_side_apply_to_an_object_without_managed_fields(server: Server) -> None:
    body = {"metadata": {"name": "ssa-b", "labels": {"x": "1"}}, "data": {"a": "1", "b": "2"}}
    assert http(server, "POST", CMS, body)[0] == 201
    reset = {"metadata": {"managedFields": [{}]}}  # [{}] clears them
    code, body = http(server, "PATCH", f"{CMS}/ssa-b", reset, ctype=MERGE_PATCH)
    assert code == 200 and "managedFields" not in body["metadata"]
    # what the object holds belongs to "before-first-apply"
    code, body = _apply(server, "ssa-b", "one", "data:\n  a: '9'\n  c: '3'\n")
    assert code == 409 and body["message"] == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a'
    )
    code, body = _apply(server, "ssa-b", "one", "data:\n  a: '1'\n  c: '3'\n")
    assert code == 200 and body["data"] == {"a": "1", "b": "2", "c": "3"}
    assert _owners(body) == [
        ("one", "Apply", {"f:data": {"f:a": {}, "f:c": {}}}),
        (
            "before-first-apply",
            "Update",
            {
                "f:data": {".": {}, "f:a": {}, "f:b": {}},
                "f:metadata": {"f:labels": {".": {}, "f:x": {}}},
            },
        ),
    ]
    http(server, "DELETE", f"{CMS}/ssa-b")


def test_server_side_apply_keyed_list(server: Server) -> None:
    path = "/api/v1/namespaces/default/pods/ssa-pod?fieldManager=one"
    doc = pod("ssa-pod")
    doc["spec"]["containers"][0]["env"] = [{"name": "E", "value": "1"}]
    code, body = http(server, "PATCH", path, raw=json.dumps(doc).encode(), ctype=APPLY)
    assert code == 201, body
    (entry,) = body["metadata"]["managedFields"]
    main = entry["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert main["."] == {} and main["f:image"] == {} and main["f:name"] == {}
    assert main["f:env"] == {'k:{"name":"E"}': {".": {}, "f:name": {}, "f:value": {}}}
    assert main["f:resources"] == {"f:requests": {"f:cpu": {}}}
    http(server, "DELETE", "/api/v1/namespaces/default/pods/ssa-pod?gracePeriodSeconds=0")


def test_server_side_apply_custom_resource_and_status(server: Server) -> None:
    path = "/apis/scheduling.volcano.sh/v1beta1/queues/ssa-q"
    doc = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "ssa-q"},
        "spec": {"weight": 2},
    }
    raw = json.dumps(doc).encode()
    code, body = http(server, "PATCH", path + "?fieldManager=one", raw=raw, ctype=APPLY)
    assert code == 201 and _owners(body) == [("one", "Apply", {"f:spec": {"f:weight": {}}})]
    code, body = http(
        server, "PATCH", path + "/status", {"status": {"state": "Open"}}, ctype=MERGE_PATCH
    )
    assert code == 200
    (status_entry,) = [e for e in body["metadata"]["managedFields"] if e.get("subresource")]
    assert status_entry["subresource"] == "status"
    assert status_entry["manager"] == "Python-urllib"
    assert status_entry["fieldsV1"] == {"f:status": {".": {}, "f:state": {}}}
    patch = {"spec": {"capability": {"cpu": "2"}}}
    code, body = http(server, "PATCH", path + "?fieldManager=two", patch, ctype=MERGE_PATCH)
    assert code == 200
    assert ("two", "Update", {"f:spec": {"f:capability": {".": {}, "f:cpu": {}}}}) in _owners(body)
    http(server, "DELETE", path)


def test_server_side_apply_service_ports(server: Server) -> None:
    path = "/api/v1/namespaces/default/services/ssa-svc?fieldManager=one"
    doc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ssa-svc"},
        "spec": {"selector": {"app": "x"}, "ports": [{"name": "a", "port": 80}]},
    }
    code, body = http(server, "PATCH", path, raw=json.dumps(doc).encode(), ctype=APPLY)
    assert code == 201, body
    (entry,) = body["metadata"]["managedFields"]
    assert entry["fieldsV1"]["f:spec"]["f:ports"] == {
        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}
    }
    doc["spec"]["ports"] = [{"name": "b", "port": 81}]
    code, body = http(server, "PATCH", path, raw=json.dumps(doc).encode(), ctype=APPLY)
    assert code == 200 and [p["port"] for p in body["spec"]["ports"]] == [81]
    http(server, "DELETE", "/api/v1/namespaces/default/services/ssa-svc")


# Sandbox only: kube-apiserver records an Update entry for every write (docs/sandbox.md); the
# sandbox keeps plain writes free of field bookkeeping until an object is first applied.
@SANDBOX_ONLY
def test_plain_writes_keep_no_managed_fields_until_applied(server: Server) -> None:
    assert http(server, "POST", CMS, {"metadata": {"name": "ssa-p"}, "data": {"a": "1"}})[0] == 201
    code, body = http(server, "PATCH", f"{CMS}/ssa-p", {"data": {"b": "2"}}, ctype=MERGE_PATCH)
    assert code == 200 and "managedFields" not in body["metadata"]
    code, body = _apply(server, "ssa-p", "one", "data:\n  c: '3'\n")
    assert code == 200 and [m for m, _op, _f in _owners(body)] == ["one", "before-first-apply"]
    code, body = http(server, "PATCH", f"{CMS}/ssa-p", {"data": {"d": "4"}}, ctype=MERGE_PATCH)
    assert ("Python-urllib", "Update", {"f:data": {"f:d": {}}}) in _owners(body)
    http(server, "DELETE", f"{CMS}/ssa-p")


def _applied_deployment(image: str, env: list[str]) -> bytes:
    container = {"name": "main", "image": image, "env": [{"name": e, "value": "1"} for e in env]}
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "ssa-d"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "ssa-d"}},
            "template": {
                "metadata": {"labels": {"app": "ssa-d"}},
                "spec": {"containers": [container]},
            },
        },
    }
    return json.dumps(doc).encode()


def test_server_side_apply_keyed_list_elements(server: Server) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/ssa-d?fieldManager="
    raw = _applied_deployment("busybox:1.36", ["E1", "E2"])
    code, body = http(server, "PATCH", path + "one", raw=raw, ctype=APPLY)
    assert code == 201, body
    # an element no longer applied is removed from the list
    raw = _applied_deployment("busybox:1.36", ["E1"])
    code, body = http(server, "PATCH", path + "one", raw=raw, ctype=APPLY)
    (main,) = body["spec"]["template"]["spec"]["containers"]
    assert code == 200 and main["env"] == [{"name": "E1", "value": "1"}]
    # a field inside an element owned by another manager conflicts, named by its key
    code, body = http(
        server, "PATCH", path + "two", raw=_applied_deployment("nginx", []), ctype=APPLY
    )
    assert code == 409 and body["message"] == (
        'Apply failed with 1 conflict: conflict with "one": '
        '.spec.template.spec.containers[name="main"].image'
    )

    # the controller's status writes are its own Update entry, on the status subresource
    def status_entry() -> Any:
        dep = http(server, "GET", "/apis/apps/v1/namespaces/default/deployments/ssa-d")[1]
        return next(
            (e for e in dep["metadata"]["managedFields"] if e.get("subresource") == "status"),
            None,
        )

    wait_for(lambda: status_entry() is not None, timeout=30)
    entry = status_entry()
    assert entry["manager"] == "kube-controller-manager" and entry["operation"] == "Update"
    http(server, "DELETE", "/apis/apps/v1/namespaces/default/deployments/ssa-d")


def test_status_subresource_separation(server: Server) -> None:
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "sep"},
        "spec": {"weight": 1},
        "status": {"state": "Closed"},
    }
    code, q = http(server, "POST", path, body)
    assert code == 201, q
    try:
        assert (q.get("status") or {}).get("state") != "Closed"  # status ignored on create
        code, q = http(
            server,
            "PATCH",
            path + "/sep/status",
            {"status": {"state": "Closing"}, "spec": {"weight": 5}},
            ctype="application/merge-patch+json",
        )
        assert code == 200 and q["status"]["state"] == "Closing" and q["spec"]["weight"] == 1
        gen = q["metadata"]["generation"]
        code, q = http(
            server,
            "PATCH",
            path + "/sep",
            {"status": {"state": "Closed"}, "spec": {"weight": 2}},
            ctype="application/merge-patch+json",
        )
        assert code == 200 and q["status"]["state"] == "Closing" and q["spec"]["weight"] == 2
        assert q["metadata"]["generation"] == gen + 1
    finally:
        http(server, "DELETE", path + "/sep")


def test_a_kind_without_status_subresource_keeps_status_in_the_object(server: Server) -> None:
    """PodGroup, as Volcano's CRD and Tephra's declare it: status is written with the object
    (what Volcano's scheduler does), and `/status` is not served at all."""
    ns = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    code, rl = http(server, "GET", "/apis/scheduling.volcano.sh/v1beta1")
    assert code == 200
    assert "podgroups/status" not in {r["name"] for r in rl["resources"]}
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "nosub"},
        "spec": {"minMember": 1},
        "status": {"phase": "Pending"},
    }
    code, pg = http(server, "POST", ns, body)
    assert code == 201, pg
    try:
        assert pg["status"]["phase"] == "Pending"  # kept on create
        gen = pg["metadata"]["generation"]
        code, pg = http(
            server,
            "PATCH",
            ns + "/nosub",
            {"status": {"phase": "Inqueue"}},
            ctype="application/merge-patch+json",
        )
        assert code == 200 and pg["status"]["phase"] == "Inqueue"
        assert pg["metadata"]["generation"] == gen + 1  # status is part of the object here
        code, answer = http(
            server,
            "PATCH",
            ns + "/nosub/status",
            {"status": {"phase": "Running"}},
            ctype="application/merge-patch+json",
        )
        assert code == 404, answer  # the same answer as for an object that is gone
    finally:
        http(server, "DELETE", ns + "/nosub")


def test_label_and_field_selectors(server: Server) -> None:
    for i in range(4):
        p = pod(f"sel-{i}", labels={"team": "a" if i % 2 else "b", "idx": str(i)})
        p["spec"]["schedulerName"] = "volcano" if i < 3 else "default-scheduler"
        assert http(server, "POST", "/api/v1/namespaces/default/pods", p)[0] == 201
    bind(server, "default", "sel-0", "node-1")

    def names(query: str) -> set[str]:
        code, body = http(server, "GET", "/api/v1/pods?" + query)
        assert code == 200, body
        return {
            i["metadata"]["name"] for i in body["items"] if i["metadata"]["name"].startswith("sel-")
        }

    assert names("labelSelector=team%3Da") == {"sel-1", "sel-3"}
    assert names("labelSelector=team%20in%20(a,b),idx!%3D3") == {"sel-0", "sel-1", "sel-2"}
    assert names("labelSelector=!team") == set()
    assert names("fieldSelector=spec.schedulerName%3Dvolcano,spec.nodeName%3D") == {
        "sel-1",
        "sel-2",
    }
    assert names("fieldSelector=spec.nodeName%3Dnode-1") == {"sel-0"}
    assert names("fieldSelector=metadata.name%3Dsel-2,metadata.namespace%3Ddefault") == {"sel-2"}
    code, body = http(server, "GET", "/api/v1/pods?fieldSelector=spec.bogus%3D1")
    assert code == 400 and "not supported" in body["message"]


def test_limit_and_continue(server: Server) -> None:
    """Pages of a namespace's ConfigMaps (a cluster publishes `kube-root-ca.crt` in each)."""
    http(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "paging"}})
    for i in range(7):
        http(
            server,
            "POST",
            "/api/v1/namespaces/paging/configmaps",
            {"metadata": {"name": f"cm-{i}"}},
        )
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        q = "limit=3" + (f"&continue={token}" if token else "")
        _code, body = http(server, "GET", f"/api/v1/namespaces/paging/configmaps?{q}")
        pages += 1
        seen += [i["metadata"]["name"] for i in body["items"]]
        token = body["metadata"].get("continue", "")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] > 0
    own = [name for name in seen if name != "kube-root-ca.crt"]
    assert pages == 3 and own == [f"cm-{i}" for i in range(7)]


def test_watch_resume_bookmarks_and_gone(server: Server) -> None:
    _code, lst = http(server, "GET", "/api/v1/namespaces/default/configmaps")
    rv = lst["metadata"]["resourceVersion"]
    http(server, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w1"}})
    http(
        server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/w1",
        {"data": {"a": "b"}},
        ctype="application/merge-patch+json",
    )
    http(server, "DELETE", "/api/v1/namespaces/default/configmaps/w1")
    events = list(
        watch_lines(
            server,
            "/api/v1/namespaces/default/configmaps?watch=true"
            f"&resourceVersion={rv}&timeoutSeconds=1",
        )
    )
    mine = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert mine == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # sendInitialEvents: current objects, then a bookmark marking their end
    events = list(
        watch_lines(
            server,
            "/api/v1/namespaces?watch=1&sendInitialEvents=true"
            "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
            "&timeoutSeconds=1",
        )
    )
    types = [e["type"] for e in events]
    assert types[0] == "ADDED" and "BOOKMARK" in types
    mark = events[types.index("BOOKMARK")]
    assert mark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
    assert {e["object"]["metadata"]["name"] for e in events[: types.index("BOOKMARK")]} >= {
        "default",
        "kube-system",
    }


def test_watch_410_when_too_old() -> None:
    """Sandbox only: it needs a watch history of three events (SandboxOptions.watch_history)."""
    from batch.sandbox.options import SandboxOptions
    from batch.sandbox.testing import run_sandbox

    with run_sandbox(
        options=SandboxOptions(watch_history=3, install_crds=False, emulator=False)
    ) as small:
        for i in range(6):
            http(
                small.url,
                "POST",
                "/api/v1/namespaces/default/configmaps",
                {"metadata": {"name": f"c{i}"}},
            )
        events = list(
            watch_lines(
                small.url,
                "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1&timeoutSeconds=1",
            )
        )
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        kube_api = small.api_client()
        with pytest.raises(ApiException) as exc:
            from kubernetes import watch

            for _ in watch.Watch().stream(
                client.CoreV1Api(kube_api).list_namespaced_config_map,
                "default",
                resource_version="1",
                timeout_seconds=1,
            ):
                pass
        assert exc.value.status == 410
        kube_api.close()


def test_watch_selector_transitions(server: Server) -> None:
    """A pod leaving a field selector (bound) is DELETED for that watch, as on a real server."""
    http(server, "POST", "/api/v1/namespaces/default/pods", pod("trans-0"))
    _code, lst = http(server, "GET", "/api/v1/namespaces/default/pods")
    rv = lst["metadata"]["resourceVersion"]
    got: list[tuple[str, str]] = []

    def run() -> None:
        for e in watch_lines(
            server,
            "/api/v1/namespaces/default/pods?watch=1&fieldSelector="
            f"spec.nodeName%3D&resourceVersion={rv}&timeoutSeconds=2",
        ):
            got.append((e["type"], e["object"]["metadata"]["name"]))

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    assert bind(server, "default", "trans-0", "node-2")[0] == 201
    t.join()
    assert ("DELETED", "trans-0") in got


def test_binding_and_second_bind(server: Server, kube_api: Any) -> None:
    v1 = client.CoreV1Api(kube_api)
    v1.create_namespaced_pod("default", pod("bindme"))
    code, body = bind(server, "default", "bindme", "node-0")
    assert code == 201 and body["status"] == "Success"
    code, body = bind(server, "default", "bindme", "node-1")
    assert code == 409 and body["reason"] == "Conflict"
    p = v1.read_namespaced_pod("bindme", "default")
    assert p.spec.node_name == "node-0"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in p.status.conditions)


def test_eviction_and_pdb(server: Server, kube_api: Any) -> None:
    v1 = client.CoreV1Api(kube_api)
    for n in ("ev-0", "ev-1"):
        v1.create_namespaced_pod("default", pod(n, labels={"app": "ev"}))
        bind(server, "default", n, "node-2")
    wait_for(
        lambda: all(
            v1.read_namespaced_pod(n, "default").status.phase == "Running" for n in ("ev-0", "ev-1")
        )
    )
    http(
        server,
        "POST",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "metadata": {"name": "ev"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "ev"}}},
        },
    )
    ev = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "ev-0", "namespace": "default"},
    }
    code, body = http(server, "POST", "/api/v1/namespaces/default/pods/ev-0/eviction", ev)
    assert code == 429 and body["reason"] == "TooManyRequests"
    http(server, "DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/ev")
    code, _body = http(server, "POST", "/api/v1/namespaces/default/pods/ev-0/eviction", ev)
    assert code == 201
    p = v1.read_namespaced_pod("ev-0", "default")
    assert p.metadata.deletion_timestamp is not None  # graceful: still there, terminating
    wait_for(lambda: http(server, "GET", "/api/v1/namespaces/default/pods/ev-0")[0] == 404)


def test_finalizers_hold_deletion(server: Server) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    http(server, "POST", path, {"metadata": {"name": "fin", "finalizers": ["tephra.io/x"]}})
    code, body = http(server, "DELETE", path + "/fin")
    assert code == 200 and body["metadata"]["deletionTimestamp"]
    code, body = http(server, "GET", path + "/fin")
    assert code == 200 and body["metadata"]["deletionTimestamp"]
    code, _ = http(
        server,
        "PATCH",
        path + "/fin",
        {"metadata": {"finalizers": None}},
        ctype="application/merge-patch+json",
    )
    assert code == 200
    assert http(server, "GET", path + "/fin")[0] == 404


def _cm_owned(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "blockOwnerDeletion": True,
                }
            ],
        }
    }


def test_garbage_collection(server: Server) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    # background
    _, owner = http(server, "POST", path, {"metadata": {"name": "gc-owner"}})
    http(server, "POST", path, _cm_owned("gc-dep", owner))
    http(server, "DELETE", path + "/gc-owner")
    wait_for(lambda: http(server, "GET", path + "/gc-dep")[0] == 404)
    # foreground: the owner stays until dependents are gone
    _, owner = http(server, "POST", path, {"metadata": {"name": "fg-owner"}})
    http(
        server,
        "POST",
        path,
        {
            **_cm_owned("fg-dep", owner),
            "metadata": {**_cm_owned("fg-dep", owner)["metadata"], "finalizers": ["hold/it"]},
        },
    )
    _code, body = http(server, "DELETE", path + "/fg-owner?propagationPolicy=Foreground")
    assert "foregroundDeletion" in body["metadata"]["finalizers"]
    time.sleep(0.2)
    assert http(server, "GET", path + "/fg-owner")[0] == 200
    dep = http(server, "GET", path + "/fg-dep")[1]
    assert dep["metadata"]["deletionTimestamp"]
    http(
        server,
        "PATCH",
        path + "/fg-dep",
        {"metadata": {"finalizers": None}},
        ctype="application/merge-patch+json",
    )
    wait_for(lambda: http(server, "GET", path + "/fg-owner")[0] == 404)
    # orphan: dependents lose the reference and stay
    _, owner = http(server, "POST", path, {"metadata": {"name": "or-owner"}})
    http(server, "POST", path, _cm_owned("or-dep", owner))
    http(server, "DELETE", path + "/or-owner", {"propagationPolicy": "Orphan"})
    wait_for(lambda: http(server, "GET", path + "/or-owner")[0] == 404)
    dep = http(server, "GET", path + "/or-dep")[1]
    assert "ownerReferences" not in dep["metadata"]


def test_dependent_of_an_owner_already_gone_is_collected(server: Server) -> None:
    """A dependent created after its owner was deleted (a controller acting on a stale cache)
    is collected, as kube-controller-manager's GC does for an owner uid it cannot find; one that
    still has a live owner only loses the dangling reference (issue 30, item 7)."""
    path = "/api/v1/namespaces/default/configmaps"
    _, gone = http(server, "POST", path, {"metadata": {"name": "late-owner"}})
    _, live = http(server, "POST", path, {"metadata": {"name": "late-live"}})
    assert http(server, "DELETE", path + "/late-owner")[0] == 200
    assert http(server, "POST", path, _cm_owned("late-dep", gone))[0] == 201
    both = _cm_owned("late-both", gone)
    both["metadata"]["ownerReferences"] += _cm_owned("x", live)["metadata"]["ownerReferences"]
    assert http(server, "POST", path, both)[0] == 201
    wait_for(lambda: http(server, "GET", path + "/late-dep")[0] == 404, "late-dep collected")

    def only_live_owner() -> bool:
        refs = http(server, "GET", path + "/late-both")[1]["metadata"].get("ownerReferences")
        return [r["uid"] for r in refs or []] == [live["metadata"]["uid"]]

    wait_for(only_live_owner, "dangling reference dropped")
    http(server, "DELETE", path + "/late-live")


def test_pod_quantities_are_stored_as_canonical_strings(server: Server, kube_api: Any) -> None:
    """A JSON number is a valid Quantity; kube-apiserver answers it (and every quantity) in its
    canonical string form, which the typed client's pod list needs (issue 30, item 9)."""
    body = pod("numeric-gpu", extra={"nodeName": "nowhere"})
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": 0.5, "memory": "1024Mi", "nvidia.com/gpu": 1},
        "limits": {"nvidia.com/gpu": 1},
    }
    code, created = http(server, "POST", "/api/v1/namespaces/default/pods", body)
    assert code == 201, created
    res = created["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert res["limits"] == {"nvidia.com/gpu": "1"}
    listed = client.CoreV1Api(kube_api).list_namespaced_pod("default").items
    mine = next(p for p in listed if p.metadata.name == "numeric-gpu")
    assert mine.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"
    bad = pod("bad-quantity")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    code, status = http(server, "POST", "/api/v1/namespaces/default/pods", bad)
    assert code == 400 and "quantities must match the regular expression" in status["message"]
    http(server, "DELETE", "/api/v1/namespaces/default/pods/numeric-gpu?gracePeriodSeconds=0")


def test_namespace_deletion_cascades(server: Server) -> None:
    http(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "doomed"}})
    http(server, "POST", "/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "a"}})
    code, body = http(server, "DELETE", "/api/v1/namespaces/doomed")
    assert code == 200 and body["status"]["phase"] == "Terminating"
    wait_for(lambda: http(server, "GET", "/api/v1/namespaces/doomed")[0] == 404)
    assert http(server, "GET", "/api/v1/namespaces/doomed/configmaps/a")[0] == 404


def test_leases_events_priorityclasses(server: Server, kube_api: Any) -> None:
    coord = client.CoordinationV1Api(kube_api)
    lease = coord.create_namespaced_lease(
        "default",
        {
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
    )
    lease.spec.holder_identity = "b"
    assert coord.replace_namespaced_lease("leader", "default", lease).spec.holder_identity == "b"
    node_lease = coord.read_namespaced_lease("node-0", "kube-node-lease")
    assert node_lease.spec.holder_identity == "node-0"
    v1 = client.CoreV1Api(kube_api)
    v1.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"},
            "reason": "Tested",
            "message": "hi",
            "type": "Normal",
        },
    )
    evs = v1.list_namespaced_event("default", field_selector="reason=Tested").items
    assert [e.metadata.name for e in evs] == ["ev1"]
    # raw JSON: the python client re-renders eventTime as "...+00:00", which is no MicroTime
    # (test_micro_times_have_six_fractional_digits)
    ev2 = client.EventsV1Api(kube_api)
    code, body = http(
        server,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "ev2"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "tephra",
            "reportingInstance": "t",
            "action": "Bind",
            "reason": "Scheduled",
            "regarding": {"kind": "Pod", "name": "x"},
            "type": "Normal",
        },
    )
    assert code == 201, body
    assert ev2.read_namespaced_event("ev2", "default").reason == "Scheduled"
    sched = client.SchedulingV1Api(kube_api)
    sched.create_priority_class({"metadata": {"name": "high"}, "value": 1000})
    names = {p.metadata.name for p in sched.list_priority_class().items}
    assert {"high", "system-cluster-critical"} <= names
    p = v1.create_namespaced_pod("default", pod("prio", extra={"priorityClassName": "high"}))
    assert p.spec.priority == 1000
    with pytest.raises(ApiException) as exc:
        v1.create_namespaced_pod("default", pod("prio2", extra={"priorityClassName": "nope"}))
    assert exc.value.status == 403


def test_pod_defaults(kube_api: Any) -> None:
    v1 = client.CoreV1Api(kube_api)
    p = v1.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "defaults"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "nginx",
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    }
                ]
            },
        },
    )
    assert p.spec.scheduler_name == "default-scheduler"
    assert p.spec.restart_policy == "Always"
    assert p.spec.termination_grace_period_seconds == 30
    assert p.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert p.status.qos_class == "Guaranteed" and p.status.phase == "Pending"
    with pytest.raises(ApiException) as exc:
        v1.create_namespaced_pod(
            "default", {"metadata": {"name": "nocontainers"}, "spec": {"containers": []}}
        )
    assert exc.value.status == 422


def test_watch_catch_up_in_batches_keeps_order(sb: SandboxHandle) -> None:
    """More events than one catch-up batch: all arrive, in resourceVersion order, once.

    Sandbox only: it pins the sandbox's watch catch-up batching, fed in process."""
    http(sb.url, "POST", "/api/v1/namespaces", {"metadata": {"name": "many"}})
    _code, lst = http(sb.url, "GET", "/api/v1/namespaces/many/configmaps")
    rv0 = lst["metadata"]["resourceVersion"]
    core = sb.core
    cms = core.rt("", "v1", "configmaps")

    def make() -> None:
        for i in range(1200):
            core.create(cms, "many", {"metadata": {"name": f"cm-{i:04d}"}})

    sb.call(make)
    events = list(
        watch_lines(
            sb.url,
            f"/api/v1/namespaces/many/configmaps?watch=1&resourceVersion={rv0}&timeoutSeconds=1",
        )
    )
    names = [e["object"]["metadata"]["name"] for e in events]
    assert names == [f"cm-{i:04d}" for i in range(1200)]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)
    events = list(
        watch_lines(sb.url, "/api/v1/namespaces/many/configmaps?watch=1&timeoutSeconds=1")
    )
    assert sorted(e["object"]["metadata"]["name"] for e in events) == names
    assert {e["type"] for e in events} == {"ADDED"}


def test_micro_times_have_six_fractional_digits(server: Server) -> None:
    """A MicroTime (eventTime, a Lease's renewTime) is RFC 3339 with exactly six fractional
    digits: what the python client renders from a datetime ("+00:00", none) is a 400."""
    events = "/apis/events.k8s.io/v1/namespaces/default/events"
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

    def event(name: str, when: str) -> dict[str, Any]:
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name},
            "eventTime": when,
            "reportingController": "tephra",
            "reportingInstance": "t",
            "action": "Bind",
            "reason": "Scheduled",
            "regarding": {"kind": "Pod", "name": "x"},
            "type": "Normal",
        }

    for i, when in enumerate(("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.5Z")):
        code, body = http(server, "POST", events, event(f"mt-{i}", when))
        assert code == 400 and f'parsing time "{when}"' in body["message"], body
    assert (
        http(server, "POST", events, event("mt-ok", "2026-01-01T00:00:00.000000+00:00"))[0] == 201
    )
    lease = {"metadata": {"name": "mt"}, "spec": {"renewTime": "2026-01-01T00:00:00Z"}}
    code, body = http(server, "POST", leases, lease)
    assert code == 400 and body["reason"] == "BadRequest", body
