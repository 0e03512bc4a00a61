#!/usr/bin/env python3
"""Generate batch/sandbox/proto_fields.json: the protobuf field numbers of the built-in kinds
the sandbox serves, read from Kubernetes' own generated.proto files.

kubectl's typed generators (`kubectl create namespace`, `create priorityclass`, `create
deployment`, ...) send protobuf bodies; the sandbox decodes them with this table
(batch/sandbox/protobuf.py). The .proto files come with the Go modules the control plane is
built from (scripts/build-kube.sh fills the module cache), so run this after that build:

    scripts/gen-sandbox-proto.py [MODULE_CACHE]      # default: $(go env GOMODCACHE)

The table holds only the messages reachable from the served kinds. It is generated, checked in,
and tested (tests/sandbox/test_protobuf.py decodes what the real kubectl sends).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "batch" / "sandbox" / "proto_fields.json"
KUBE = "v0.37.2"  # the k8s.io/* version tools/kube pins
MODULES = (
    f"k8s.io/api@{KUBE}",
    f"k8s.io/apimachinery@{KUBE}",
    f"k8s.io/apiextensions-apiserver@{KUBE}",
)
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}
FIELD = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)"
)


def parse(path: Path, messages: dict[str, list[list[object]]]) -> None:
    package = ""
    current: str | None = None
    for raw in path.read_text().splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("package "):
            package = line.removeprefix("package ").rstrip(";").strip()
        elif line.startswith("message "):
            current = f"{package}.{line.split()[1]}"
            messages[current] = []
        elif line == "}":
            current = None
        elif current is not None and (m := FIELD.match(line)):
            label, typ, key, value, name, number = m.groups()
            if key is not None:
                messages[current].append([int(number), name, "m", _abs(value, package)])
            else:
                kind = "r" if label == "repeated" else "o"
                messages[current].append([int(number), name, kind, _abs(typ, package)])


def _abs(typ: str, package: str) -> str:
    if typ in SCALARS:
        return typ
    return typ.lstrip(".") if typ.startswith(".") else f"{package}.{typ}"


def served_kinds() -> dict[str, str]:
    """apiVersion/Kind -> message, for the built-in kinds the sandbox serves."""
    sys.path.insert(0, str(ROOT))
    from batch.sandbox.meta import builtin_types

    out = {}
    for rt in builtin_types():
        group = rt.group or "core"
        short = group.split(".")[0]
        if group == "apiextensions.k8s.io":
            pkg = f"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.{rt.version}"
        else:
            pkg = f"k8s.io.api.{short}.{rt.version}"
        out[f"{rt.api_version}/{rt.kind}"] = f"{pkg}.{rt.kind}"
    return out


def main() -> None:
    cache = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(subprocess.check_output(["go", "env", "GOMODCACHE"], text=True).strip())
    )
    messages: dict[str, list[list[object]]] = {}
    for module in MODULES:
        for proto in sorted((cache / module).rglob("generated.proto")):
            parse(proto, messages)
    kinds = {gvk: msg for gvk, msg in served_kinds().items() if msg in messages}
    keep: dict[str, list[list[object]]] = {}
    todo = list(kinds.values())
    while todo:
        name = todo.pop()
        if name in keep or name not in messages:
            continue
        keep[name] = sorted(messages[name])
        todo += [str(f[3]) for f in keep[name] if f[3] not in SCALARS]
    OUT.write_text(
        json.dumps(
            {"kube": KUBE, "kinds": kinds, "messages": keep}, sort_keys=True, separators=(",", ":")
        )
        + "\n"
    )
    print(f"{OUT.relative_to(ROOT)}: {len(kinds)} kinds, {len(keep)} messages")


if __name__ == "__main__":
    main()
