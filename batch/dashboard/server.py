"""The dashboard's HTTP server (aiohttp): pages, the JSON API behind them, a change stream.

Why aiohttp: it is already Tephra's HTTP stack (the asyncio Kubernetes client, the sandbox), so
the server, the watches feeding it and the ledger worker share one event loop and one library.

Security (`batch.dashboard.guard`): reads are GET; the one action (a what-if replay) is a POST
with the form's CSRF value; every other method is 405 before routing. Every request passes a
Host allow-list (against DNS rebinding), a same-origin check and, with a token, the token.
Loopback is the default binding; `tephra dashboard` makes a token when bound anywhere else.
A proxy that authenticates people (OIDC) sits in front and passes the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from batch.api.errors import UserError, one_line
from batch.dashboard import gangs, pages, racks, views
from batch.dashboard.guard import COOKIE, CSRF_FIELD, HostGuard, same_token
from batch.dashboard.history import History
from batch.dashboard.state import LiveState, reflectors
from batch.dashboard.whatif import WhatIfRuns
from batch.kube.client import KubeClient
from batch.kube.config import ClusterAccess
from batch.kube.informer import ReflectorSet
from batch.sandbox.loopthread import LoopThread

__all__ = ["Dashboard", "DashboardThread", "make_app"]

log = logging.getLogger(__name__)

FRAGMENT = "X-Dashboard-Fragment"
#: how often a change stream looks at the state's version (an in-memory integer)
STREAM_TICK = 0.5
SYNC_TIMEOUT = 30.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Dashboard:
    """Live state from the watches plus the ledger's history, and what feeds them."""

    access: ClusterAccess
    history: History
    token: str | None = None
    #: what-if replays (`--allow-whatif`); None: off
    whatif: WhatIfRuns | None = None
    #: Host names answered besides loopback names and IP literals (`--allowed-host`; `*`: any)
    allowed_hosts: tuple[str, ...] = ()
    #: the value the what-if form posts back (a cross-site page cannot read it)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    state: LiveState = field(default_factory=LiveState)
    _client: KubeClient | None = None
    _reflectors: ReflectorSet | None = None
    _memo: dict[tuple[Any, ...], tuple[int, Any]] = field(default_factory=dict)

    async def start(self) -> None:
        self._client = KubeClient(self.access)
        await self._client.open()
        self._reflectors = reflectors(self._client, self.state)
        self._reflectors.start()

    async def stop(self) -> None:
        if self._reflectors is not None:
            await self._reflectors.stop()
        if self._client is not None:
            await self._client.close()

    async def synced(self) -> bool:
        """Whether every kind has been listed, waiting up to SYNC_TIMEOUT seconds for it."""
        return self._reflectors is not None and await self._reflectors.wait_synced(SYNC_TIMEOUT)

    def is_synced(self) -> bool:
        """Whether every kind has been listed and every watch is up, now."""
        sets = self._reflectors.reflectors if self._reflectors is not None else []
        return bool(sets) and all(r.synced.is_set() for r in sets) and self.down_since() is None

    def down_since(self) -> float | None:
        """Since when a list or watch of the API server has been failing; None: all work."""
        return self._reflectors.down_since() if self._reflectors is not None else None

    def connection(self) -> str:
        """What the pages say about the watches: "live, version N" or when they broke."""
        down = self.down_since()
        if down is None:
            return f"live, version {self.state.version}"
        return f"disconnected since {time.strftime('%H:%M', time.gmtime(down))} UTC"

    def view(self, name: str, fn: Callable[[], Any], *args: Any) -> Any:
        """`fn()`, computed once per state version for (name, args)."""
        key = (name, *args)
        cached = self._memo.get(key)
        if cached is not None and cached[0] == self.state.version:
            return cached[1]
        if len(self._memo) > 256:
            self._memo.clear()
        value = fn()
        self._memo[key] = (self.state.version, value)
        return value


DASH = web.AppKey("dashboard", Dashboard)
GUARD = web.AppKey("guard", HostGuard)


_METHODS = ("GET", "HEAD", "POST")


@web.middleware
async def methods(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method not in _METHODS:
        raise web.HTTPMethodNotAllowed(request.method, list(_METHODS), text="read-only\n")
    return await handler(request)


@web.middleware
async def same_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The Host allow-list and the same-origin check (`batch.dashboard.guard`)."""
    guard = request.app[GUARD]
    host = request.headers.get("Host", "")
    refusal = guard.host_refusal(host) or guard.origin_refusal(request.headers.get("Origin"), host)
    if refusal is not None:
        raise web.HTTPForbidden(text=refusal + "\n")
    response = await handler(request)
    # no Referer to other sites (`no-referrer` would make Chromium send `Origin: null` on the
    # dashboard's own form posts); no other site frames the what-if form
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
    return response


def _bearer_of(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else ""


@web.middleware
async def bearer(request: web.Request, handler: Handler) -> web.StreamResponse:
    token = request.app[DASH].token
    if token is None:
        return await handler(request)
    given = _bearer_of(request) or request.cookies.get(COOKIE, "")
    if same_token(given, token):
        return await handler(request)
    from_query = request.query.get("token", "")
    if from_query and request.method == "GET" and same_token(from_query, token):
        # the cookie carries it from now on; the address bar and history lose it
        kept = [(k, v) for k, v in request.query.items() if k != "token"]
        response = web.HTTPSeeOther(request.rel_url.with_query(kept))
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        raise response
    raise web.HTTPUnauthorized(
        text="a bearer token is required\n", headers={"WWW-Authenticate": "Bearer"}
    )


def _json(data: Any) -> web.Response:
    return web.json_response(data, dumps=lambda d: json.dumps(d, default=str))


async def _ready(request: web.Request) -> Dashboard:
    dash = request.app[DASH]
    if not await dash.synced():
        raise web.HTTPServiceUnavailable(text="the cluster's state is still loading\n")
    return dash


def _query(request: web.Request) -> gangs.JobQuery:
    try:
        return gangs.JobQuery.parse(request.query)
    except gangs.QueryError as exc:
        raise web.HTTPBadRequest(text=f"{one_line(exc)}\n") from None


def _detail(dash: Dashboard, page: str, request: web.Request) -> Any:
    ns, name = request.match_info["namespace"], request.match_info["name"]
    state = dash.state
    if page == "podgroup":
        model = dash.view(page, lambda: gangs.podgroup_detail(state, ns, name), ns, name)
        what = "PodGroup"
    else:
        model = dash.view(page, lambda: views.job_detail(state, ns, name), ns, name)
        what = "job"
    if model is None:
        raise web.HTTPNotFound(text=f"no {what} {ns}/{name}\n")
    return model


async def _model(request: web.Request, page: str) -> Any:
    dash = await _ready(request)
    state = dash.state
    if page == "overview":
        return dash.view(page, lambda: views.overview(state))
    if page == "queues":
        return dash.view(page, lambda: views.queues(state))
    if page == "jobs":
        query = _query(request)
        rows = dash.view("gang-rows", lambda: gangs.gang_rows(state))
        return gangs.jobs(rows, query, time.time())
    if page == "nodes":
        return dash.view(page, lambda: racks.nodes(state))
    if page == "history":
        return await asyncio.to_thread(dash.history.read)
    return _detail(dash, page, request)


_PAGES: dict[str, tuple[str, Callable[[web.Request, Any], str]]] = {
    "overview": ("/", lambda _r, m: pages.overview_page(m)),
    "queues": ("/queues", lambda _r, m: pages.queues_page(m)),
    "jobs": ("/jobs", lambda r, m: pages.jobs_page(m, _query(r))),
    "nodes": ("/nodes", lambda _r, m: pages.nodes_page(m)),
    "podgroup": ("/jobs", lambda _r, m: pages.podgroup_page(m)),
    "history": ("/history", lambda _r, m: pages.history_page(m)),
    "job": ("/jobs", lambda _r, m: pages.job_page(m)),
}


def _html_handler(page: str) -> Handler:
    nav, render = _PAGES[page]

    async def handle(request: web.Request) -> web.StreamResponse:
        main = render(request, await _model(request, page))
        if request.headers.get(FRAGMENT):
            return web.Response(text=main, content_type="text/html")
        body = pages.layout(page, nav, main, request.app[DASH].connection())
        return web.Response(text=body, content_type="text/html")

    return handle


def _api_handler(page: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return _json(await _model(request, page))

    return handle


async def stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: `Dashboard.connection()`, whenever it changed (at most every tick)."""
    dash = request.app[DASH]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    seen, idle = "", 0.0
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        while True:
            now = dash.connection()
            if now != seen:
                await response.write(f"data: {now}\n\n".encode())
                seen, idle = now, 0.0
            elif idle >= 15:
                await response.write(b": keep-alive\n\n")
                idle = 0.0
            await asyncio.sleep(STREAM_TICK)
            idle += STREAM_TICK
    return response


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")


async def status(request: web.Request) -> web.StreamResponse:
    dash = request.app[DASH]
    counts = {kind: len(objs) for kind, objs in dash.state.objects.items()}
    down = dash.down_since()
    return _json(
        {
            "synced": dash.is_synced(),
            "connection": dash.connection(),
            "disconnected_since": None if down is None else _iso(down),
            "version": dash.state.version,
            "objects": counts,
        }
    )


def _runs(request: web.Request) -> WhatIfRuns:
    runs = request.app[DASH].whatif
    if runs is None:
        raise web.HTTPNotFound(text="what-if is off: start the dashboard with --allow-whatif\n")
    return runs


def _page(request: web.Request, main: str) -> web.Response:
    if request.headers.get(FRAGMENT):
        return web.Response(text=main, content_type="text/html")
    body = pages.layout("what-if", "/whatif", main, request.app[DASH].connection())
    return web.Response(text=body, content_type="text/html")


async def whatif_form(request: web.Request) -> web.StreamResponse:
    runs = [r.as_dict() for r in _runs(request).runs]
    return _page(request, pages.whatif_page(runs, request.app[DASH].csrf))


async def whatif_start(request: web.Request) -> web.StreamResponse:
    """POST: start a replay of the changes in `set` (repeatable); then show its page.

    The form's CSRF value must come back (field `csrf` or header X-CSRF-Token) unless the
    request carries the bearer token itself, which no other site's page can send."""
    runs = _runs(request)
    form = await request.post()
    dash = request.app[DASH]
    given = str(form.get(CSRF_FIELD) or request.headers.get("X-CSRF-Token") or "")
    if not same_token(given, dash.csrf) and not (dash.token and _bearer_of(request)):
        raise web.HTTPForbidden(text="the what-if form's csrf value is missing or stale\n")
    await _ready(request)
    changes = [str(c).strip() for c in form.getall("set", []) if str(c).strip()]
    try:
        run = runs.start(changes, dash.state.items("Node"))
    except UserError as exc:
        raise web.HTTPBadRequest(text=f"{one_line(exc)}\n") from None
    raise web.HTTPSeeOther(f"/whatif/{run.id}")


def _run(request: web.Request) -> dict[str, Any]:
    run = _runs(request).get(int(request.match_info["id"]))
    if run is None:
        raise web.HTTPNotFound(text="no such what-if run\n")
    return run.as_dict()


async def whatif_run(request: web.Request) -> web.StreamResponse:
    return _page(request, pages.whatif_run_page(_run(request)))


async def whatif_run_api(request: web.Request) -> web.StreamResponse:
    return _json(_run(request))


def make_app(dash: Dashboard) -> web.Application:
    """The application: HTML pages, `/api/...` JSON of the same models, the change stream."""
    app = web.Application(middlewares=[methods, same_origin, bearer])
    app[DASH] = dash
    app[GUARD] = HostGuard(dash.allowed_hosts)
    routes = [
        ("/", "overview"),
        ("/queues", "queues"),
        ("/jobs", "jobs"),
        ("/nodes", "nodes"),
        ("/history", "history"),
        ("/jobs/{namespace}/{name}", "job"),
        ("/podgroups/{namespace}/{name}", "podgroup"),
    ]
    for path, page in routes:
        app.router.add_get(path, _html_handler(page))
        app.router.add_get("/api" + ("/overview" if path == "/" else path), _api_handler(page))
    app.router.add_get("/whatif", whatif_form)
    app.router.add_post("/whatif/start", whatif_start)
    app.router.add_get(r"/whatif/{id:\d+}", whatif_run)
    app.router.add_get(r"/api/whatif/{id:\d+}", whatif_run_api)
    app.router.add_get("/api/stream", stream)
    app.router.add_get("/api/status", status)

    async def lifecycle(_app: web.Application) -> Any:
        await dash.start()
        yield
        await dash.stop()

    app.cleanup_ctx.append(lifecycle)
    return app


class DashboardThread(LoopThread):
    """The dashboard on its own event loop in a daemon thread (tests, `tephra demo`)."""

    what = "the dashboard"
    stop_timeout = 30.0

    def __init__(self, dash: Dashboard, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__("tephra-dashboard")
        self.dash, self.host, self.port = dash, host, port
        self._runner: web.AppRunner | None = None

    async def setup(self) -> None:
        self._runner = web.AppRunner(make_app(self.dash))
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = int(self._runner.addresses[0][1])

    async def teardown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"
