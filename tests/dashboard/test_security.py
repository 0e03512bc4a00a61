"""The dashboard against a hostile web page (issue 30.4): DNS rebinding, cross-site reads and
posts, GET that starts work, the token's cookie. Each request is sent as the browser would send
it (the Host and Origin headers are the attack), over HTTP to a live sandbox."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import pytest

from batch.cli.dashboard import _allowed, _token
from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.dashboard.whatif import WhatIfRuns
from batch.kube.config import load_access

from .conftest import Live

pytestmark = pytest.mark.xdist_group("dashboard")

WHATIF = {"set": "queue=team-a,weight=3"}


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: str


def call(url: str, method: str = "GET", body: str = "", **headers: str) -> Reply:
    """One request, no redirect followed; `Host` defaults to the URL's."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=60)
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    if body:
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, sent)
        resp = conn.getresponse()
        return Reply(resp.status, resp.headers, resp.read().decode())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def served(live: Live) -> Iterator[tuple[str, Dashboard]]:
    """A dashboard with what-if on and one extra allowed name, no token (loopback)."""
    dash = Dashboard(
        load_access(live.sb.kubeconfig_path),
        History(None),
        whatif=WhatIfRuns(live.db_url, since="1d"),
        allowed_hosts=("dash.example",),
    )
    server = DashboardThread(dash).start()
    try:
        assert call(server.url + "/api/overview").status == 200
        yield server.url, dash
    finally:
        server.stop()


def test_a_rebound_host_name_is_refused(served: tuple[str, Dashboard]) -> None:
    url, _dash = served
    port = urlsplit(url).port
    refused = call(url + "/api/jobs", Host=f"evil.example:{port}")
    assert refused.status == 403, refused
    assert refused.body.startswith(f"Host 'evil.example:{port}' is not allowed"), refused.body
    assert "DNS rebinding" in refused.body
    assert call(url + "/", Host=f"evil.example:{port}").status == 403
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", f"10.1.2.3:{port}"):
        assert call(url + "/api/overview", Host=host).status == 200, host
    assert call(url + "/api/overview", Host=f"dash.example:{port}").status == 200


def test_a_cross_site_page_cannot_read_the_api(served: tuple[str, Dashboard]) -> None:
    url, _dash = served
    for origin in ("http://evil.example", "null", "http://localhost:1"):
        refused = call(url + "/api/jobs", Origin=origin)
        assert refused.status == 403, (origin, refused)
        assert refused.body.startswith(f"Origin {origin!r} is not allowed"), refused.body
    assert call(url + "/api/jobs", Origin=url).status == 200


def _csrf(url: str) -> str:
    found = re.search(r'name=csrf value="([^"]+)"', call(url + "/whatif").body)
    assert found, "the what-if form carries no csrf value"
    return found.group(1)


def test_get_never_starts_a_replay(served: tuple[str, Dashboard]) -> None:
    url, dash = served
    assert dash.whatif is not None
    before = len(dash.whatif.runs)
    got = call(url + "/whatif/start?" + urlencode(WHATIF))
    assert got.status == 405 and "POST" in got.headers["Allow"], got
    # a cross-site form post: refused by its Origin, and it could not know the csrf value
    body = urlencode({**WHATIF, "csrf": _csrf(url)})
    assert call(url + "/whatif/start", "POST", body, Origin="http://evil.example").status == 403
    assert call(url + "/whatif/start", "POST", body, Origin="null").status == 403
    no_csrf = call(url + "/whatif/start", "POST", urlencode(WHATIF), Origin=url)
    assert no_csrf.status == 403 and "csrf" in no_csrf.body, no_csrf
    wrong = call(url + "/whatif/start", "POST", urlencode({**WHATIF, "csrf": "x"}), Origin=url)
    assert wrong.status == 403
    assert len(dash.whatif.runs) == before
    # the dashboard's own form, posted from its own page, starts one
    started = call(url + "/whatif/start", "POST", body, Origin=url)
    assert started.status == 303 and started.headers["Location"].startswith("/whatif/"), started
    assert len(dash.whatif.runs) == before + 1
    # a script may send the value as a header instead (past the check: one replay at a time)
    header = call(url + "/whatif/start", "POST", urlencode(WHATIF), X_CSRF_Token=_csrf(url))
    assert header.status in (303, 400) and "csrf" not in header.body, header


def test_pages_refuse_framing_and_referers(served: tuple[str, Dashboard]) -> None:
    url, _dash = served
    headers = call(url + "/whatif").headers
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Content-Security-Policy"] == "frame-ancestors 'none'"
    assert headers["Referrer-Policy"] == "same-origin"


def test_the_token_link_sets_the_cookie_and_drops_the_token(live: Live) -> None:
    dash = Dashboard(load_access(live.sb.kubeconfig_path), History(None), token="s3cret")
    server = DashboardThread(dash).start()
    try:
        link = call(server.url + "/queues?token=s3cret&x=1")
        assert link.status == 303 and link.headers["Location"] == "/queues?x=1", link
        cookie = link.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
        assert call(server.url + "/queues", Cookie=cookie.split(";")[0]).status == 200
        assert call(server.url + "/queues?token=wrong").status == 401
        # a token holder's script posts without the form's csrf value; a wrong token does not
        post = call(server.url + "/whatif/start", "POST", "set=x", Authorization="Bearer nope")
        assert post.status == 401
        post = call(server.url + "/whatif/start", "POST", "set=x", Authorization="Bearer s3cret")
        assert post.status == 404 and "--allow-whatif" in post.body, post  # past the csrf check
    finally:
        server.stop()


def test_the_command_makes_a_token_when_bound_beyond_loopback() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        assert _token(None, host) == (None, False), host
    token, made = _token(None, "0.0.0.0")
    assert made and token is not None and len(token) >= 32
    assert _token(None, "0.0.0.0")[0] != token  # made anew, never a fixed default
    assert _allowed("0.0.0.0", ("a.example",)) == ("a.example",)
    assert _allowed("dash.internal", ()) == ("dash.internal",)
