"""AdmissionReview round-trips over HTTPS against `tephra webhook`'s server."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.controllers.webhook import self_signed, serve, server_ssl_context

CORPUS = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "corpus"
    / "volcano-examples"
    / "volcano"
    / "example"
)


class Server:
    def __init__(self, tmp: Path, facts: Any = None) -> None:
        self.facts = facts
        self.cert, self.key = self_signed(tmp, hosts=["localhost", "127.0.0.1"])
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()

            def ready(port: int) -> None:
                self.port = port
                self._ready.set()

            await serve(
                host="127.0.0.1",
                port=0,
                ssl_context=server_ssl_context(self.cert, self.key),
                facts=self.facts,
                stop=self._stop,
                on_ready=ready,
            )

        self._loop.run_until_complete(main())

    def stop(self) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def post(self, path: str, review: dict[str, Any]) -> dict[str, Any]:
        ctx = ssl.create_default_context(cafile=str(self.cert))
        req = urllib.request.Request(
            f"https://localhost:{self.port}{path}",
            data=json.dumps(review).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return dict(json.loads(resp.read()))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("tls"))
    yield s
    s.stop()


def review(
    obj: dict[str, Any],
    *,
    kind: str,
    group: str,
    version: str,
    op: str = "CREATE",
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "operation": op,
            "namespace": (obj.get("metadata") or {}).get("namespace", "default"),
            "object": obj,
            "oldObject": old,
        },
    }


def job(**spec: Any) -> dict[str, Any]:
    base = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {
            "tasks": [
                {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ]
        },
    }
    base["spec"].update(spec)
    return base


def test_healthz_over_tls(server: Server) -> None:
    ctx = ssl.create_default_context(cafile=str(server.cert))
    with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/healthz", context=ctx) as r:
        assert r.read() == b"ok"


def test_job_mutate_returns_defaults_patch(server: Server) -> None:
    out = server.post(
        "/jobs/mutate", review(job(), kind="Job", group="batch.volcano.sh", version="v1alpha1")
    )
    resp = out["response"]
    assert out["kind"] == "AdmissionReview" and resp["uid"] == "u-1" and resp["allowed"] is True
    assert resp["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(resp["patch"]))
    paths = {p["path"] for p in patch}
    assert "/spec/queue" in paths or any(p["path"] == "/spec" for p in patch)
    flat = json.dumps(patch)
    assert "default0" in flat  # task name default


def test_job_validate_allows_good_and_denies_bad_with_field_path(server: Server) -> None:
    ok = server.post(
        "/jobs/validate",
        review(
            job(queue="default", minAvailable=2),
            kind="Job",
            group="batch.volcano.sh",
            version="v1alpha1",
        ),
    )
    assert ok["response"]["allowed"] is True, ok
    bad = job(minAvailable=5)
    out = server.post(
        "/jobs/validate", review(bad, kind="Job", group="batch.volcano.sh", version="v1alpha1")
    )
    resp = out["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 422
    assert "spec.minAvailable" in resp["status"]["message"]
    assert any(c["field"] == "spec.minAvailable" for c in resp["status"]["details"]["causes"])


@pytest.mark.parametrize(
    "name",
    [
        "duplicatedPolicyEvent-webhook-deny.yaml",
        "minAvailable-webhook-deny.yaml",
        "duplicatedTaskName-webhook-deny.yaml",
    ],
)
def test_corpus_invalid_jobs_denied(server: Server, name: str) -> None:
    path = CORPUS / "invalid_jobs" / name
    if not path.exists():
        pytest.skip("corpus missing")
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if d)
    doc.setdefault("metadata", {}).setdefault("namespace", "default")
    out = server.post(
        "/validate", review(doc, kind="Job", group="batch.volcano.sh", version="v1alpha1")
    )
    resp = out["response"]
    assert resp["allowed"] is False
    assert "spec." in resp["status"]["message"]


def test_queue_and_podgroup_and_pod_endpoints(server: Server) -> None:
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "qq"},
        "spec": {"weight": 0},
    }
    mut = server.post(
        "/queues/mutate", review(q, kind="Queue", group="scheduling.volcano.sh", version="v1beta1")
    )
    assert mut["response"]["allowed"] is True
    assert "weight" in json.dumps(json.loads(base64.b64decode(mut["response"]["patch"])))
    bad_q = {**q, "spec": {"weight": 1, "capability": {"cpu": "1"}, "deserved": {"cpu": "2"}}}
    val = server.post(
        "/queues/validate",
        review(bad_q, kind="Queue", group="scheduling.volcano.sh", version="v1beta1"),
    )
    assert val["response"]["allowed"] is False
    assert "spec." in val["response"]["status"]["message"]
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 1},
    }
    out = server.post(
        "/podgroups/validate",
        review(pg, kind="PodGroup", group="scheduling.volcano.sh", version="v1beta1"),
    )
    assert out["response"]["allowed"] is True
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    out = server.post("/pods/validate", review(pod, kind="Pod", group="", version="v1"))
    assert out["response"]["allowed"] is True


def test_garbage_body_is_400(server: Server) -> None:
    ctx = ssl.create_default_context(cafile=str(server.cert))
    req = urllib.request.Request(
        f"https://localhost:{server.port}/validate", data=b"not json", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx, timeout=5)
    assert err.value.code == 400


def _task(**kw: Any) -> dict[str, Any]:
    t: dict[str, Any] = {
        "name": "t",
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    t.update(kw)
    return t


BAD_JOBS: list[tuple[str, dict[str, Any], str]] = [
    ("no tasks", {"tasks": []}, "spec.tasks"),
    ("duplicate task names", {"tasks": [_task(), _task()]}, "spec.tasks"),
    (
        "task minAvailable > replicas",
        {"tasks": [_task(minAvailable=3)]},
        "spec.tasks[0].minAvailable",
    ),
    ("job minAvailable > replicas", {"minAvailable": 9, "tasks": [_task()]}, "spec.minAvailable"),
    ("unknown plugin", {"plugins": {"nope": []}, "tasks": [_task()]}, "spec.plugins"),
    (
        "event and exitCode",
        {
            "policies": [{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}],
            "tasks": [_task()],
        },
        "spec.policies",
    ),
    (
        "exitCode 0",
        {"policies": [{"exitCode": 0, "action": "AbortJob"}], "tasks": [_task()]},
        "spec.policies",
    ),
    (
        "* with other events",
        {"policies": [{"events": ["*", "PodFailed"], "action": "AbortJob"}], "tasks": [_task()]},
        "spec.policies",
    ),
    (
        "duplicate policy event",
        {
            "policies": [
                {"event": "PodFailed", "action": "AbortJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "tasks": [_task()],
        },
        "spec.policies",
    ),
    ("negative replicas", {"tasks": [_task(replicas=-1)]}, "spec.tasks[0].replicas"),
    (
        "negative ttl",
        {"ttlSecondsAfterFinished": -1, "tasks": [_task()]},
        "spec.ttlSecondsAfterFinished",
    ),
    (
        "volume without mountPath",
        {"volumes": [{"volumeClaimName": "x"}], "tasks": [_task()]},
        "spec.volumes",
    ),
    ("root queue", {"queue": "root", "tasks": [_task()]}, "spec.queue"),
]


@pytest.mark.parametrize(("label", "spec", "path"), BAD_JOBS, ids=[b[0] for b in BAD_JOBS])
def test_every_rejection_rule_denied_with_field_path(
    server: Server, label: str, spec: dict[str, Any], path: str
) -> None:
    body = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": spec,
    }
    out = server.post(
        "/jobs/validate", review(body, kind="Job", group="batch.volcano.sh", version="v1alpha1")
    )
    resp = out["response"]
    assert resp["allowed"] is False, label
    assert resp["status"]["code"] == 422
    fields = [c["field"] for c in resp["status"]["details"]["causes"]]
    assert any(f.startswith(path) for f in fields), (label, fields, resp["status"]["message"])
    assert path.split("[", maxsplit=1)[0] in resp["status"]["message"]


def test_pod_mutate_injects_gang_for_opted_in_namespace() -> None:
    from batch.api.admission import StaticLookup
    from batch.api.integration import default_adapters
    from batch.controllers.webhook import review_response

    adapters = list(default_adapters())
    if not any(a.name == "pytorch" for a in adapters):
        pytest.skip("pytorch adapter entry point not installed")
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"tephra.io/gang-injection": "enabled"}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-0",
            "namespace": "ml",
            "labels": {
                "training.kubeflow.org/job-name": "train",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": "worker",
            },
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "train",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    rv = review(pod, kind="Pod", group="", version="v1")
    out = review_response(rv, mutate=True, lookup=StaticLookup([], [ns]), adapters=adapters)
    ops = json.loads(base64.b64decode(out["response"]["patch"]))
    flat = json.dumps(ops)
    assert "schedulerName" in flat and "scheduling.k8s.io/group-name" in flat
    # a namespace that did not opt in: no injection
    other = review_response(rv, mutate=True, lookup=StaticLookup([], []), adapters=adapters)
    assert "group-name" not in base64.b64decode(other["response"].get("patch", "") or b"").decode()
