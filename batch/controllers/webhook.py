"""The admission webhook server: AdmissionReview v1 over HTTPS, answered by `batch.api.admit`.

Endpoints (Volcano's paths, plus generic ones that read the kind from the request):
`/jobs/mutate`, `/jobs/validate`, `/queues/mutate`, `/queues/validate`, `/podgroups/mutate`,
`/podgroups/validate`, `/pods/mutate`, `/pods/validate`, `/cronjobs/validate`, `/mutate`,
`/validate`, `/healthz`.
Mutating endpoints answer a JSONPatch (base64) and always allow; validating endpoints deny with
HTTP-style code 422, reason `Invalid`, and one line per violated rule naming the field path.
Queue and namespace facts for the rules that need them come from the cluster (when a kubeconfig
is given) or are assumed (development). TLS from files, or a self-signed pair for development.
The size limits (`AdmissionLimits`) are the server's, given once to `make_app`/`serve`; a body
over `MAX_BODY_BYTES` is a 413; a small one is answered on the event loop, and at most
`concurrency` large ones are worked on at once, in threads (`webhook_gate`): a large review that
finds no slot in time is answered busy at once (`busy_answer`).
A Command targeting a Queue (`/commands/validate`) is also refused, with code 403, unless a
SubjectAccessReview says its requester may update that Queue (`batch.api.admission.access`);
the check fails closed: no cluster, no answer in time, no Command.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import re
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from batch.api.admission import (
    DEFAULT_LIMITS,
    AccessVerdict,
    AdmissionLimits,
    AdmissionResult,
    AssumeAllQueues,
    StaticLookup,
    access_needed,
    access_review,
    access_verdict,
    admit,
)
from batch.controllers.webhook_gate import AdmissionGate, Busy
from batch.kube.certs import self_signed

__all__ = [
    "ADMISSION_GATE",
    "ClusterFacts",
    "busy_answer",
    "make_app",
    "review_response",
    "self_signed",
    "serve",
    "server_ssl_context",
]

log = logging.getLogger(__name__)

Lookup = Any
LookupFactory = Callable[[Mapping[str, Any]], "asyncio.Future[Lookup] | Any"]

#: The apiserver's default `timeoutSeconds` of a webhook (admissionregistration.k8s.io/v1).
DEFAULT_TIMEOUT_SECONDS = 10.0

#: The largest AdmissionReview body read. The apiserver takes request bodies of at most 3 MiB,
#: and a review of an UPDATE carries the object and the stored one (etcd: at most 1.5 MiB).
MAX_BODY_BYTES = 6 * 1024 * 1024

#: Bodies up to this size are decoded and answered on the event loop, at once: their work is
#: bounded by their size (a few milliseconds), and they never queue behind a large review.
INLINE_BYTES = 64 * 1024
#: Large reviews worked on at once (`--concurrency`), each in a worker thread: one process, so
#: more slots only share one core thinner, and the event loop keeps its share for small ones.
DEFAULT_CONCURRENCY = 2
#: Large reviews that may wait for a slot, per slot; any more are answered busy at once.
WAITING_PER_SLOT = 4

#: The app's gate of large reviews (`AdmissionGate`): how many run and wait, for a probe or test.
ADMISSION_GATE = web.AppKey("admission_gate", AdmissionGate)

#: The one API the webhook writes to (the review is not stored: only its answer comes back).
_ACCESS_REVIEW_API = "authorization.k8s.io/v1"

_PATH_KINDS = {
    "jobs": "Job",
    "queues": "Queue",
    "podgroups": "PodGroup",
    "pods": "Pod",
    "commands": "Command",
    "cronjobs": "CronJob",
}


def review_response(
    review: Mapping[str, Any],
    *,
    mutate: bool,
    lookup: Lookup,
    kind: str | None = None,
    adapters: Sequence[Any] = (),
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Answer one AdmissionReview (pure; `lookup` as for `admit`).

    Pod CREATE on the mutating endpoint also gets the opt-in gang injection of the framework
    adapters (`batch.api.integration.mutate_pod_for_gang`: schedulerName, group annotation,
    role) when the pod's namespace opted in.
    """
    request = review.get("request") or {}
    uid = _uid(request)
    req_kind = _request_kind(request, kind)
    operation = str(request.get("operation") or "CREATE")
    obj = request.get("object") or {}
    old = request.get("oldObject")
    if operation == "DELETE" and not obj:
        obj = old or {}
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    try:
        result = admit(
            kind=req_kind, operation=operation, obj=obj, old=old, lookup=lookup, limits=limits
        )
    except Exception as exc:  # admission must answer, never crash the server
        log.exception("admission of %s failed", req_kind)
        response.update(
            allowed=False,
            status={"code": 500, "reason": "InternalError", "message": f"admission error: {exc}"},
        )
        return _wrap(review, response)
    if not result.allowed and (result.early or not mutate):
        response.update(allowed=False, status=_denial(result))
    elif mutate:
        ops = list(result.patch)
        if req_kind == "Pod" and operation == "CREATE" and adapters:
            from batch.api.integration import mutate_pod_for_gang

            meta = result.object.get("metadata")
            ns = str(request.get("namespace") or (meta or {}).get("namespace") or "")
            ns_obj = lookup.get_namespace(ns) if lookup is not None and ns else None
            ops += mutate_pod_for_gang(result.object, namespace_obj=ns_obj, adapters=adapters)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    return _wrap(review, response)


def _denial(result: AdmissionResult) -> dict[str, Any]:
    """The `status` of a refusal: 422 Invalid, or 400 BadRequest for an object nested too deeply
    to be one of ours; one line per violated rule, and the rules as causes."""
    bad = any(e.rule == "maxDepth" for e in result.errors)
    causes = [{"field": e.path, "reason": e.rule, "message": e.message} for e in result.errors]
    return {
        "code": 400 if bad else 422,
        "reason": "BadRequest" if bad else "Invalid",
        "message": "; ".join(result.messages()),
        "details": {"causes": causes},
    }


def _uid(request: Mapping[str, Any]) -> str:
    """The request's uid, which the answer must repeat (the apiserver always sends a string)."""
    uid = request.get("uid")
    return uid if isinstance(uid, str) else ""


def _request_kind(request: Mapping[str, Any], kind: str | None) -> str:
    """The kind under review: the request's own, else the endpoint's (`/jobs/...`)."""
    gvk = request.get("kind")
    own = gvk.get("kind") if isinstance(gvk, Mapping) else None
    return str(own or kind or "")


def deny_access(body: dict[str, Any], verdict: AccessVerdict) -> dict[str, Any]:
    """`body` (an answer of `review_response`) turned into a 403 denial naming the rule, when
    `verdict` refuses the requester a right the object needs; unchanged when it does not."""
    error = verdict.error
    if verdict.allowed or error is None:
        return body
    cause = {"field": error.path, "reason": error.rule, "message": error.message}
    body["response"].update(
        allowed=False,
        status={
            "code": 403,
            "reason": "Forbidden",
            "message": verdict.message,
            "details": {"causes": [cause]},
        },
    )
    return body


def _wrap(review: Mapping[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": str(review.get("apiVersion") or "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


class ClusterFacts:
    """Queues and namespaces read from the API for each review (cheap: two GETs/LISTs)."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self.kubeconfig = kubeconfig
        self._client: Any = None

    async def _open(self) -> Any:
        from batch.kube.client import KubeClient
        from batch.kube.config import load_access

        if self._client is None:
            self._client = KubeClient(load_access(self.kubeconfig))
            await self._client.open()
        return self._client

    async def review_access(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The API server's answer to a SubjectAccessReview (`body`, see `access_review`)."""
        from batch.kube.client import Resource

        reviews = Resource(
            _ACCESS_REVIEW_API, "subjectaccessreviews", "SubjectAccessReview", namespaced=False
        )
        client = await self._open()
        answer: Mapping[str, Any] = await client.create(reviews, body)
        return answer

    async def lookup(self, review: Mapping[str, Any]) -> Lookup:
        from batch.controllers.shell import NAMESPACES, QUEUES, get_or_none, list_items

        await self._open()
        request = review.get("request") or {}
        ns_name = request.get("namespace")
        queues = await list_items(self._client, QUEUES)
        namespaces = []
        if ns_name:
            ns = await get_or_none(self._client, NAMESPACES, str(ns_name))
            if ns is not None:
                namespaces.append(ns)
        return StaticLookup(queues, namespaces)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


def facts_budget(timeout: str | None) -> float:
    """Seconds the cluster reads of one review may take: half the apiserver's `?timeout=`.

    The apiserver gives up on the webhook after `timeoutSeconds` (sent as e.g. `10s`); the rest
    of the budget is for TLS, the rules and the answer. Unparsable or absent: half of 10 s.
    """
    found = re.fullmatch(r"(\d+(?:\.\d+)?)s", timeout or "")
    seconds = float(found.group(1)) if found else DEFAULT_TIMEOUT_SECONDS
    return max(0.2, seconds / 2)


async def _facts_within(facts: ClusterFacts, review: Mapping[str, Any], budget: float) -> Lookup:
    """The cluster facts, or None (queue checks skipped) when unavailable within `budget` s."""
    try:
        return await asyncio.wait_for(facts.lookup(review), budget)
    except TimeoutError:
        log.warning("cluster facts not read within %.1f s; queue checks skipped", budget)
    except Exception as exc:
        log.warning("cluster facts unavailable (%s); queue checks skipped", exc)
    return None


async def authorize(
    facts: ClusterFacts | None, review: Mapping[str, Any], *, kind: str | None, budget: float
) -> AccessVerdict:
    """Whether the requester of the object under review holds the rights it needs beyond the
    request's own (a queue Command: update on the Queue), asked of the cluster within `budget`
    seconds. Refused when it cannot be asked: no cluster (`--assume-queues`), an error, late."""
    request = review.get("request") or {}
    obj = request.get("object")
    operation = str(request.get("operation") or "CREATE")
    need = access_needed(
        _request_kind(request, kind), operation, obj if isinstance(obj, dict) else {}
    )
    if need is None:
        return AccessVerdict(True)
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    if facts is None:
        return access_verdict(need, user, None, error="the webhook does not read the cluster")
    try:
        answer = await asyncio.wait_for(facts.review_access(access_review(user, need)), budget)
    except TimeoutError:
        return access_verdict(need, user, None, error=f"no answer within {budget:.1f} s")
    except Exception as exc:
        log.warning("SubjectAccessReview for %s failed: %s", need.ref, exc)
        return access_verdict(need, user, None, error=str(exc))
    return access_verdict(need, user, answer)


async def _read_review(request: web.Request) -> dict[str, Any] | web.Response:
    """The AdmissionReview of the body, or the 400 answer for a body that is none (413 for one
    over `MAX_BODY_BYTES`, refused before it is read when its length is announced)."""
    too_big = {"message": f"body over the limit of {MAX_BODY_BYTES} bytes of an AdmissionReview"}
    if (request.content_length or 0) > MAX_BODY_BYTES:
        return web.json_response(too_big, status=413)
    try:
        raw = await request.read()
        # a large body is decoded off the event loop, which keeps answering small reviews
        large = len(raw) > INLINE_BYTES
        review = await asyncio.to_thread(json.loads, raw) if large else json.loads(raw)
    except web.HTTPRequestEntityTooLarge:
        return web.json_response(too_big, status=413)
    except RecursionError:
        return web.json_response({"message": "body is nested too deeply"}, status=400)
    except (ValueError, UnicodeDecodeError):
        return web.json_response({"message": "body is not an AdmissionReview JSON"}, status=400)
    if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
        return web.json_response({"message": "missing request"}, status=400)
    return review


def busy_answer(review: Mapping[str, Any], kind: str | None, why: str) -> dict[str, Any]:
    """The answer when no admission slot is free: what the apiserver would do when the webhook
    does not answer, only at once and saying why. Tephra's kinds are registered with
    `failurePolicy: Fail`, so they are refused (429, retry later: nothing is admitted
    unvalidated); pods with `Ignore`, so a pod is allowed unchanged, with a warning."""
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": _uid(request), "allowed": True}
    message = f"the Tephra admission webhook is busy ({why}); retry"
    if _request_kind(request, kind) == "Pod":
        response["warnings"] = [f"{message}; admitted unchanged (failure policy Ignore)"]
    else:
        response.update(
            allowed=False, status={"code": 429, "reason": "TooManyRequests", "message": message}
        )
    return _wrap(review, response)


def _load_adapters(adapters: Sequence[Any] | None) -> list[Any]:
    """`adapters`, or by default those of the `tephra.integrations` entry points."""
    if adapters is not None:
        return list(adapters)
    try:
        from batch.api.integration import default_adapters

        return list(default_adapters())
    except Exception:  # an adapter failing to load must not stop admission
        log.exception("loading tephra.integrations adapters failed")
        return []


def make_app(
    *,
    facts: ClusterFacts | None = None,
    adapters: Sequence[Any] | None = None,
    limits: AdmissionLimits = DEFAULT_LIMITS,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> web.Application:
    """The aiohttp application serving every endpoint (`adapters` default: the entry points).
    A review of a body up to `INLINE_BYTES` is answered on the event loop; of the larger ones at
    most `concurrency` are worked on at once, in threads, and 4 per slot wait (`AdmissionGate`)."""
    gang_adapters = _load_adapters(adapters)
    gate = AdmissionGate(slots=concurrency, waiting=concurrency * WAITING_PER_SLOT)

    async def handle(request: web.Request) -> web.Response:
        review = await _read_review(request)
        if isinstance(review, web.Response):
            return review
        parts = [p for p in request.path.split("/") if p]
        mutate = parts[-1] == "mutate"
        kind = _PATH_KINDS.get(parts[0]) if len(parts) == 2 else None
        loop = asyncio.get_running_loop()
        budget = facts_budget(request.query.get("timeout"))
        deadline = loop.time() + budget
        lookup: Lookup = AssumeAllQueues()
        if facts is not None:
            lookup = await _facts_within(facts, review, budget)
        answer = functools.partial(
            review_response, mutate=mutate, kind=kind, adapters=gang_adapters, limits=limits
        )
        try:
            left = max(0.2, deadline - loop.time())
            work = functools.partial(answer, review, lookup=lookup)
            small = len(await request.read()) <= INLINE_BYTES  # read once: cached
            body = work() if small else await gate.run(left, work)
        except Busy as exc:
            log.warning("admission refused as busy: %s", exc)
            return web.json_response(busy_answer(review, kind, str(exc)))
        if not mutate and body["response"]["allowed"]:
            left = max(0.2, deadline - loop.time())  # one budget for all the reads
            deny_access(body, await authorize(facts, review, kind=kind, budget=left))
        return web.json_response(body)

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[ADMISSION_GATE] = gate
    for path in _PATH_KINDS:
        app.router.add_post(f"/{path}/mutate", handle)
        app.router.add_post(f"/{path}/validate", handle)
    app.router.add_post("/mutate", handle)
    app.router.add_post("/validate", handle)
    app.router.add_get("/healthz", healthz)
    if facts is not None:

        async def _close(_app: web.Application) -> None:
            await facts.close()

        app.on_cleanup.append(_close)
    return app


def server_ssl_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """TLS 1.2 or newer; on 1.2 only ECDHE with an AEAD cipher (AES-GCM, ChaCha20), as Go's
    secure default suites (TLS 1.3 suites are all AEAD)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


async def serve(
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    facts: ClusterFacts | None,
    stop: asyncio.Event,
    on_ready: Callable[[int], None] | None = None,
    adapters: Sequence[Any] | None = None,
    limits: AdmissionLimits = DEFAULT_LIMITS,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> None:
    """Serve until `stop` is set; `on_ready(port)` once listening (port 0 picks one)."""
    app = make_app(facts=facts, adapters=adapters, limits=limits, concurrency=concurrency)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    bound = port
    server = getattr(site, "_server", None)
    sockets: Iterable[Any] = getattr(server, "sockets", None) or []
    for sock in sockets:
        bound = int(sock.getsockname()[1])
        break
    if on_ready is not None:
        on_ready(bound)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
