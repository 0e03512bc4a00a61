"""The Host and Origin names the sandbox's HTTP face answers (DNS rebinding and cross-site pages
are refused)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from batch.sandbox.errors import ApiError
from batch.sandbox.wire import Request

_LOOPBACK_NAMES = frozenset({"localhost", "::1"})


class HostCheck:
    """The Host names the sandbox answers: loopback ones, plus those it was told to allow (`*`:
    any). A web page on another name that resolves to 127.0.0.1 (DNS rebinding) gets a 403, and
    so does a request whose `Origin` (a web page's, cross-site) is not one of those names or
    names no host at all (`Origin: null`)."""

    def __init__(self, allowed: tuple[str, ...] = ()) -> None:
        self.any = "*" in allowed
        self.allowed = frozenset(h.lower().strip("[]") for h in allowed)

    @staticmethod
    def name_of(host: str) -> str:
        host = host.strip().lower()
        if host.startswith("["):
            return host[1:].split("]", 1)[0]
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    def allows(self, host: str) -> bool:
        name = self.name_of(host)
        if self.any or not name or name in _LOOPBACK_NAMES or name in self.allowed:
            return True
        if name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def allows_origin(self, origin: str) -> bool:
        """A web page's origin: one with no host (`null` from a sandboxed iframe, a file: or
        data: page) is cross-site like any other, unless every name is allowed."""
        host = urlsplit(origin.strip()).netloc
        return self.any or (bool(self.name_of(host)) and self.allows(host))

    def check(self, request: Request) -> None:
        host = request.host
        if not self.allows(host):
            raise ApiError(
                403,
                f"Host {host!r} is not allowed: the sandbox answers loopback names only "
                "(localhost, 127.0.0.1, [::1]); allow others with --allow-host",
            )
        origin = request.headers.get("origin")
        if origin is not None and not self.allows_origin(origin):
            # a browser sends Origin with every cross-site write, whatever its body type
            raise ApiError(
                403,
                f"Origin {origin!r} is not allowed: the sandbox answers web pages served "
                "from loopback names only (see --allow-host)",
            )
