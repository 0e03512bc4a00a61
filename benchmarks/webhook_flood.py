"""Webhook CPU per oversized VCJob, and what a flood of them does to an unrelated review.

Issue 30 item 6: a VCJob of 10,000 tasks cost 1.56 s of webhook CPU before it was refused, and
eight of them in parallel made an unrelated request wait 9.2 s against the apiserver's 10 s
timeout (with `failurePolicy: Fail` the user's request is then refused). This measures:

1. the CPU (process time) of answering one such review, in process (`review_response` on the
   decoded review, and the JSON decoding of its body on its own);
2. `tephra webhook --self-signed --assume-queues` started as its own process: the latency of a
   small Queue review alone, then while `--parallel` 10,000-task jobs are in flight.

    .venv/bin/python benchmarks/webhook_flood.py [--tasks 10000] [--parallel 8] [--valid ENV]
"""

from __future__ import annotations

import argparse
import json
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

TEPHRA = [sys.executable, "-m", "batch.cli.main"]


def review(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": kind}, "operation": "CREATE", "object": obj},
    }


def big_job(tasks: int, env: int = 0) -> dict[str, Any]:
    """`tasks` tasks of one pod; `env` variables per container make an admissible job heavy."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    container["env"] = [{"name": f"V{i}", "value": "x" * 20} for i in range(env)]
    task = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "flood", "namespace": "default"},
        "spec": {"tasks": [dict(task, name=f"t{i}") for i in range(tasks)]},
    }


SMALL = review("Queue", {"metadata": {"name": "q"}, "spec": {"weight": 1}})


def cpu_in_process(body: bytes) -> tuple[float, float, str]:
    """(CPU s to decode the body, CPU s to answer the decoded review, the answer's message)."""
    from batch.api.admission import AssumeAllQueues
    from batch.controllers.webhook import review_response

    began = time.process_time()
    decoded = json.loads(body)
    decoded_at = time.process_time()
    answer = review_response(decoded, mutate=False, lookup=AssumeAllQueues())
    done = time.process_time()
    message = str(answer["response"].get("status", {}).get("message", "allowed"))
    return decoded_at - began, done - decoded_at, message


def post(port: int, path: str, body: bytes) -> tuple[float, dict[str, Any]]:
    """(seconds to the answer, the answer) of one POST, with the apiserver's 10 s timeout."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}?timeout=10s",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    began = time.monotonic()
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as answer:
            return time.monotonic() - began, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return time.monotonic() - began, {"http": exc.code}
    except OSError as exc:  # no answer at all (a timeout, a dropped connection)
        return time.monotonic() - began, {"http": type(exc).__name__}


def start_webhook() -> tuple[subprocess.Popen[str], int]:
    directory = tempfile.mkdtemp(prefix="tephra-bench-webhook-")
    args = ["webhook", "--self-signed", "--cert-dir", directory, "--assume-queues", "--port", "0"]
    proc = subprocess.Popen([*TEPHRA, *args], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"listening on https://[^:]+:(\d+)", line)
        if found:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain the log
            return proc, int(found.group(1))
    raise SystemExit("the webhook did not start")


def flood(
    port: int, big: bytes, parallel: int, samples: int
) -> tuple[list[float], list[float], list[str]]:
    """`parallel` clients sending the big review over and over; meanwhile `samples` small
    reviews, 0.3 s apart. (the small reviews' latencies, the big ones', the big outcomes)."""
    results: list[tuple[float, dict[str, Any]]] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            results.append(post(port, "/jobs/validate", big))

    threads = [threading.Thread(target=client) for _ in range(parallel)]
    began = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(1.0)  # the flood is under way
    small = []
    for _ in range(samples):
        small.append(post(port, "/queues/validate", json.dumps(SMALL).encode())[0])
        time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    outcomes = [_outcome(answer) for _, answer in results]
    outcomes.append(f"{len(results) / (time.monotonic() - began):.1f}/s")
    return small, [s for s, _ in results], outcomes


def _outcome(answer: dict[str, Any]) -> str:
    if "http" in answer:
        return f"HTTP {answer['http']}"
    status = answer["response"].get("status") or {}
    return str(status.get("code", "allowed"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument(
        "--valid",
        type=int,
        default=0,
        metavar="ENV",
        help="Admissible heavy jobs instead: 100 tasks with ENV env variables per container "
        "(1000: ~5 MB): what the concurrency gate bounds when no limit refuses the job early.",
    )
    opts = parser.parse_args()
    job = big_job(100, env=opts.valid) if opts.valid else big_job(opts.tasks)
    big = json.dumps(review("Job", job)).encode()
    what = (
        f"an admissible 100-task, {100 * opts.valid}-variable"
        if opts.valid
        else f"a {opts.tasks}-task"
    )
    print(f"one review of {what} VCJob: {len(big) / 1e6:.2f} MB", flush=True)
    decode, answer, message = cpu_in_process(big)
    print(f"  CPU: JSON decoding {decode * 1000:.1f} ms, admission {answer * 1000:.2f} ms")
    print(f"  answer: {message[:120]}")
    proc, port = start_webhook()
    try:
        alone, _ = post(port, "/queues/validate", json.dumps(SMALL).encode())
        print(f"small Queue review alone: {alone * 1000:.0f} ms", flush=True)
        small, bigs, outcomes = flood(port, big, opts.parallel, samples=10)
        small.sort()
        print(
            f"small Queue review during a flood of {opts.parallel} clients: "
            f"median {small[len(small) // 2]:.2f} s, max {small[-1]:.2f} s ({len(small)} samples)"
        )
        rate = outcomes.pop()
        counts = {o: outcomes.count(o) for o in sorted(set(outcomes))}
        print(f"  big reviews: {len(bigs)} answered ({rate}), max {max(bigs):.2f} s, {counts}")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
