"""Kubernetes `Status` error bodies.

Clients branch on the HTTP code *and* on `reason` (kopf retries on 409, the python client raises
`ApiException` with the body), so every failure the sandbox reports goes through `ApiError`, which
renders exactly the `Status` object a kube-apiserver would send.
"""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error answered as a `Status` object with the given HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # "" is StatusReasonUnknown: kube-apiserver omits the field (errors not made as a Status)
        self.reason = _REASONS.get(code, "Unknown") if reason is None else reason
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_qualified(group, plural)} "{name}" not found',
        details={"name": name, "group": group, "kind": plural},
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_qualified(group, plural)} "{name}" already exists',
        reason="AlreadyExists",
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(group: str, plural: str, name: str, why: str | None = None) -> ApiError:
    text = why or "the object has been modified; please apply your changes to the latest version"
    if why is None:
        text += " and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {text}',
        reason="Conflict",
        details={"name": name, "group": group, "kind": plural},
    )


class Cause:
    """One field problem of a 422 Invalid answer."""

    __slots__ = ("field", "message", "reason")

    def __init__(self, field: str, reason: str, message: str) -> None:
        self.field = field
        self.reason = reason
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason, "message": self.message}


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    summary = ", ".join(f"{c.field}: {c.message}" for c in causes)
    return ApiError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {summary}',
        reason="Invalid",
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [c.as_dict() for c in causes],
        },
    )


def success_status(details: dict[str, Any] | None = None, code: int = 200) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body
