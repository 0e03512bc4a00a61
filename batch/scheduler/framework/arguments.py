"""Typed access to a plugin's or action's ``arguments:`` map, with clear errors, and the
declarations of the arguments each accepts.

Volcano reads arguments with ``GetInt``/``GetFloat64``/``GetBool`` and logs bad values; Tephra
raises ``ConfigError`` naming the plugin and key instead. Each plugin and action declares its
arguments once (``ARGUMENTS``, a tuple of ``Arg``); ``load_config`` runs ``check_arguments`` so an
unknown key (a typo, which Volcano silently ignores) or a value of the wrong kind is refused,
naming the closest declared key. The owners keep reading with the ``get_*`` methods below, with
their own defaults; ``batch.scheduler.argdocs`` renders the declarations as the docs' tables and
the chart's schemas.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from batch.api import durations
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


#: The largest weight an argument may give: scores of 0..100 times it stay exact in a float.
MAX_WEIGHT = 1_000_000

ArgKind = Literal["int", "float", "bool", "str", "list", "duration"]

#: how each kind reads in the docs' argument tables
KIND_TEXT: dict[str, str] = {
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "str": "string",
    "list": "comma-separated list",
    "duration": "duration",
}


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument a plugin or action accepts, declared once (class attribute ``ARGUMENTS``).

    ``name`` is the key, or a pattern with one ``<placeholder>`` for a family of keys (Volcano's
    ``binpack.resources.<resource>``): any key with the text before and after the placeholder
    around a non-empty middle. ``kind`` types the value as the ``Arguments.get_*`` readers do
    (``list``: a comma-separated string; ``duration``: ``90s``, ``5m``, ``2d`` or seconds).
    ``min``/``max`` bound a number (``min_open``/``max_open``: the bound itself is excluded),
    ``choices`` the words a string may be. ``default`` is what the owner uses when the key is
    absent (for the docs; the owner's reader applies it).
    """

    name: str
    kind: ArgKind
    default: object
    doc: str
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    choices: tuple[str, ...] = ()

    @property
    def is_pattern(self) -> bool:
        return "<" in self.name

    def _ends(self) -> tuple[str, str]:
        head, _, rest = self.name.partition("<")
        return head, rest.partition(">")[2]

    def matches(self, key: str) -> bool:
        if not self.is_pattern:
            return key == self.name
        head, tail = self._ends()
        return len(key) > len(head) + len(tail) and key.startswith(head) and key.endswith(tail)

    def range_text(self) -> str:
        """The allowed values in words: ``>= 0``, ``0..100``, ``(0, 1]``, ``volcano | strict``."""
        if self.choices:
            return " | ".join(self.choices)
        lo, hi = self.min, self.max
        if lo is None:
            return "" if hi is None else f"{'<' if self.max_open else '<='} {_num(hi)}"
        if hi is not None:
            if not self.min_open and not self.max_open:
                return f"{_num(lo)}..{_num(hi)}"
            left, right = "(" if self.min_open else "[", ")" if self.max_open else "]"
            return f"{left}{_num(lo)}, {_num(hi)}{right}"
        return f"{'>' if self.min_open else '>='} {_num(lo)}"

    def in_range(self, number: float) -> bool:
        if self.min is not None and (number <= self.min if self.min_open else number < self.min):
            return False
        return not (
            self.max is not None and (number >= self.max if self.max_open else number > self.max)
        )

    def check(self, args: Arguments, key: str) -> None:
        """Raise ConfigError (naming the owner and ``key``) unless ``args[key]`` is of this kind
        and within range."""
        if self.kind == "duration":
            value = args.raw[key]
            if value is None or value == "":
                return  # absent: each owner says what an empty duration means
            try:
                durations.parse_duration(value, days=True, bare_seconds=True)
            except ValueError as exc:
                raise ConfigError(f"{args.owner}: argument {key!r}: {exc}") from None
            return
        if self.kind == "bool":
            args.get_bool(key, False)
            return
        if self.kind in ("str", "list"):
            text = args.get_str(key, "")
            if self.choices and text not in self.choices:
                raise args._err(key, text, " or ".join(repr(c) for c in self.choices))
            return
        number: float = args.get_int(key, 0) if self.kind == "int" else args.get_float(key, 0.0)
        if not self.in_range(number):
            raise ConfigError(
                f"{args.owner}: argument {key!r} must be {self.range_text()}, got {_num(number)}"
            )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def find_arg(specs: Sequence[Arg], key: str) -> Arg | None:
    """The declaration ``key`` falls under: an exact name first, then a pattern."""
    for spec in specs:
        if not spec.is_pattern and spec.name == key:
            return spec
    for spec in specs:
        if spec.is_pattern and spec.matches(key):
            return spec
    return None


def check_arguments(owner: str, specs: Sequence[Arg], raw: Mapping[str, Any]) -> None:
    """Every key of ``raw`` must be declared in ``specs`` and hold a value of its kind and range;
    otherwise ConfigError naming ``owner`` and the key (and the closest declared key)."""
    args = Arguments(owner, raw)
    for key in raw:
        spec = find_arg(specs, key)
        if spec is None:
            raise ConfigError(f"{owner}: unknown argument {key!r}{_suggestion(specs, key)}")
        spec.check(args, key)


def _suggestion(specs: Sequence[Arg], key: str) -> str:
    names = [s.name for s in specs]
    if not names:
        return "; it takes no arguments"
    best, score = None, 0.6
    for spec in specs:
        if spec.is_pattern:  # compare the key's ends with the pattern's fixed text around them
            head, tail = spec._ends()
            text, like = key[: len(head)] + key[len(key) - len(tail) :], head + tail
        else:
            text, like = key, spec.name
        ratio = difflib.SequenceMatcher(None, text, like).ratio()
        if ratio > score:
            best, score = spec.name, ratio
    hint = f"; did you mean {best!r}?" if best else ";"
    return f"{hint} known: {', '.join(names)}"
