"""Request bodies as kube-apiserver takes them: the media types it decodes, its size limits, and a
bound on nesting that keeps a hostile body from reaching Python's recursion limit.

Why this exists: the sandbox is reachable by anything on the machine, a web page included. It
used to parse `text/plain`, form-encoded and type-less bodies as JSON (so a cross-site form could
create objects), store objects larger than etcd accepts, and answer a deeply nested body with a
500 and a RecursionError. Every body the HTTP layer or `Core.patch` decodes goes through here.

* media types: `application/json` and `application/yaml` for objects (the HTTP layer decodes
  protobuf bodies of built-in kinds with `batch.sandbox.protobuf`), the patch types for PATCH;
  anything else (`text/plain`, forms) is a 415 worded as kube-apiserver's. A body without a
  Content-Type is JSON, as kube-apiserver takes it (the official Python client sends none); a
  browser's type-less cross-site request carries an `Origin`, which the HTTP layer checks;
* a request body over 3 MiB (kube-apiserver's `MaxRequestBodyBytes`) is a 413, and so is an
  object whose stored form exceeds 1.5 MiB (etcd's default `--max-request-bytes`);
* a body nesting deeper than `MAX_DEPTH` arrays and objects is a 400.
"""

from __future__ import annotations

import json
from typing import Any, Final

import yaml

from batch.sandbox.errors import ApiError

__all__ = [
    "MAX_DEPTH",
    "MAX_OBJECT_BYTES",
    "MAX_REQUEST_BYTES",
    "OBJECT_TYPES",
    "check_depth",
    "decode_json",
    "decode_object",
    "media_type",
    "object_too_large",
    "request_too_large",
    "unsupported_media_type",
]

MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
MAX_OBJECT_BYTES: Final = 1536 * 1024
#: Far beyond any Kubernetes object (a CronJob's pod template nests ~15 deep), far below what
#: the recursive walks over a stored object (copy, prune, admission, watch encoding) can take.
MAX_DEPTH: Final = 100
JSON: Final = "application/json"
YAML: Final = "application/yaml"
OBJECT_TYPES: Final = (JSON, YAML)


def media_type(content_type: str) -> str:
    """`application/json; charset=utf-8` -> `application/json`."""
    return content_type.split(";", 1)[0].strip().lower()


def unsupported_media_type(accepted: tuple[str, ...]) -> ApiError:
    return ApiError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def request_too_large() -> ApiError:
    return ApiError(413, f"Request entity too large: limit is {MAX_REQUEST_BYTES}")


def object_too_large() -> ApiError:
    return ApiError(500, "etcdserver: request is too large", reason="")  # etcd's, passed on


def _too_deep() -> ApiError:
    return ApiError(400, f"the request body nests too deeply: exceeded max depth of {MAX_DEPTH}")


def check_depth(value: Any) -> Any:
    """`value` if no path through it crosses more than MAX_DEPTH arrays and objects."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise _too_deep()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return value


def decode_json(raw: bytes, what: str = "the request body") -> Any:
    """JSON of bounded nesting, else a 400 (never a RecursionError)."""
    try:
        return check_depth(json.loads(raw))
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise ApiError(400, f"{what} is not valid JSON: {exc}") from None


def decode_yaml(raw: bytes) -> Any:
    """YAML (JSON first: it is much faster and most YAML bodies are JSON), bounded nesting."""
    try:
        return check_depth(json.loads(raw))
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        pass
    try:
        return check_depth(yaml.safe_load(raw.decode()))
    except RecursionError:
        raise _too_deep() from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"error decoding YAML: {exc}") from None


def decode_object(raw: bytes, content_type: str) -> Any:
    """A create/update/delete-options body; {} when empty."""
    if not raw:
        return {}
    media = media_type(content_type)
    if media in (JSON, ""):
        return decode_json(raw)
    if media == YAML:
        return decode_yaml(raw)
    raise unsupported_media_type(OBJECT_TYPES)
