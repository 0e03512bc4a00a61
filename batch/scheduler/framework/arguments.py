"""Typed access to a plugin's or action's ``arguments:`` map, with clear errors.

Volcano reads arguments with ``GetInt``/``GetFloat64``/``GetBool`` and logs bad values; Tephra
raises ``ConfigError`` naming the plugin and key instead, so a typo is never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.errors import UserError


class ConfigError(UserError):
    """A scheduler configuration problem, with a message naming the offending field."""


class Arguments:
    """Read-only view over an ``arguments`` mapping for one plugin/action (``owner``)."""

    __slots__ = ("owner", "raw")

    def __init__(self, owner: str, raw: Mapping[str, Any] | None = None) -> None:
        self.owner = owner
        self.raw: Mapping[str, Any] = raw or {}

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def _err(self, key: str, value: Any, kind: str) -> ConfigError:
        return ConfigError(f"{self.owner}: argument {key!r} must be {kind}, got {value!r}")

    def get_float(self, key: str, default: float) -> float:
        if key not in self.raw:
            return default
        value = self.raw[key]
        if isinstance(value, bool):
            raise self._err(key, value, "a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise self._err(key, value, "a number") from None

    def get_int(self, key: str, default: int) -> int:
        if key not in self.raw:
            return default
        value = self.raw[key]
        if isinstance(value, bool):
            raise self._err(key, value, "an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise self._err(key, value, "an integer")

    def get_bool(self, key: str, default: bool) -> bool:
        if key not in self.raw:
            return default
        value = self.raw[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self._err(key, value, "true or false")

    def get_str(self, key: str, default: str) -> str:
        if key not in self.raw:
            return default
        value = self.raw[key]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise self._err(key, value, "a string")

    def keys_with_prefix(self, prefix: str) -> dict[str, Any]:
        return {k[len(prefix) :]: v for k, v in self.raw.items() if k.startswith(prefix)}
