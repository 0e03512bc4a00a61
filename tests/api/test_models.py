"""API types: lossless load/dump of every corpus document, typed access, the kinds registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from batch.api.constants import ALL_EVENTS
from batch.api.job import Event, Job
from batch.api.kinds import KINDS, kind_for, kind_for_object
from batch.api.scheduling import PodGroup, Queue
from batch.api.topology import HyperNode

from .conftest import corpus_documents


def test_every_served_corpus_document_round_trips(corpus: Path) -> None:
    served = 0
    for rel, idx, doc in corpus_documents():
        info = kind_for_object(doc) if isinstance(doc, dict) else None
        if info is None:
            continue
        model = info.model.from_dict(doc, strict=True)
        assert model.to_dict() == doc, f"{rel}:{idx} does not round-trip"
        served += 1
    assert served >= 30  # Jobs, Queues, PodGroup, CronJob of the corpus


def test_unknown_fields_survive_and_typed_fields_are_typed() -> None:
    doc: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": {"a": "b"}, "someFutureField": {"x": 1}},
        "spec": {
            "futureSpecField": [1, 2],
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "i",
                                    "env": [{"name": "A", "value": "1"}],
                                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                                    "resources": {"limits": {"nvidia.com/gpu": 2}},
                                }
                            ],
                            "tolerations": [{"key": "k", "operator": "Exists"}],
                            "schedulingGates": [{"name": "g"}],
                            "volumes": [{"name": "v", "emptyDir": {}}],
                        }
                    },
                }
            ],
        },
        "status": {
            "state": {"phase": "Running"},
            "taskStatusCount": {"t": {"phase": {"Running": 1}}},
        },
    }
    job = Job.from_dict(doc)
    assert job.to_dict() == doc
    assert job.spec is not None and job.spec.tasks is not None
    pod = job.spec.tasks[0].template.spec  # type: ignore[union-attr]
    assert pod is not None and pod.containers is not None
    assert pod.containers[0].ports[0].host_port == 8080  # type: ignore[index]
    assert pod.containers[0].resources.limits == {"nvidia.com/gpu": 2}  # type: ignore[union-attr]
    assert pod.tolerations[0].operator == "Exists"  # type: ignore[index]
    assert pod.scheduling_gates[0].name == "g"  # type: ignore[index]
    assert job.status is not None and job.status.state is not None
    assert job.status.state.phase == "Running"
    assert job.status.task_status_count["t"].phase == {"Running": 1}  # type: ignore[index]


def test_aliases_that_differ_from_plain_camel_case() -> None:
    pg = PodGroup.from_dict(
        {"status": {"conditions": [{"transitionID": "abc", "lastTransitionTime": "t"}]}}
    )
    assert pg.status.conditions[0].transition_id == "abc"  # type: ignore[union-attr,index]
    assert pg.to_dict()["status"]["conditions"][0] == {
        "transitionID": "abc",
        "lastTransitionTime": "t",
    }


def test_populate_by_name() -> None:
    q = Queue.model_validate({"spec": {"weight": 3, "extend_clusters": [{"name": "c"}]}})
    assert q.spec is not None and q.spec.extend_clusters is not None
    assert q.spec.extend_clusters[0].name == "c"


def test_strict_loading_rejects_coercion_and_bad_quantities() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Job.from_dict({"spec": {"minAvailable": "3"}}, strict=True)
    with pytest.raises(ValidationError):
        Queue.from_dict({"spec": {"capability": {"cpu": "lots"}}})
    with pytest.raises(ValidationError):
        Queue.from_dict({"spec": {"capability": {"cpu": True}}})


def test_hypernode_model() -> None:
    doc = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {
            "tier": 1,
            "tierName": "leaf",
            "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
                {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[1-3]"}}},
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
            ],
        },
        "status": {"nodeCount": 5},
    }
    hn = HyperNode.from_dict(doc, strict=True)
    assert hn.to_dict() == doc
    assert hn.spec is not None and hn.spec.members is not None
    assert hn.spec.members[1].selector.regex_match.pattern == "node-[1-3]"  # type: ignore[union-attr]


def test_event_literal_matches_constants() -> None:
    assert get_args(Event) == ALL_EVENTS


def test_registry() -> None:
    by_kind = {k.kind: k for k in KINDS}
    assert set(by_kind) == {"Job", "CronJob", "Command", "PodGroup", "Queue", "HyperNode"}
    assert by_kind["Job"].short_names == ("vcjob", "vj")
    assert by_kind["CronJob"].short_names == ("cronvcjob", "cronvj")
    assert by_kind["PodGroup"].short_names == ("pg", "podgroup-v1beta1")
    assert by_kind["Queue"].short_names == ("q", "queue-v1beta1")
    assert by_kind["Queue"].scope == "Cluster" and by_kind["HyperNode"].scope == "Cluster"
    assert by_kind["Job"].crd_name == "jobs.batch.volcano.sh"
    assert kind_for("batch/v1", "Job") is None
    assert kind_for("batch.volcano.sh/v1alpha1", "Job") is by_kind["Job"]
    assert kind_for_object({"apiVersion": 1, "kind": "Job"}) is None
