"""A stand-in scheduler for the controller integration tests (the real one is another component).

It does only what the job controller needs from a scheduler: moves Pending PodGroups whose queue
is Open to Inqueue, and binds the unbound pods of admitted PodGroups round-robin to the nodes,
through the real `pods/binding` API.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

from kubernetes import client


class MiniScheduler:
    def __init__(self, api: Any, *, nodes: list[str], period: float = 0.1) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.co = client.CustomObjectsApi(api)
        self.nodes = nodes
        self.period = period
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="minisched")
        self._n = 0
        self.binds = 0

    def start(self) -> MiniScheduler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.paused.is_set():
                with contextlib.suppress(Exception):  # keep going across transient errors
                    self.once()
            self._stop.wait(self.period)

    def once(self) -> None:
        queues = {
            q["metadata"]["name"]: (q.get("status") or {}).get("state", "Open")
            for q in self.co.list_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues"
            )["items"]
        }
        pgs = self.co.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "podgroups")[
            "items"
        ]
        admitted = set()
        for pg in pgs:
            m = pg["metadata"]
            phase = (pg.get("status") or {}).get("phase") or "Pending"
            queue = (pg.get("spec") or {}).get("queue") or "default"
            if (
                phase == "Pending"
                and queues.get(queue, "Open") == "Open"
                and not m.get("deletionTimestamp")
            ):
                # through the object, as Volcano's scheduler does: the CRD has no /status
                self.co.patch_namespaced_custom_object(
                    "scheduling.volcano.sh",
                    "v1beta1",
                    m["namespace"],
                    "podgroups",
                    m["name"],
                    {"status": {"phase": "Inqueue"}},
                )
                phase = "Inqueue"
            if phase in ("Inqueue", "Running", "Unknown"):
                admitted.add((m["namespace"], m["name"]))
        # raw JSON: the typed client rejects pods whose quantities are numbers (`cpu: 1`)
        raw = self.core.list_pod_for_all_namespaces(_preload_content=False)
        pods = json.loads(raw.data)["items"]
        for pod in pods:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if spec.get("nodeName") or meta.get("deletionTimestamp"):
                continue
            group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name")
            if (meta["namespace"], group) not in admitted:
                continue
            node = self.nodes[self._n % len(self.nodes)]
            self._n += 1
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": meta["name"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            try:
                self.core.create_namespaced_pod_binding(
                    meta["name"], meta["namespace"], body, _preload_content=False
                )
                self.binds += 1
            except client.ApiException:
                pass
