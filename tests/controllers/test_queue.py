"""Queue reconciler: state machine, hierarchy, counts (volcano-semantics.md#queue-state-machine)."""

from __future__ import annotations

from typing import Any

from batch.controllers import constants as c
from batch.controllers.effects import PatchObject, PatchStatus
from batch.controllers.memory import MemoryCluster
from batch.controllers.queue import reconcile_queue


def q(name: str, *, parent: str | None = None, state: str | None = "Open") -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": c.SCHED_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }
    if parent:
        body["spec"]["parent"] = parent
    if state:
        body["status"] = {"state": state}
    return body


def pg(name: str, queue: str, phase: str) -> dict[str, Any]:
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queue": queue, "minMember": 1},
        "status": {"phase": phase},
    }


def cmd(queue: str, action: str, n: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": c.BUS_API,
        "kind": "Command",
        "metadata": {"name": f"{queue}-{action.lower()}-{n}", "namespace": "default"},
        "action": action,
        "target": {"kind": "Queue", "name": queue},
    }


class World:
    def __init__(self) -> None:
        self.cluster = MemoryCluster()

    def sync(self, rounds: int = 4) -> None:
        for _ in range(rounds):
            changed = 0
            for queue in self.cluster.objects_of("Queue"):
                name = queue["metadata"]["name"]
                res = reconcile_queue(
                    queue,
                    queues=self.cluster.objects_of("Queue"),
                    podgroups=[
                        p
                        for p in self.cluster.objects_of("PodGroup")
                        if p["spec"].get("queue") == name
                    ],
                    commands=[
                        x for x in self.cluster.objects_of("Command") if x["target"]["name"] == name
                    ],
                )
                changed += self.cluster.apply(
                    [a for a in res.actions if not isinstance(a, type(None))]
                )
            if not changed:
                return

    def state(self, name: str) -> str:
        obj = self.cluster.get("Queue", "", name) or {}
        return str((obj.get("status") or {}).get("state"))

    def annotations(self, name: str) -> dict[str, str]:
        obj = self.cluster.get("Queue", "", name) or {}
        return dict(obj["metadata"].get("annotations") or {})


def test_new_queue_opens_and_gets_root_parent() -> None:
    res = reconcile_queue(q("a", state=None), queues=[q("root")], podgroups=[])
    patches = res.of_type(PatchObject)
    assert patches[0].patch == {"spec": {"parent": "root"}}
    st = res.of_type(PatchStatus)[0].status
    assert st["state"] == "Open"
    assert st["pending"] == 0


def test_a_first_status_carries_allocated_as_volcanos_queue_crd_requires() -> None:
    # Volcano v1.10's Queue CRD: `status.required: [allocated]`; without it the API refuses
    # the write (422) and the queue (Tephra's `root`) never opens.
    first = reconcile_queue(q("root", state=None), queues=[], podgroups=[])
    assert first.of_type(PatchStatus)[0].status["allocated"] == {}
    later = reconcile_queue(q("root", state="Closed"), queues=[], podgroups=[])
    assert "allocated" not in later.of_type(PatchStatus)[0].status


def test_counts_per_phase() -> None:
    groups = [
        pg("a", "q", "Pending"),
        pg("b", "q", "Inqueue"),
        pg("c", "q", "Running"),
        pg("d", "q", "Running"),
        pg("e", "q", "Completed"),
        pg("f", "q", "Unknown"),
    ]
    res = reconcile_queue(q("q", parent="root"), queues=[q("root")], podgroups=groups)
    st = res.of_type(PatchStatus)[0].status
    assert st == {"pending": 1, "inqueue": 1, "running": 2, "unknown": 1, "completed": 1}


def test_close_empty_queue_is_closed_and_nonempty_is_closing_until_drained() -> None:
    w = World()
    w.cluster.add(q("root"))
    w.cluster.add(q("a", parent="root"))
    w.cluster.add(q("b", parent="root"))
    w.cluster.add(pg("g1", "b", "Running"))
    w.cluster.add(cmd("a", "CloseQueue"))
    w.cluster.add(cmd("b", "CloseQueue"))
    w.sync()
    assert w.state("a") == "Closed"
    assert w.state("b") == "Closing"
    assert w.cluster.objects_of("Command") == []
    del w.cluster.objects[("PodGroup", "ns", "g1")]
    w.sync()
    assert w.state("b") == "Closed"
    w.cluster.add(cmd("b", "OpenQueue"))
    w.sync()
    assert w.state("b") == "Open"


def test_hierarchy_close_propagates_and_reopen_restores_marked_children() -> None:
    w = World()
    w.cluster.add(q("root"))
    w.cluster.add(q("eng", parent="root"))
    w.cluster.add(q("prod", parent="eng"))
    w.cluster.add(q("dev", parent="eng"))
    w.cluster.add(q("leaf", parent="prod"))
    w.cluster.add(pg("g", "dev", "Running"))
    w.cluster.add(cmd("eng", "CloseQueue"))
    w.sync(6)
    assert w.state("eng") == "Closed"
    assert w.state("prod") == "Closed"
    assert w.state("leaf") == "Closed"
    assert w.state("dev") == "Closing"
    for name in ("prod", "dev", "leaf"):
        assert w.annotations(name).get(c.CLOSED_BY_PARENT) == "true"
    # a child cannot be opened while its parent is closed
    w.cluster.add(cmd("prod", "OpenQueue"))
    w.sync()
    assert w.state("prod") == "Closed"
    w.cluster.add(cmd("eng", "OpenQueue"))
    w.sync(6)
    for name in ("eng", "prod", "dev", "leaf"):
        assert w.state(name) == "Open", name
        assert c.CLOSED_BY_PARENT not in w.annotations(name)


def test_child_closed_by_itself_stays_closed_when_parent_reopens() -> None:
    w = World()
    w.cluster.add(q("root"))
    w.cluster.add(q("p", parent="root"))
    w.cluster.add(q("child", parent="p"))
    w.cluster.add(cmd("child", "CloseQueue"))
    w.sync()
    w.cluster.add(cmd("p", "CloseQueue", 1))
    w.sync()
    w.cluster.add(cmd("p", "OpenQueue", 2))
    w.sync()
    assert w.state("p") == "Open"
    assert w.state("child") == "Closed"


def test_command_repeat_is_harmless() -> None:
    queue = q("a", parent="root")
    res1 = reconcile_queue(
        queue, queues=[q("root"), queue], podgroups=[], commands=[cmd("a", "CloseQueue")]
    )
    queue["status"] = {
        "state": "Closed",
        "pending": 0,
        "inqueue": 0,
        "running": 0,
        "unknown": 0,
        "completed": 0,
    }
    res2 = reconcile_queue(
        queue, queues=[q("root"), queue], podgroups=[], commands=[cmd("a", "CloseQueue")]
    )
    assert res1.of_type(PatchStatus)[0].status["state"] == "Closed"
    assert res2.of_type(PatchStatus) == []


def test_queue_events_name_the_queue_as_kubectl_describe_looks_for_it() -> None:
    """`kubectl describe q` selects events by the queue's uid; the reference carries the
    resourceVersion the controller saw, as client-go's recorder fills it (issue 15, item 2)."""
    import asyncio

    from batch.controllers.effects import EmitEvent
    from batch.controllers.shell import apply_actions
    from tests.controllers.fakeapi import FakeApi

    queue = q("a", parent="root")
    queue["metadata"].update(uid="uid-a", resourceVersion="42")
    res = reconcile_queue(
        queue, queues=[q("root"), queue], podgroups=[], commands=[cmd("a", "CloseQueue")]
    )
    api: Any = FakeApi()  # a KubeClient by duck typing
    asyncio.run(apply_actions(api, res.of_type(EmitEvent), component="tephra-controllers"))
    [event] = api.of_kind("Event")
    assert event["involvedObject"] == {
        "apiVersion": c.SCHED_API,
        "kind": "Queue",
        "name": "a",
        "uid": "uid-a",
        "resourceVersion": "42",
    }
    assert event["metadata"]["namespace"] == "default"


def test_open_under_a_closed_parent_fails_and_unknown_commands_are_reported() -> None:
    from batch.controllers.effects import DeleteObject, EmitEvent

    root, parent = q("root"), q("p", parent="root", state="Closing")
    child = q("c", parent="p", state="Unknown")
    commands = [cmd("c", "OpenQueue", 0), cmd("c", "Explode", 1)]
    res = reconcile_queue(child, queues=[root, parent, child], podgroups=[], commands=commands)
    events = [(e.reason, e.type) for e in res.of_type(EmitEvent)]
    assert events == [  # by creation time, then name
        (c.COMMAND_ISSUED, "Normal"),
        ("UnknownCommand", "Warning"),
        (c.COMMAND_ISSUED, "Normal"),
        ("OpenQueueFailed", "Warning"),
    ]
    assert [d.ref.name for d in res.of_type(DeleteObject)] == ["c-explode-1", "c-openqueue-0"]
    # a command was given, so the parent is not followed: Unknown stays as it was
    assert "state" not in res.of_type(PatchStatus)[0].status
    assert res.of_type(PatchObject) == []


def test_unknown_state_opens_then_follows_a_closed_parent_with_a_mark() -> None:
    root, parent = q("root"), q("p", parent="root", state="Closed")
    child = q("c", parent="p", state="Unknown")
    res = reconcile_queue(child, queues=[root, parent, child], podgroups=[pg("x", "c", "Running")])
    assert res.of_type(PatchStatus)[0].status["state"] == "Closing"
    [mark] = res.of_type(PatchObject)
    assert mark.patch == {"metadata": {"annotations": {c.CLOSED_BY_PARENT: "true"}}}


def _from(namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["namespace"] = namespace
    return body


def test_queue_commands_from_outside_the_command_namespace_are_refused() -> None:
    """Issue 30.1: with `--queue-command-namespace`, a tenant's CloseQueue on root is never
    executed; it is reported on the Queue and on the Command, and deleted."""
    from batch.controllers.effects import DeleteObject, EmitEvent

    tenant = _from("team-a", cmd("root", c.CLOSE_QUEUE, 1))
    res = reconcile_queue(
        q("root"), queues=[q("root")], podgroups=[], commands=[tenant], command_namespace="admin"
    )
    assert not any(isinstance(a, PatchStatus) and "state" in a.status for a in res.actions)
    refused = [a for a in res.actions if isinstance(a, EmitEvent)]
    assert {(a.ref.kind, a.reason, a.type) for a in refused} == {
        ("Queue", c.COMMAND_REFUSED, "Warning"),
        ("Command", c.COMMAND_REFUSED, "Warning"),
    }
    message = refused[0].message
    assert "team-a/root-closequeue-1" in message and "namespace admin only" in message, message
    assert [a.ref.name for a in res.actions if isinstance(a, DeleteObject)] == ["root-closequeue-1"]


def test_queue_commands_from_the_command_namespace_are_executed() -> None:
    admin = _from("admin", cmd("team", c.CLOSE_QUEUE, 1))
    tenant = _from("team-a", cmd("team", c.OPEN_QUEUE, 2))
    res = reconcile_queue(
        q("team", parent="root"),
        queues=[q("root"), q("team", parent="root")],
        podgroups=[],
        commands=[admin, tenant],
        command_namespace="admin",
    )
    states = [a.status["state"] for a in res.actions if isinstance(a, PatchStatus)]
    assert states == [c.Q_CLOSED], res.actions  # the tenant's later OpenQueue did not reopen it
    # Unset, a Command from any namespace is executed (Volcano's behaviour; the webhook checks).
    res = reconcile_queue(q("root"), queues=[q("root")], podgroups=[], commands=[tenant])
    assert not any(a.reason == c.COMMAND_REFUSED for a in res.actions if hasattr(a, "reason"))
