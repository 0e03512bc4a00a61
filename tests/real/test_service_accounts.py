"""kube-apiserver's ServiceAccount admission refuses a pod naming a missing ServiceAccount; the
sandbox has no ServiceAccount admission and stores it (a divergence listed in docs/sandbox.md).
A new namespace's `default` ServiceAccount comes from kube-controller-manager, a moment after
the namespace: the end-to-end tests wait for it before creating pods there."""

from __future__ import annotations

import pytest

from batch.sandbox.testing import run_sandbox
from tests.real.conftest import Api, json_request

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "orphan-sa"},
    "spec": {"serviceAccountName": "nosuch", "containers": [{"name": "main", "image": "x"}]},
}


def test_a_pod_naming_a_missing_service_account(api: Api) -> None:
    code, answer = api.request("POST", "/api/v1/namespaces/default/pods", POD)
    assert code == 403, answer
    assert 'serviceaccount "nosuch" not found' in answer["message"], answer
    with run_sandbox(install_crds=False) as sb:
        code, answer = json_request(sb.url + "/api/v1/namespaces/default/pods", "POST", POD)
    assert code == 201, answer  # the divergence
