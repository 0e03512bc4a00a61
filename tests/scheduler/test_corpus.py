"""Volcano's own example objects (shared/corpus) through the cache and the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batch.model import fixtures as f
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session

from .util import NOW, cluster


def shared_dir() -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared"
        if (cand / "corpus").is_dir():
            return cand
    return None


SHARED = shared_dir()
needs_corpus = pytest.mark.skipif(SHARED is None, reason="shared/corpus not available")


@needs_corpus
def test_hierarchical_queue_examples_order_by_weighted_drf() -> None:
    assert SHARED is not None
    path = SHARED / "corpus/volcano-examples/volcano/example/hierarchical-jobs/queues.yaml"
    c = cluster(4, cpu="8", queues=())
    names = []
    for doc in yaml.safe_load_all(path.read_text()):
        c.apply("Queue", "ADDED", doc)
        names.append(doc["metadata"]["name"])
    for q in names:  # the same load in every leaf queue
        c.apply("PodGroup", "ADDED", f.podgroup(f"run-{q}", queue=q, phase="Running"))
        c.apply(
            "Pod",
            "ADDED",
            f.pod(
                f"run-{q}",
                group=f"run-{q}",
                cpu="2",
                memory=None,
                node_name="n0" if q.endswith("prod") else "n1",
                phase="Running",
            ),
        )
        c.apply("PodGroup", "ADDED", f.podgroup(f"new-{q}", queue=q, phase="Inqueue"))
        c.apply("Pod", "ADDED", f.pod(f"new-{q}", group=f"new-{q}", cpu="1", memory=None))
    conf = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: drf, enableHierarchy: true}]}]"
    )
    ssn = open_session(c, load_config(conf), now=NOW)
    order = sorted((ssn.queues[n] for n in names), key=ssn.dispatch.queue_order_key())
    ssn.rollback()
    # sci (weight 8) before eng (weight 2); inside each, prod (8) before dev (2)
    assert [q.name for q in order] == [
        "root-sci-prod",
        "root-sci-dev",
        "root-eng-prod",
        "root-eng-dev",
    ]


@needs_corpus
def test_api_artifact_podgroup_and_queue_parse() -> None:
    assert SHARED is not None
    base = SHARED / "corpus/volcano-examples/apis/artifacts"
    c = cluster(1, cpu="4", memory="8Gi")
    for name in ("queue.yaml", "podgroup.yaml"):
        for doc in yaml.safe_load_all((base / name).read_text()):
            if doc and doc.get("kind") in ("Queue", "PodGroup"):
                c.apply(doc["kind"], "ADDED", doc)
    job = c.jobs["default/test-pg"]
    assert job.min_available == 1 and job.queue == "default"
    assert job.min_resources is not None
    assert int(job.min_resources[c.resources.index("memory")]) == 2_000_000_000


def corpus_scheduler_confs() -> list[tuple[str, str]]:
    """Every volcano-scheduler.conf in the corpus: a ConfigMap's data key or a ``*.conf`` file."""
    if SHARED is None:
        return []
    found: list[tuple[str, str]] = []
    root = SHARED / "corpus"
    for path in sorted(root.rglob("*")):
        if path.suffix == ".conf":
            found.append((str(path.relative_to(root)), path.read_text()))
        elif path.suffix in (".yaml", ".yml") and "volcano-scheduler.conf" in path.read_text():
            for doc in yaml.safe_load_all(path.read_text()):
                data = (doc or {}).get("data") or {}
                if isinstance(data.get("volcano-scheduler.conf"), str):
                    found.append((str(path.relative_to(root)), data["volcano-scheduler.conf"]))
    return found


@needs_corpus
def test_every_corpus_scheduler_conf_loads() -> None:
    """Volcano's own scheduler configurations load unchanged: every argument key Volcano
    accepts is declared (issue 32.4)."""
    confs = corpus_scheduler_confs()
    assert confs
    for where, text in confs:
        try:
            load_config(text)
        except Exception as exc:  # pragma: no cover - the message names the file
            raise AssertionError(f"{where}: {exc}") from exc
