"""Tephra's binder and event writer in protobuf (batch.kube.protobuf), against both servers.

The scheduler sends its Bindings (`pods/<name>/binding`) and Events as protobuf by default; the
sandbox must take them as the real kube-apiserver (the oracle, in the `real` tier) does: the
pod bound to the node named, the event stored as posted, and no 415 that would have turned the
writer to JSON.
"""

from __future__ import annotations

import asyncio

from batch.kube.binder import Binder, BindOutcome, BindRequest
from batch.kube.client import KubeClient
from batch.kube.config import load_access
from batch.kube.podcond import scheduled_event
from batch.kube.protobuf import ProtobufCreates
from batch.kube.status import StatusWriter

from .helpers import Server, http, pod


def test_a_protobuf_binding_and_event_are_taken(server: Server) -> None:
    code, created = http(server, "POST", "/api/v1/namespaces/default/pods", pod("pb-bind"))
    assert code == 201, created
    uid = created["metadata"]["uid"]
    req = BindRequest("default", "pb-bind", uid, "node-1")
    creates = ProtobufCreates(True)

    async def main() -> tuple[BindOutcome, str, bool]:
        async with KubeClient(load_access(server.kubeconfig_path)) as client:
            binder = Binder(client, protobuf=creates)
            _, outcome, message = await binder.bind_one(req)
            events = StatusWriter(client, component="tephra-test", protobuf=creates)
            posted = await events.post_event(scheduled_event("default", "pb-bind", uid, "node-1"))
            return outcome, message, posted

    outcome, message, posted = asyncio.run(main())
    assert (outcome, message, posted) == (BindOutcome.BOUND, "", True)
    assert creates.enabled  # neither create was refused with 415
    _, bound = http(server, "GET", "/api/v1/namespaces/default/pods/pb-bind")
    assert bound["spec"]["nodeName"] == "node-1"
    _, listed = http(
        server,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dpb-bind",
    )
    [event] = [e for e in listed["items"] if e["source"].get("component") == "tephra-test"]
    try:
        assert event["reason"] == "Scheduled" and event["type"] == "Normal"
        assert event["message"] == "Successfully assigned default/pb-bind to node-1"
        assert event["involvedObject"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "default",
            "name": "pb-bind",
            "uid": uid,
        }
        assert event["count"] == 1 and event["reportingComponent"] == "tephra-test"
        assert event["firstTimestamp"] == event["lastTimestamp"]
        assert event["metadata"]["name"].startswith("pb-bind.")
    finally:
        http(server, "DELETE", f"/api/v1/namespaces/default/events/{event['metadata']['name']}")
