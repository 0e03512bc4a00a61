"""The arguments of VCJob plugins (`spec.plugins`): how they are parsed and which values they take.

Why this exists: admission and the job controller must agree on what an argument list means.
Volcano parses each plugin's arguments with pflag, so `--ssh-port=notaport` is a flag error;
Tephra's admission refuses such values with a field error and the controller, which may still
meet a job stored before (or without) admission, gives up on it with the same message instead of
failing every reconcile. One parser and one table of typed arguments serve both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

__all__ = ["PLUGIN_ARG_TYPES", "parse_plugin_args", "plugin_arg_problems"]

ArgType = Literal["port", "bool", "seconds"]

#: Typed arguments per plugin; arguments not listed are free strings (task or container names,
#: paths, keys, images).
PLUGIN_ARG_TYPES: Final[Mapping[str, Mapping[str, ArgType]]] = {
    "svc": {
        "publish-not-ready-addresses": "bool",
        "disable-network-policy": "bool",
        "inject-hosts-env": "bool",
    },
    "ssh": {"ssh-port": "port"},
    "pytorch": {"port": "port", "wait-master-enabled": "bool", "wait-master-timeout": "seconds"},
    "mpi": {"port": "port"},
    "tensorflow": {"port": "port"},
    "ray": {"port": "port", "dashboardPort": "port", "clientPort": "port"},
}

# strconv.ParseBool, which pflag's bool flags use.
_BOOLS: Final = frozenset(
    ["1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"]
)
_MAX_SECONDS: Final = 7 * 24 * 3600


def parse_plugin_args(args: Sequence[object] | None) -> dict[str, str]:
    """pflag-style `--key=value`, `--key value` and bare `--flag` (= "true"); the last wins."""
    out: dict[str, str] = {}
    items = [str(a) for a in (args or [])]
    i = 0
    while i < len(items):
        a = items[i].strip()
        i += 1
        if not a.startswith("-"):
            continue
        a = a.lstrip("-")
        if "=" in a:
            k, v = a.split("=", 1)
            out[k] = v
        elif i < len(items) and not items[i].startswith("-"):
            out[a] = items[i]
            i += 1
        else:
            out[a] = "true"
    return out


def _problem(kind: ArgType, value: str) -> str | None:
    if kind == "bool":
        return None if value in _BOOLS else "must be true or false"
    if not value.isdecimal() or not value.isascii():
        return "must be a whole number"
    number = int(value)
    if kind == "port" and not 1 <= number <= 65535:
        return "must be a port in 1..65535"
    if kind == "seconds" and number > _MAX_SECONDS:
        return f"must be at most {_MAX_SECONDS} seconds"
    return None


def plugin_arg_problems(plugin: str, args: Sequence[object] | None) -> list[str]:
    """One message per typed argument of `plugin` whose value has the wrong type."""
    parsed = parse_plugin_args(args)
    out: list[str] = []
    for key, kind in PLUGIN_ARG_TYPES.get(plugin, {}).items():
        value = parsed.get(key)
        if value is None:
            continue
        problem = _problem(kind, value)
        if problem:
            out.append(f"--{key}={value!r} {problem}")
    return out
