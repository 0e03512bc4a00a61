"""The sandbox's HTTP answers: JSON bodies, errors as Status objects, warnings as headers."""

from __future__ import annotations

from typing import Any

from batch.sandbox.errors import ApiError
from batch.sandbox.store import dumps
from batch.sandbox.wire import Request, Response

JSON = "application/json"


def json_response(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status=status)


def warn(resp: Response, warnings: list[str]) -> Response:
    """``resp`` with kube-apiserver's ``Warning`` header (code 299) for each warning."""
    if warnings:
        values = ", ".join('299 - "{}"'.format(w.replace('"', '\\"')) for w in warnings)
        resp.headers = {**(resp.headers or {}), "Warning": values}
    return resp


def error_response(err: ApiError) -> Response:
    resp = json_response(err.status(), err.code)
    if err.code == 429:
        resp.headers = {"Retry-After": "1"}
    return resp


def wants_table(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "as=Table" in accept
