"""Who may talk to the dashboard: the Host it is called by, the page that calls it, the token.

Why this exists (issue 30.4): a dashboard on 127.0.0.1 without a token is still reachable from
any web page the operator visits. Three checks close that, in this order:

- Host allow-list. A page on `evil.example` whose name is re-pointed at 127.0.0.1 (DNS
  rebinding) is same-origin with the dashboard in the browser's eyes, but its requests still
  say `Host: evil.example`: refused (403). Allowed: loopback names (the sandbox's `HostCheck`
  rules), IP literals (a rebinding page's Host is always its own DNS name), the name the
  dashboard was bound to and the names given with `--allowed-host` (`*`: any).
- Same origin. A request that carries `Origin` must come from the dashboard's own origin (the
  host and port it was called by; `Origin: null`, sent by sandboxed frames and file: pages, is
  cross-site). Browsers send Origin on every cross-site fetch and every POST, so a page
  elsewhere can neither read the JSON API nor post a form.
- Token. With one, every request carries it (`Authorization: Bearer T`, or the cookie, HttpOnly
  and SameSite=Strict, that a visit to any page with `?token=T` sets before redirecting to the
  same page without it), compared in constant time.

Work (a what-if replay) starts only on a POST carrying the form's CSRF value (`csrf`, made per
process and shown only on the dashboard's own page) or a bearer token; GET never starts work.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from batch.sandbox.hostcheck import HostCheck

__all__ = ["COOKIE", "CSRF_FIELD", "HostGuard", "is_loopback", "same_token"]

COOKIE = "tephra_dashboard_token"
CSRF_FIELD = "csrf"


def same_token(given: str, expected: str) -> bool:
    """Whether `given` is `expected`, in time independent of where they differ."""
    return hmac.compare_digest(given.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    """Whether binding to `host` keeps the dashboard on this machine."""
    name = HostCheck.name_of(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostGuard:
    """The Host names the dashboard answers and the one origin it accepts requests from."""

    def __init__(self, allowed: tuple[str, ...] = ()) -> None:
        self.names = HostCheck(allowed)

    def host_refusal(self, host: str) -> str | None:
        """None if `host` (the Host header) is allowed, else why not."""
        if self.names.allows(host) or _is_ip(HostCheck.name_of(host)):
            return None
        return (
            f"Host {host!r} is not allowed: the dashboard answers localhost, IP addresses and "
            "the names given with --allowed-host (another name pointing here is how DNS "
            "rebinding reaches it)"
        )

    @staticmethod
    def origin_refusal(origin: str | None, host: str) -> str | None:
        """None if a request with this Origin header, sent to this Host, is same-origin."""
        if origin is None:
            return None
        netloc = urlsplit(origin.strip()).netloc.lower()
        if netloc and netloc == host.strip().lower():
            return None
        return (
            f"Origin {origin!r} is not allowed: the dashboard answers its own pages only "
            "(a request from another site, or from one with no origin, is refused)"
        )
