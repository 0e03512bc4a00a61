"""Contract: lightkube (a second, independent client) works against the sandbox."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node

from .helpers import Server


def test_lightkube_crud_and_watch(server: Server) -> None:
    config = KubeConfig.from_file(Path(server.kubeconfig_path))
    with Client(config=config) as lk:
        assert {n.metadata.name for n in lk.list(Namespace)} >= {"default", "kube-system"}
        assert {n.metadata.name for n in lk.list(Node)} >= {"node-0", "node-1", "node-2"}
        cm = lk.create(
            ConfigMap(metadata=ObjectMeta(name="lk", namespace="default"), data={"a": "1"})
        )
        assert cm.metadata.uid
        lk.patch(ConfigMap, "lk", {"data": {"b": "2"}}, namespace="default")
        got = lk.get(ConfigMap, "lk", namespace="default")
        assert got.data == {"a": "1", "b": "2"}
        lk.apply(
            ConfigMap(metadata=ObjectMeta(name="lk-ssa", namespace="default"), data={"x": "y"}),
            field_manager="tests",
        )
        assert lk.get(ConfigMap, "lk-ssa", namespace="default").data == {"x": "y"}
        lk.create(
            ConfigMap(metadata=ObjectMeta(name="lk-w", namespace="default", labels={"watch": "me"}))
        )
        seen = []
        for op, obj in lk.watch(ConfigMap, namespace="default", labels={"watch": "me"}):
            seen.append((op, obj.metadata.name))
            break
        lk.delete(ConfigMap, "lk", namespace="default")
        names = {c.metadata.name for c in lk.list(ConfigMap, namespace="default")}
        assert "lk" not in names
    assert seen == [("ADDED", "lk-w")]
