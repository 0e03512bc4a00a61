"""Contract: the sandbox refuses (or answers) what a real kube-apiserver refuses (or answers).

Each test here pins a place where the sandbox used to be more lenient than kube-apiserver, so
Tephra's tests could pass where a real cluster would fail.
"""

from __future__ import annotations

from typing import Any

from tests.waiting import wait_for

from .helpers import Server, bind, diverges, http, pod, watch_lines

CM = "/api/v1/namespaces/default/configmaps"
MERGE = "application/merge-patch+json"


def _names(body: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_paged_list_is_a_snapshot_at_the_first_pages_resource_version(server: Server) -> None:
    """limit/continue pages all carry the first page's resourceVersion and show the objects as
    they were then, so a watch from that resourceVersion sees what changed between pages."""
    for n in ("pg-1", "pg-2", "pg-3"):
        http(
            server,
            "POST",
            CM,
            {"metadata": {"name": n, "labels": {"t": "page"}}, "data": {"v": "0"}},
        )
    code, page1 = http(server, "GET", f"{CM}?labelSelector=t%3Dpage&limit=2")
    assert code == 200 and _names(page1) == ["pg-1", "pg-2"]
    rv = page1["metadata"]["resourceVersion"]
    token = page1["metadata"]["continue"]
    # between the pages: modify and delete listed objects, change the one not yet listed
    http(server, "PATCH", f"{CM}/pg-1", {"data": {"v": "1"}}, ctype=MERGE)
    assert http(server, "DELETE", f"{CM}/pg-2")[0] == 200
    http(server, "PATCH", f"{CM}/pg-3", {"data": {"v": "1"}}, ctype=MERGE)
    http(server, "POST", CM, {"metadata": {"name": "pg-4", "labels": {"t": "page"}}})
    code, page2 = http(server, "GET", f"{CM}?labelSelector=t%3Dpage&limit=2&continue={token}")
    assert code == 200
    assert page2["metadata"]["resourceVersion"] == rv
    assert "continue" not in page2["metadata"]
    # the state at rv: pg-3 as it was, pg-4 not yet created
    assert _names(page2) == ["pg-3"] and page2["items"][0]["data"] == {"v": "0"}
    events = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in watch_lines(
            server, f"{CM}?watch=1&labelSelector=t%3Dpage&resourceVersion={rv}&timeoutSeconds=1"
        )
    ]
    assert events == [
        ("MODIFIED", "pg-1"),
        ("DELETED", "pg-2"),
        ("MODIFIED", "pg-3"),
        ("ADDED", "pg-4"),
    ]


def test_continue_token_older_than_history_is_410() -> None:
    """Sandbox only: it needs a watch history of two events (SandboxOptions.watch_history)."""
    from batch.sandbox.options import SandboxOptions
    from batch.sandbox.testing import run_sandbox

    with run_sandbox(
        options=SandboxOptions(watch_history=2, install_crds=False, emulator=False)
    ) as small:
        for i in range(3):
            http(small.url, "POST", CM, {"metadata": {"name": f"c{i}"}})
        _code, page1 = http(small.url, "GET", f"{CM}?limit=1")
        for i in range(6):
            http(small.url, "PATCH", f"{CM}/c2", {"data": {"i": str(i)}}, ctype=MERGE)
        code, body = http(
            small.url, "GET", f"{CM}?limit=1&continue={page1['metadata']['continue']}"
        )
        assert code == 410 and body["reason"] == "Expired"


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


def test_object_metadata_is_validated(server: Server) -> None:
    """ValidateObjectMeta: labels, annotations, ownerReferences and finalizers, on built-in
    kinds and custom resources alike, on create and on every non-status write."""

    def create(meta: dict[str, Any]) -> tuple[int, Any]:
        return http(server, "POST", CM, {"metadata": {"name": "meta-x", **meta}})

    code, body = create({"labels": {"volcano.sh/queue-name": "q" * 64}})
    assert code == 422 and body["reason"] == "Invalid"
    assert _causes(body) == [("metadata.labels", "FieldValueInvalid")]
    assert "must be no more than 63 bytes" in body["details"]["causes"][0]["message"]
    for labels in ({"a": "x/y"}, {"a b": "x"}, {"-a": "x"}, {"Bad.Prefix/a": "x"}, {"/a": "x"}):
        code, body = create({"labels": labels})
        assert code == 422 and _causes(body)[0][0] == "metadata.labels", labels
    code, body = create({"labels": {"p" * 254 + "/a": "x"}})
    assert code == 422 and "prefix part must be no more than 253" in body["message"]
    code, body = create({"annotations": {"bad key!": "v"}})
    assert code == 422 and _causes(body) == [("metadata.annotations", "FieldValueInvalid")]
    code, body = create({"annotations": {"big": "x" * (256 * 1024)}})
    assert code == 422 and _causes(body) == [("metadata.annotations", "FieldValueTooLong")]
    code, body = create({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap"}]})
    assert code == 422
    assert _causes(body) == [
        ("metadata.ownerReferences[0].name", "FieldValueRequired"),
        ("metadata.ownerReferences[0].uid", "FieldValueRequired"),
    ]
    two = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n, "controller": True}
        for n in ("x", "y")
    ]
    code, body = create({"ownerReferences": two})
    assert code == 422 and "Only one reference can have Controller set to true" in body["message"]
    code, body = create({"finalizers": ["not a finalizer"]})
    assert code == 422 and _causes(body) == [
        ("metadata.finalizers", "FieldValueInvalid"),
        ("metadata.finalizers[0]", "FieldValueInvalid"),  # neither standard nor qualified
    ]
    code, body = create({"finalizers": ["orphan", "foregroundDeletion"]})
    assert code == 422 and "cannot be both set" in body["message"]
    # what is valid still passes: prefixes, empty values, 63 characters, dots and underscores
    ok = {
        "labels": {"a.b/c_d": "", "k": "v" * 63, "example.com/x-y.z": "A_b.c-D"},
        "annotations": {"Example.COM/Mixed_Case": "anything / goes"},
        "finalizers": ["example.com/hold", "foregroundDeletion"],
    }
    code, body = create(ok)
    assert code == 201, body
    # updates, merge/strategic/JSON patches and server-side apply are validated too
    bad = {"metadata": {"labels": {"k": "v" * 64}}}
    for ctype in (MERGE, "application/strategic-merge-patch+json"):
        code, body = http(server, "PATCH", f"{CM}/meta-x", bad, ctype=ctype)
        assert code == 422, ctype
    code, body = http(
        server,
        "PATCH",
        f"{CM}/meta-x",
        [{"op": "add", "path": "/metadata/labels/k", "value": "v" * 64}],
        ctype="application/json-patch+json",
    )
    assert code == 422
    code, body = http(
        server,
        "PATCH",
        f"{CM}/meta-x?fieldManager=t&force=true",  # force: no conflict with the patches' owner
        raw=b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: meta-x\n  labels: {k: '-x'}\n",
        ctype="application/apply-patch+yaml",
    )
    assert code == 422
    _code, cur = http(server, "GET", f"{CM}/meta-x")
    cur["metadata"]["annotations"]["bad key!"] = "v"
    assert http(server, "PUT", f"{CM}/meta-x", cur)[0] == 422
    # custom resources too
    code, body = http(
        server,
        "POST",
        "/apis/scheduling.volcano.sh/v1beta1/queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "meta-q", "labels": {"k": "v" * 70}},
            "spec": {"weight": 1},
        },
    )
    assert code == 422 and _causes(body) == [("metadata.labels", "FieldValueInvalid")]
    # finalizers: none may be added once deletion started; removing them is fine
    http(server, "PATCH", f"{CM}/meta-x", {"metadata": {"finalizers": ["a/b"]}}, ctype=MERGE)
    assert http(server, "DELETE", f"{CM}/meta-x")[0] == 200
    code, body = http(
        server, "PATCH", f"{CM}/meta-x", {"metadata": {"finalizers": ["a/b", "c/d"]}}, ctype=MERGE
    )
    assert code == 422 and _causes(body) == [("metadata.finalizers", "FieldValueForbidden")]
    assert "no new finalizers can be added if the object is being deleted" in body["message"]
    code, _body = http(
        server, "PATCH", f"{CM}/meta-x", {"metadata": {"finalizers": None}}, ctype=MERGE
    )
    assert code == 200
    assert http(server, "GET", f"{CM}/meta-x")[0] == 404


def test_create_with_resource_version_and_put_with_other_uid(server: Server) -> None:
    code, body = http(server, "POST", CM, {"metadata": {"name": "rv-set", "resourceVersion": "5"}})
    assert code == 500 and "reason" not in body  # a plain error of etcd3's store, not a Status
    assert body["message"] == "resourceVersion should not be set on objects to be created"
    assert http(server, "GET", f"{CM}/rv-set")[0] == 404
    # a dry run never reaches storage, so it does not see the resourceVersion
    code, _body = http(
        server, "POST", f"{CM}?dryRun=All", {"metadata": {"name": "rv-set", "resourceVersion": "5"}}
    )
    assert code == 201
    code, cm = http(server, "POST", CM, {"metadata": {"name": "uid-pre"}})
    assert code == 201
    other = {**cm, "metadata": {**cm["metadata"], "uid": "00000000-0000-0000-0000-000000000000"}}
    code, body = http(server, "PUT", f"{CM}/uid-pre", other)
    assert code == 409 and body["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition" in body["message"]
    no_uid = {**cm, "metadata": {k: v for k, v in cm["metadata"].items() if k != "uid"}}
    no_uid["data"] = {"a": "1"}
    code, body = http(server, "PUT", f"{CM}/uid-pre", no_uid)
    assert code == 200 and body["metadata"]["uid"] == cm["metadata"]["uid"]
    code, body = http(server, "PATCH", f"{CM}/uid-pre", {"metadata": {"uid": "x"}}, ctype=MERGE)
    assert code == 422 and _causes(body) == [("metadata.uid", "FieldValueInvalid")]


PODS = "/api/v1/namespaces/default/pods"
SMP = "application/strategic-merge-patch+json"


def test_pod_spec_is_immutable_but_for_a_few_fields(server: Server) -> None:
    """ValidatePodUpdate: a pod's spec cannot change through the pod itself (PUT or PATCH),
    except images, activeDeadlineSeconds (down), added tolerations and removed gates."""
    spec_extra = {
        "activeDeadlineSeconds": 600,
        "schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/b"}],
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
    }
    assert http(server, "POST", PODS, pod("imm-0", extra=spec_extra))[0] == 201
    assert http(server, "POST", PODS, pod("imm-1"))[0] == 201

    def refused(name: str, patch: Any, ctype: str = MERGE) -> list[tuple[str, str]]:
        code, body = http(server, "PATCH", f"{PODS}/{name}", patch, ctype=ctype)
        assert code == 422, (patch, code, body)
        return _causes(body)

    # binding goes through pods/binding only
    assert refused("imm-1", {"spec": {"nodeName": "node-0"}}) == [("spec", "FieldValueForbidden")]
    _code, body = http(server, "GET", f"{PODS}/imm-1")
    assert "nodeName" not in body["spec"]
    code, body = http(
        server, "PATCH", f"{PODS}/imm-1", {"spec": {"schedulerName": "volcano"}}, ctype=MERGE
    )
    assert code == 422
    assert (
        "pod updates may not change fields other than `spec.containers[*].image`"
        in (body["message"])
    )
    refused("imm-1", {"spec": {"nodeSelector": {"x": "y"}}})
    refused("imm-1", {"spec": {"priorityClassName": "system-node-critical"}})
    refused(
        "imm-1",
        {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "3"}}}]}},
        SMP,
    )
    assert refused(
        "imm-1", {"spec": {"containers": [{"name": "side", "image": "busybox"}]}}, SMP
    ) == [("spec.containers", "FieldValueForbidden")]
    refused("imm-1", {"spec": {"terminationGracePeriodSeconds": 5}})
    # a toleration may be added (and its tolerationSeconds changed), not removed or altered
    tol = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    _code, cur = http(server, "GET", f"{PODS}/imm-1")
    tols = cur["spec"]["tolerations"]
    code, body = http(
        server, "PATCH", f"{PODS}/imm-1", {"spec": {"tolerations": [*tols, tol]}}, ctype=MERGE
    )
    assert code == 200, body
    assert refused("imm-1", {"spec": {"tolerations": tols[:1]}}) == [
        ("spec.tolerations", "FieldValueForbidden")
    ]
    changed = [{**tols[0], "tolerationSeconds": 10}, *tols[1:], tol]
    assert (
        http(server, "PATCH", f"{PODS}/imm-1", {"spec": {"tolerations": changed}}, ctype=MERGE)[0]
        == 200
    )
    # allowed: images, activeDeadlineSeconds down (not up, not unset), removing a gate
    ok = {
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.37"}],
            "initContainers": [{"name": "init", "image": "busybox:1.37"}],
            "activeDeadlineSeconds": 300,
            "schedulingGates": [{"name": "example.com/a", "$patch": "delete"}],
        }
    }
    code, body = http(server, "PATCH", f"{PODS}/imm-0", ok, ctype=SMP)
    assert code == 200, body
    assert body["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert body["spec"]["schedulingGates"] == [{"name": "example.com/b"}]
    assert refused("imm-0", {"spec": {"activeDeadlineSeconds": 900}}) == [
        ("spec.activeDeadlineSeconds", "FieldValueInvalid")
    ]
    assert refused("imm-0", {"spec": {"activeDeadlineSeconds": None}}) == [
        ("spec.activeDeadlineSeconds", "FieldValueInvalid")
    ]
    assert refused(
        "imm-0", {"spec": {"schedulingGates": [{"name": "example.com/b"}, {"name": "c"}]}}
    ) == [("spec.schedulingGates[1].name", "FieldValueForbidden")]
    # a gated pod may gain nodeSelector entries (not change them)
    code, body = http(
        server, "PATCH", f"{PODS}/imm-0", {"spec": {"nodeSelector": {"a": "1"}}}, ctype=MERGE
    )
    assert code == 200, body
    assert refused("imm-0", {"spec": {"nodeSelector": {"a": "2"}}}) == [
        ("spec.nodeSelector", "FieldValueInvalid")
    ]
    # PUT of what was read back (missing defaulted fields) with only allowed changes is fine
    _code, cur = http(server, "GET", f"{PODS}/imm-0")
    cur["spec"]["containers"][0].pop("terminationMessagePath")
    cur["spec"]["containers"][0]["image"] = "busybox:1.38"
    cur["metadata"]["labels"] = {"l": "v"}
    code, body = http(server, "PUT", f"{PODS}/imm-0", cur)
    assert code == 200, body
    assert body["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    # the binding and status subresources are not pod updates
    code, _body = http(
        server, "PATCH", f"{PODS}/imm-1/status", {"status": {"message": "m"}}, ctype=MERGE
    )
    assert code == 200
    assert bind(server, "default", "imm-1", "node-0")[0] == 201
    assert refused("imm-1", {"spec": {"nodeName": "node-1"}}) == [("spec", "FieldValueForbidden")]
    # a pod cannot be created bound while gated
    code, body = http(
        server,
        "POST",
        PODS,
        pod("imm-2", extra={"nodeName": "node-0", "schedulingGates": [{"name": "g"}]}),
    )
    assert code == 422 and ("spec.nodeName", "FieldValueForbidden") in _causes(body)


def test_strategic_merge_patch_list_strategies(server: Server) -> None:
    """Lists merge by key only where k8s.io/api declares a patchMergeKey; elsewhere a list in
    the patch replaces the list, and `$patch` directives are never stored as data."""
    node = "/api/v1/nodes/node-2"
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    assert http(server, "PATCH", node, {"spec": {"taints": taints}}, ctype=SMP)[0] == 200
    code, body = http(server, "PATCH", node, {"spec": {"taints": taints[1:]}}, ctype=SMP)
    assert code == 200 and body["spec"]["taints"] == taints[1:]
    code, body = http(
        server,
        "PATCH",
        node,
        {"spec": {"taints": [{"key": "c", "effect": "NoSchedule", "$patch": "delete"}]}},
        ctype=SMP,
    )
    assert code == 200 and body["spec"]["taints"] == [{"key": "c", "effect": "NoSchedule"}]
    http(server, "PATCH", node, {"spec": {"taints": None}}, ctype=SMP)
    # schedulingGates merge by name: `$patch: delete` removes one gate
    gates = [{"name": "a"}, {"name": "b"}]
    assert http(server, "POST", PODS, pod("smp-0", extra={"schedulingGates": gates}))[0] == 201
    code, body = http(
        server,
        "PATCH",
        f"{PODS}/smp-0",
        {"spec": {"schedulingGates": [{"name": "a", "$patch": "delete"}]}},
        ctype=SMP,
    )
    assert code == 200 and body["spec"]["schedulingGates"] == [{"name": "b"}]
    # deleting from a list the object does not have yet stores nothing
    assert http(server, "POST", PODS, pod("smp-1"))[0] == 201
    code, body = http(
        server,
        "PATCH",
        f"{PODS}/smp-1",
        {"spec": {"schedulingGates": [{"name": "a", "$patch": "delete"}]}},
        ctype=SMP,
    )
    assert code == 200 and not body["spec"].get("schedulingGates")
    # PodStatus: podIPs/hostIPs merge by ip, containerStatuses has no strategy (replace); the
    # first of hostIPs must be hostIP
    status = {
        "podIP": "10.0.0.1",
        "hostIP": "192.168.0.1",
        "podIPs": [{"ip": "10.0.0.1"}],
        "hostIPs": [{"ip": "192.168.0.1"}],
        "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 0, "image": "i", "imageID": ""},
            {"name": "b", "ready": True, "restartCount": 0, "image": "i", "imageID": ""},
        ],
    }
    sub = f"{PODS}/smp-1/status"
    assert http(server, "PATCH", sub, {"status": status}, ctype=SMP)[0] == 200
    code, body = http(
        server,
        "PATCH",
        sub,
        {
            "status": {
                # the whole list: kube-apiserver keeps the stored podIPs when a patch names
                # only a new one (docs/sandbox.md); the sandbox appends it
                "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                "hostIP": None,
                "hostIPs": [{"ip": "192.168.0.1", "$patch": "delete"}],
                "containerStatuses": [status["containerStatuses"][1]],
            }
        },
        ctype=SMP,
    )
    assert code == 200
    assert body["status"]["podIPs"] == [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]
    assert not body["status"].get("hostIPs")
    assert [c["name"] for c in body["status"]["containerStatuses"]] == ["b"]
    # a Service's ports merge by port (a container's by containerPort)
    svc = "/api/v1/namespaces/default/services"
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 81}]
    assert (
        http(server, "POST", svc, {"metadata": {"name": "smp-s"}, "spec": {"ports": ports}})[0]
        == 201
    )
    code, body = http(
        server, "PATCH", f"{svc}/smp-s", {"spec": {"ports": [{"name": "c", "port": 80}]}}, ctype=SMP
    )
    defaulted = {"protocol": "TCP"}
    assert code == 200 and body["spec"]["ports"] == [
        {"name": "c", "port": 80, "targetPort": 80, **defaulted},
        {**ports[1], "targetPort": 81, **defaulted},
    ]


@diverges("a JSON patch replacing the root replaces the object on kube-apiserver (`{}`: 400)")
def test_json_patch_of_the_root_path(server: Server) -> None:
    """The root is not a path add/replace/remove can work on."""
    assert http(server, "POST", PODS, pod("jp-0"))[0] == 201
    for op in ({"op": "remove", "path": ""}, {"op": "replace", "path": "", "value": {}}):
        code, body = http(
            server, "PATCH", f"{PODS}/jp-0", [op], ctype="application/json-patch+json"
        )
        assert code == 422, (op, body)


def test_eviction_budgets_empty_selector_and_pods_that_can_ignore_them(server: Server) -> None:
    """policy/v1: a PDB with `selector: {}` covers every pod of its namespace, one without a
    selector none; Pending pods are evicted without a budget check (canIgnorePDB)."""
    ns = "pdb-ns"
    http(server, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    pods = f"/api/v1/namespaces/{ns}/pods"
    pdbs = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    for n in ("run-0", "run-1"):
        http(server, "POST", pods, pod(n, labels={"app": "x"}, extra={"nodeName": "node-1"}))
    http(server, "POST", pods, pod("pending", labels={"app": "x"}))
    wait_for(
        lambda: all(
            http(server, "GET", f"{pods}/{n}")[1]["status"].get("phase") == "Running"
            for n in ("run-0", "run-1")
        ),
        "pods running",
    )

    def evict(name: str) -> tuple[int, Any]:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        return http(server, "POST", f"{pods}/{name}/eviction", body)

    none = {"metadata": {"name": "none"}, "spec": {"minAvailable": "100%"}}
    assert http(server, "POST", pdbs, none)[0] == 201
    everything = {"metadata": {"name": "all"}, "spec": {"selector": {}, "minAvailable": "100%"}}
    assert http(server, "POST", pdbs, everything)[0] == 201
    code, body = evict("run-0")
    assert code == 429 and body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    # a Pending pod is not counted on by anyone: it goes whatever the budget says
    code, _body = evict("pending")
    assert code == 201
    # two budgets for one pod: the eviction subresource refuses to choose
    two = {"metadata": {"name": "two"}, "spec": {"selector": {}, "maxUnavailable": 5}}
    assert http(server, "POST", pdbs, two)[0] == 201
    code, body = evict("run-1")
    assert code == 500 and "more than one PodDisruptionBudget" in body["message"]
    http(server, "DELETE", f"{pdbs}/two")
    http(server, "DELETE", f"{pdbs}/all")
    assert evict("run-1")[0] == 201


def test_invalid_selectors_are_bad_requests(server: Server) -> None:
    """labels.Parse / fields.ParseSelector failures are 400 BadRequest, for lists and watches."""
    bad_labels = (
        "a%3Dns/x",
        "a%20b%3Dc",
        "a%3Db%3Dc",
        "Bad_Prefix.io/a",
        "a%3E",
        "a,",
        "a%20in%20x",
    )
    for sel in bad_labels:
        code, body = http(server, "GET", f"{PODS}?labelSelector={sel}")
        assert code == 400 and body["reason"] == "BadRequest", (sel, code, body)
        code, body = http(server, "GET", f"{PODS}?watch=1&labelSelector={sel}")
        assert code == 400, sel
    for sel in ("spec.nodeName%3Db%3Dc", "spec.nodeName%3Da%5Cx", "spec.nodeName"):
        code, body = http(server, "GET", f"{PODS}?fieldSelector={sel}")
        assert code == 400 and body["reason"] == "BadRequest", (sel, code, body)
    # what labels.Parse accepts keeps working: "()" is the set of the empty value
    http(server, "POST", CM, {"metadata": {"name": "sel-e", "labels": {"e": ""}}})
    http(server, "POST", CM, {"metadata": {"name": "sel-n", "labels": {"e": "7", "n": "x"}}})
    for sel, want in (
        ("e%20in%20()", ["sel-e"]),
        ("e%20in%20(,7)", ["sel-e", "sel-n"]),
        ("e%3E5", ["sel-n"]),
        ("e,!n", ["sel-e"]),
        ("e%3D%3D7,n%20notin%20(y)", ["sel-n"]),
    ):
        code, body = http(server, "GET", f"{CM}?labelSelector={sel}")
        assert code == 200 and sorted(_names(body)) == want, sel
    code, body = http(server, "GET", f"{CM}?fieldSelector=metadata.name%3Dsel-e%5C%2Cx")
    assert code == 200 and _names(body) == []


def test_deletion_details(server: Server) -> None:
    """batch/v1 Job DELETE orphans its pods by default; deletecollection honours dryRun;
    generateName prefixes are cut to 58 characters; deletion bumps generation."""
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "orphans"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "b"}]}
            }
        },
    }
    assert http(server, "POST", jobs, job)[0] == 201

    def job_pods() -> list[dict[str, Any]]:
        _code, body = http(server, "GET", f"{PODS}?labelSelector=job-name%3Dorphans")
        return list(body["items"])

    wait_for(job_pods, "the Job's pod")
    assert http(server, "DELETE", f"{jobs}/orphans")[0] == 200
    wait_for(lambda: http(server, "GET", f"{jobs}/orphans")[0] == 404, "the Job gone")
    wait_for(
        lambda: all(not p["metadata"].get("ownerReferences") for p in job_pods()),
        "orphaned pods",
    )
    assert job_pods() and all(not p["metadata"].get("deletionTimestamp") for p in job_pods())
    # with an explicit policy the pods go with the Job
    job["metadata"]["name"] = "cascade"
    assert http(server, "POST", jobs, job)[0] == 201
    sel = "labelSelector=job-name%3Dcascade"
    wait_for(lambda: http(server, "GET", f"{PODS}?{sel}")[1]["items"], "the Job's pod")
    assert http(server, "DELETE", f"{jobs}/cascade?propagationPolicy=Background")[0] == 200
    wait_for(lambda: not http(server, "GET", f"{PODS}?{sel}")[1]["items"], "pods deleted")

    # deletecollection with dryRun=All deletes nothing
    for n in ("dc-a", "dc-b"):
        http(server, "POST", CM, {"metadata": {"name": n, "labels": {"dc": "1"}}})
    code, body = http(server, "DELETE", f"{CM}?labelSelector=dc%3D1&dryRun=All")
    assert code == 200 and sorted(_names(body)) == ["dc-a", "dc-b"]
    assert sorted(_names(http(server, "GET", f"{CM}?labelSelector=dc%3D1")[1])) == ["dc-a", "dc-b"]
    code, body = http(server, "DELETE", f"{CM}?labelSelector=dc%3D1")
    assert code == 200 and not http(server, "GET", f"{CM}?labelSelector=dc%3D1")[1]["items"]

    # generateName: prefix cut to 58 characters, then 5 random ones
    for prefix in ("x" * 62 + "-", "y" * 252 + "-"):
        code, body = http(server, "POST", CM, {"metadata": {"generateName": prefix}})
        assert code == 201, body
        name = body["metadata"]["name"]
        assert len(name) == 63 and name[:58] == prefix[:58]

    # deletionTimestamp set on an object that stays (finalizer): a new generation
    queues = "/apis/scheduling.volcano.sh/v1beta1/queues"
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "gen-q", "finalizers": ["example.com/hold"]},
        "spec": {"weight": 1},
    }
    code, body = http(server, "POST", queues, q)
    assert code == 201 and body["metadata"]["generation"] == 1
    code, body = http(server, "DELETE", f"{queues}/gen-q")
    assert code == 200 and body["metadata"]["generation"] == 2
    assert body["metadata"]["deletionTimestamp"]
    code, body = http(server, "DELETE", f"{queues}/gen-q")  # already deleting: no new one
    assert code == 200 and body["metadata"]["generation"] == 2
    http(server, "PATCH", f"{queues}/gen-q", {"metadata": {"finalizers": None}}, ctype=MERGE)
    wait_for(lambda: http(server, "GET", f"{queues}/gen-q")[0] == 404, "queue gone")


def test_a_pods_first_host_ip_is_its_host_ip(server: Server) -> None:
    """ValidatePodStatusUpdate: `status.hostIPs[0]` must be `status.hostIP`."""
    assert http(server, "POST", PODS, pod("hip-0"))[0] == 201
    sub = f"{PODS}/hip-0/status"
    alone = {"status": {"hostIPs": [{"ip": "192.168.0.1"}]}}
    code, body = http(server, "PATCH", sub, alone, ctype=MERGE)
    assert code == 422 and _causes(body) == [("status.hostIPs[0].ip", "FieldValueInvalid")], body
    assert "must be equal to `hostIP`" in body["message"]
    both = {"status": {"hostIP": "192.168.0.1", "hostIPs": [{"ip": "192.168.0.1"}]}}
    assert http(server, "PATCH", sub, both, ctype=MERGE)[0] == 200
