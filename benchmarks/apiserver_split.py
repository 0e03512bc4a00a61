"""Split the apiserver's work between two `/metrics` snapshots by request.

`benchmarks/e2e_real.py` saves the apiserver's whole `/metrics` before each run, at its last
bind and `--settle` s later (`<scheduler>-<workload>.apiserver.{0,1,2}` in the run's work
directory). This prints, per bound pod, what the apiserver did in between: requests by verb
and resource (with the seconds they were in flight, their request bodies and their answers),
and the watch events it sent by resource, with their bytes. With `--pprof` (the apiserver's
CPU profile, saved by `TEPHRA_BENCH_APISERVER_PPROF=SECONDS`), it also splits the CPU by what
each sample's stack was doing (`CATEGORIES`, the first that matches), in ms per pod.

    .venv/bin/python benchmarks/apiserver_split.py BEFORE AFTER --pods 4000 [--pprof P --bin B]
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')

#: metric family -> the labels that name a row
FAMILIES = {
    "apiserver_request_total": ("verb", "resource", "subresource"),
    "apiserver_request_duration_seconds_sum": ("verb", "resource", "subresource"),
    "apiserver_response_sizes_sum": ("verb", "resource", "subresource"),
    "apiserver_request_body_size_bytes_sum": ("verb", "resource"),
    "apiserver_watch_events_total": ("resource",),
    "apiserver_watch_events_sizes_sum": ("resource",),
}


def read(path: Path) -> dict[str, Counter[str]]:
    """family -> row name -> value, summed over the labels not in `FAMILIES`."""
    out: dict[str, Counter[str]] = {name: Counter() for name in FAMILIES}
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if m is None or m.group(1) not in FAMILIES:
            continue
        labels = dict(_LABEL.findall(m.group(2)))
        keys = FAMILIES[m.group(1)]
        name = " ".join(labels.get(k, "") for k in keys).strip()
        name = re.sub(r" +", " ", name)
        out[m.group(1)][name] += float(m.group(3))
    return out


def diff(before: Path, after: Path) -> dict[str, Counter[str]]:
    a, b = read(before), read(after)
    return {f: Counter({k: v - a[f][k] for k, v in b[f].items() if v - a[f][k] > 0}) for f in b}


def report(d: dict[str, Counter[str]], pods: int) -> list[str]:
    """Rows per pod: requests, their in-flight ms, response and body bytes; watch events."""
    lines = ["requests per pod: n, in-flight ms, response bytes, body bytes (verb-level)"]
    reqs = d["apiserver_request_total"]
    dur = d["apiserver_request_duration_seconds_sum"]
    resp = d["apiserver_response_sizes_sum"]
    body = d["apiserver_request_body_size_bytes_sum"]
    for name, n in sorted(reqs.items(), key=lambda kv: -dur[kv[0]]):
        if n / pods < 0.005:  # the watches' seconds are their lifetimes, not work
            continue
        verb, _, res = name.partition(" ")
        write = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(verb)
        b = body[f"{write} {res.split(' ')[0]}"] if write else 0
        lines.append(
            f"  {name:<34} {n / pods:6.3f} {dur[name] * 1000 / pods:7.2f} ms "
            f"{resp[name] / pods:9.0f} B {b / pods:8.0f} B"
        )
    total = sum(reqs.values()) / pods
    lines.append(f"  {'total':<34} {total:6.3f} {sum(dur.values()) * 1000 / pods:7.2f} ms")
    lines.append("watch events per pod: n, bytes")
    events, sizes = d["apiserver_watch_events_total"], d["apiserver_watch_events_sizes_sum"]
    for name, n in sorted(events.items(), key=lambda kv: -sizes[kv[0]]):
        if n / pods >= 0.005:
            lines.append(f"  {name:<34} {n / pods:6.3f} {sizes[name] / pods:9.0f} B")
    return lines


#: (name, regular expression on a sample's stack), the first match counts: the handlers first,
#: then what every request pays (authentication, TLS and HTTP), then the collector
CATEGORIES = (
    ("watch: encode and send", r"handlers\.serveWatch|WatchServer|watchEncoder"),
    ("watch: cache dispatch", r"\(\*Cacher\)\.(dispatch|processEvent)|cacheWatcher|watchCache"),
    ("PATCH pods/status (kubelets)", r"pod/storage\.\(\*StatusREST\)|smpPatcher"),
    ("POST pods/binding", r"BindingREST"),
    ("CRD objects (PodGroups)", r"apiextensions-apiserver|unstructured"),
    ("merge PATCH (PodGroups, leases)", r"jsonPatcher"),
    ("POST (events)", r"createHandler"),
    ("other PATCH and PUT", r"patchResource|UpdateResource"),
    ("LIST", r"ListResource|GetList"),
    ("authentication (x509)", r"withAuthentication|WithAuthentication"),
    ("TLS and HTTP", r"crypto/tls|net/http|http2"),
    ("garbage collection", r"gcBgMarkWorker|gcDrain"),
    ("etcd client", r"go\.etcd\.io"),
)
_SEPARATOR = "-----------+-------------------------------------------------------"


def profile_split(profile: Path, binary: Path) -> tuple[Counter[str], float]:
    """CPU seconds by `CATEGORIES` (and "other"), and in all, from `go tool pprof -traces`."""
    out = subprocess.run(
        ["go", "tool", "pprof", "-traces", str(binary), str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    split: Counter[str] = Counter()
    total = 0.0
    for block in out.split(_SEPARATOR)[1:]:
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        m = re.match(r"([\d.]+)(ms|s)\s+(.*)", lines[0]) if lines else None
        if m is None:
            continue
        seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
        stack = " ".join([m.group(3), *lines[1:]])
        total += seconds
        name = next((n for n, rx in CATEGORIES if re.search(rx, stack)), "other")
        split[name] += seconds
    return split, total


def profile_report(split: Counter[str], total: float, pods: int) -> list[str]:
    lines = [f"apiserver CPU by what it did, ms per pod ({total:.1f} s in the profile)"]
    for name in [n for n, _ in CATEGORIES] + ["other"]:
        lines.append(f"  {name:<34} {split[name] * 1000 / pods:7.2f}")
    lines.append(f"  {'total':<34} {total * 1000 / pods:7.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--pods", type=int, required=True, help="bound pods in between")
    p.add_argument("--pprof", type=Path, default=None, help="the apiserver's CPU profile")
    p.add_argument("--bin", type=Path, default=None, help="kube-apiserver (for --pprof)")
    args = p.parse_args(argv)
    print("\n".join(report(diff(args.before, args.after), args.pods)))
    if args.pprof is not None:
        binary = args.bin or Path(
            subprocess.run(
                ["scripts/build-kube.sh"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        binary = binary / "kube-apiserver" if binary.is_dir() else binary
        split, total = profile_split(args.pprof, binary)
        print("\n".join(profile_report(split, total, args.pods)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
