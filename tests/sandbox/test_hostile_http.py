"""Hostile requests (issues 19.3, 20.5): the sandbox refuses what a kube-apiserver refuses, answers
with a Status (never a traceback), and cannot be driven from a web page."""

from __future__ import annotations

import base64
import json
from http.client import HTTPConnection, HTTPSConnection
from typing import Any
from urllib.parse import urlsplit

import pytest

from .helpers import SANDBOX_ONLY, Server, diverges, http, pod

CM = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _raw(
    server: Server, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, Any]:
    """One request with exactly these headers (http.client adds only Host and Content-Length)."""
    parts = urlsplit(server.url)
    host = parts.hostname or ""
    conn = (
        HTTPSConnection(host, parts.port, timeout=10, context=server.context)
        if server.context is not None
        else HTTPConnection(host, parts.port, timeout=10)
    )
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(text)
    except ValueError:
        return resp.status, text.decode(errors="replace")


def test_an_object_over_etcds_limit_is_refused_with_a_500(server: Server) -> None:
    """etcd refuses a value over 1.5 MiB; kube-apiserver passes its error on (500, no reason),
    on create and on update."""
    pods = "/api/v1/namespaces/default/pods"
    big = pod("too-big")
    big["spec"]["containers"][0]["args"] = ["x" * (1536 * 1024 + 1)]
    code, body = http(server, "POST", pods, big)
    assert code == 500 and "reason" not in body, body
    assert body["message"] == "etcdserver: request is too large"
    assert http(server, "GET", f"{pods}/too-big")[0] == 404
    assert http(server, "POST", pods, pod("grows"))[0] == 201
    image = {"spec": {"containers": [{"name": "main", "image": "y" * (1600 * 1024)}]}}
    code, body = http(
        server, "PATCH", f"{pods}/grows", image, ctype="application/strategic-merge-patch+json"
    )
    assert code == 500 and body["message"] == "etcdserver: request is too large", body


def test_config_map_and_secret_data_is_at_most_one_mib(server: Server) -> None:
    too_long = {
        "reason": "FieldValueTooLong",
        "message": "Too long: may not be more than 1048576 bytes",
    }
    code, body = http(server, "POST", CM, _cm("big-cm", blob="x" * (1024 * 1024 + 1)))
    assert code == 422 and body["details"]["causes"] == [{**too_long, "field": "[]"}], body
    blob = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    secret = {"metadata": {"name": "big-secret"}, "data": {"blob": blob}}
    code, body = http(server, "POST", SECRETS, secret)
    assert code == 422 and body["details"]["causes"] == [{**too_long, "field": "data"}], body
    assert http(server, "POST", CM, _cm("mib-cm", blob="x" * (1024 * 1024)))[0] == 201


def test_a_body_over_the_request_limit_is_refused_with_413(server: Server) -> None:
    code, body = http(server, "POST", CM, _cm("huge", blob="x" * (3 * 1024 * 1024)))
    assert code == 413, body
    assert body["message"] == "Request entity too large: limit is 3145728"


@diverges("kube-apiserver decodes JSON nested up to 10,000 deep; the sandbox refuses over 100")
def test_deeply_nested_json_is_a_400_not_a_traceback(server: Server) -> None:
    for depth in (200, 5000, 100_000):
        raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":'
        raw += b"[" * depth + b"]" * depth + b"}"
        code, body = http(server, "POST", CM, raw=raw)
        assert code == 400, (depth, body)
        assert "depth" in body["message"]
        code, body = http(
            server, "PATCH", f"{CM}/deep", raw=raw, ctype="application/merge-patch+json"
        )
        assert code in (400, 404), (depth, body)
        assert "Traceback" not in json.dumps(body)


def test_bodies_need_a_json_or_yaml_content_type(server: Server) -> None:
    """A cross-site form (text/plain, form-urlencoded) or a type-less fetch cannot create."""
    raw = json.dumps(_cm("form")).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        code, body = _raw(server, "POST", CM, raw, {"Content-Type": ctype})
        assert code == 415, (ctype, body)
        assert "accepted media types include" in body["message"]
    # a type-less body is JSON, as kube-apiserver takes it (the Python client sends no type)
    code, _ = _raw(server, "POST", CM, json.dumps(_cm("typeless")).encode(), {})
    assert code == 201
    code, body = _raw(server, "PATCH", f"{CM}/form", b'{"data":{}}', {"Content-Type": "text/plain"})
    assert code == 415, body
    assert http(server, "GET", f"{CM}/form")[0] == 404
    code, _ = _raw(server, "POST", CM, raw, {"Content-Type": "application/json; charset=utf-8"})
    assert code == 201
    yaml_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-yaml}\n"
    code, _ = _raw(server, "POST", CM, yaml_body, {"Content-Type": "application/yaml"})
    assert code == 201


# Sandbox only: the Origin check is the sandbox's own (it authenticates nobody).
@SANDBOX_ONLY
def test_web_pages_elsewhere_cannot_write(server: Server) -> None:
    """A type-less body is JSON, but not from a web page elsewhere (a no-cors fetch of a Blob)."""
    raw = json.dumps(_cm("from-page")).encode()
    code, body = _raw(server, "POST", CM, raw, {"Origin": "https://evil.example.com"})
    assert code == 403, body
    assert "Origin" in body["message"]
    code, _ = _raw(
        server, "POST", CM, raw, {"Origin": f"http://localhost:{urlsplit(server.url).port}"}
    )
    assert code == 201


# Sandbox only: the Origin check is the sandbox's own (it authenticates nobody).
@SANDBOX_ONLY
@pytest.mark.parametrize("origin", ["null", "file://", "data:"])
def test_pages_without_a_host_cannot_write(server: Server, origin: str) -> None:
    """Issue 30.7: a sandboxed iframe, a file: or data: page sends `Origin: null` (or an origin
    with no host); it is cross-site all the same."""
    raw = json.dumps(_cm("from-nowhere")).encode()
    code, body = _raw(server, "POST", CM, raw, {"Origin": origin})
    assert code == 403, body
    assert "Origin" in body["message"]


# Sandbox only: the Host check is the sandbox's own (it authenticates nobody).
@SANDBOX_ONLY
def test_only_loopback_host_names_are_served(server: Server) -> None:
    """DNS rebinding: a page on evil.example.com resolving to 127.0.0.1 must not read secrets."""
    port = urlsplit(server.url).port
    for host in ("evil.example.com", f"evil.example.com:{port}", "10.0.0.1"):
        code, body = _raw(server, "GET", SECRETS, None, {"Host": host})
        assert code == 403, (host, body)
        assert "Host" in body["message"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        code, _ = _raw(server, "GET", SECRETS, None, {"Host": host})
        assert code == 200, host


def test_a_secrets_string_data_is_stored_in_data(server: Server) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "sd"},
        "data": {"a": base64.b64encode(b"old").decode(), "b": base64.b64encode(b"kept").decode()},
        "stringData": {"a": "new", "c": "plain"},
    }
    code, body = http(server, "POST", SECRETS, secret)
    assert code == 201, body
    assert "stringData" not in body
    decoded = {k: base64.b64decode(v).decode() for k, v in body["data"].items()}
    assert decoded == {"a": "new", "b": "kept", "c": "plain"}
    code, body = http(
        server,
        "PATCH",
        f"{SECRETS}/sd",
        {"stringData": {"b": "patched"}},
        ctype="application/merge-patch+json",
    )
    assert code == 200, body
    assert "stringData" not in body
    assert base64.b64decode(body["data"]["b"]) == b"patched"


def test_host_check_names() -> None:
    from batch.sandbox.hostcheck import HostCheck

    check = HostCheck(("sandbox.internal", "[fd00::1]"))
    for host in ("127.0.0.2:80", "app.localhost", "sandbox.internal:6443", "[fd00::1]:1", ""):
        assert check.allows(host), host
    for host in ("evil.example.com", "127.0.0.1.evil.example.com", "[fd00::2]:1", "0.0.0.0"):
        assert not check.allows(host), host
    assert HostCheck(("*",)).allows("anything.example.com")


# Sandbox only: the sandbox's own check of its emulator's annotations.
@SANDBOX_ONLY
def test_emulator_annotations_must_be_numbers(server: Server) -> None:
    """Issue 20.3: `sandbox.tephra.io/run-seconds: nan` was stored; it is a field error now, on a
    pod and on a VCJob's pod template."""
    from .helpers import pod

    for ann in ({"sandbox.tephra.io/run-seconds": "nan"}, {"sandbox.tephra.io/exit-code": "-1"}):
        bad = pod("emu-bad")
        bad["metadata"]["annotations"] = ann
        code, body = http(server, "POST", "/api/v1/namespaces/default/pods", bad)
        assert code == 422, body
        assert next(iter(ann)) in body["details"]["causes"][0]["field"]
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "emu-inf"},
        "spec": {
            "tasks": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": "inf"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    },
                }
            ]
        },
    }
    code, body = http(
        server, "POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs", job
    )
    assert code == 422, body
    assert "spec.tasks[0].template.metadata.annotations" in body["details"]["causes"][0]["field"]
    good = pod("emu-good")
    good["metadata"]["annotations"] = {"sandbox.tephra.io/run-seconds": "0.5"}
    assert http(server, "POST", "/api/v1/namespaces/default/pods", good)[0] == 201


QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
MERGE = "application/merge-patch+json"


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


# Sandbox only: the sandbox embeds Tephra's admission; on a cluster it is the webhook.
@SANDBOX_ONLY
def test_updates_and_status_are_validated(server: Server) -> None:
    """Issue 19.2: a parent cycle by PATCH and a status PATCH with phase Bogus or running -7
    were accepted; deleting a queue with children must not be (issue 34.8: as Volcano v1.10,
    the queue's state does not matter)."""
    assert http(server, "POST", QUEUES, _queue("cyc-a"))[0] == 201
    assert http(server, "POST", QUEUES, _queue("cyc-b", parent="cyc-a"))[0] == 201
    code, body = http(
        server, "PATCH", f"{QUEUES}/cyc-a", {"spec": {"parent": "cyc-b"}}, ctype=MERGE
    )
    assert code == 422 and "cycle" in body["message"], body
    # Volcano v1.10: a queue in any state may be deleted, but not one with a child queue
    code, body = http(server, "DELETE", f"{QUEUES}/cyc-a")
    assert code == 422 and "has child queue 'cyc-b'" in body["message"], body
    closed = {"status": {"state": "Closed"}}
    assert http(server, "PATCH", f"{QUEUES}/cyc-b/status", closed, ctype=MERGE)[0] == 200
    assert http(server, "DELETE", f"{QUEUES}/cyc-b")[0] == 200
    assert http(server, "DELETE", f"{QUEUES}/cyc-a")[0] == 200
    code, body = http(server, "POST", QUEUES, _queue("g", guarantee={"resource": {"cpu": "2"}}))
    assert code == 422 and "deserved[cpu] must be >= guarantee[cpu]=2" in body["message"], body

    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "status-j"},
        "spec": {
            "tasks": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ]
        },
    }
    assert http(server, "POST", JOBS, job)[0] == 201
    for status in ({"state": {"phase": "Bogus"}}, {"running": -7}, {"retryCount": -1}):
        code, body = http(
            server, "PATCH", f"{JOBS}/status-j/status", {"status": status}, ctype=MERGE
        )
        assert code == 422, (status, body)
    ok = {"status": {"state": {"phase": "Running"}, "running": 1}}
    assert http(server, "PATCH", f"{JOBS}/status-j/status", ok, ctype=MERGE)[0] == 200
