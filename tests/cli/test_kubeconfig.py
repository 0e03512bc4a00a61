"""One kubeconfig loader with kubectl's rules for the CLI and the services (issue 15, item 10):
`$KUBECONFIG` lists merged, `--context`, exec credential plugins with expiry and refresh.

The exec plugin is a fake: a Python script that answers an ExecCredential whose token counts
its runs (`tok-1`, `tok-2`, ...) and that records the KUBERNETES_EXEC_INFO it was given.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from click.testing import CliRunner

from batch.cli.main import main
from batch.kube.client import RESOURCES, KubeClient
from batch.kube.config import KubeConfigError, kubeconfig_paths, load_access, resolve
from batch.sandbox.testing import run_sandbox

PLUGIN = """\
#!{python}
import datetime, json, os, pathlib, sys
state = pathlib.Path(os.environ["FAKE_STATE"])
runs = int(state.read_text()) + 1 if state.exists() else 1
state.write_text(str(runs))
pathlib.Path(str(state) + ".info").write_text(os.environ.get("KUBERNETES_EXEC_INFO", ""))
if os.environ.get("FAKE_FAIL"):
    print("could not sign in: token revoked", file=sys.stderr)
    sys.exit(3)
ttl = float(os.environ.get("FAKE_TTL", "3600"))
expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=ttl)
status = {{"token": f"tok-{{runs}}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}
kind = {{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}}
print(json.dumps({{**kind, "status": status}}))
"""


def plugin(tmp_path: Path) -> Path:
    script = tmp_path / "bin" / "fake-auth"
    script.parent.mkdir(exist_ok=True)
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    return script


def kubeconfig(
    path: Path,
    *,
    context: str,
    server: str,
    user: dict[str, Any],
    current: bool = True,
    cluster: str | None = None,
) -> Path:
    name = cluster or f"{context}-cluster"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": f"{context}-user", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": name, "user": f"{context}-user"}}],
    }
    if current:
        doc["current-context"] = context
    path.write_text(yaml.safe_dump(doc))
    return path


def exec_user(state: Path, *, command: str = "bin/fake-auth", **env: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "env": [{"name": "FAKE_STATE", "value": str(state)}]
            + [{"name": k, "value": v} for k, v in env.items()],
            "provideClusterInfo": True,
            "interactiveMode": "Never",
            "installHint": "install fake-auth from the test suite",
        }
    }


def test_kubeconfig_list_is_merged_first_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = kubeconfig(tmp_path / "a", context="ctx-a", server="https://a:6443", user={"token": "A"})
    b = kubeconfig(
        tmp_path / "b",
        context="ctx-b",
        server="https://b:6443",
        user={"token": "B"},
        cluster="ctx-a-cluster",  # the same cluster name as a's: a's wins
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(a), str(b)]))
    assert kubeconfig_paths() == [a, b]
    now = resolve()
    assert (now.context, now.server, now.token) == ("ctx-a", "https://a:6443", "A")
    other = resolve(context="ctx-b")
    assert (other.server, other.token) == ("https://a:6443", "B")
    with pytest.raises(KubeConfigError, match="no context named 'nope'"):
        resolve(context="nope")
    # an explicit file is the only one read
    assert resolve(b, context="ctx-b").token == "B"
    with pytest.raises(KubeConfigError, match="no context named 'ctx-a'"):
        resolve(b, context="ctx-a")


def test_exec_plugin_token_expiry_and_cluster_info(tmp_path: Path) -> None:
    plugin(tmp_path)
    state = tmp_path / "runs"
    path = kubeconfig(
        tmp_path / "kc", context="eks", server="http://127.0.0.1:1", user=exec_user(state)
    )
    access = load_access(path)
    creds = access.credentials
    assert creds is not None and creds.headers() == {"Authorization": "Bearer tok-1"}
    assert creds.headers() == {"Authorization": "Bearer tok-1"}  # cached until it expires
    info = json.loads((tmp_path / "runs.info").read_text())
    assert info["kind"] == "ExecCredential" and info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == "http://127.0.0.1:1"
    creds._clock = lambda: 4_000_000_000.0  # past the expiry: the plugin runs again
    assert creds.headers() == {"Authorization": "Bearer tok-2"} and creds.runs == 2


def test_exec_plugin_failures_are_one_line(tmp_path: Path) -> None:
    plugin(tmp_path)
    state = tmp_path / "runs"
    failing = kubeconfig(
        tmp_path / "kc", context="c", server="http://x", user=exec_user(state, FAKE_FAIL="1")
    )
    with pytest.raises(KubeConfigError, match="failed: could not sign in: token revoked"):
        load_access(failing).credentials.headers()  # type: ignore[union-attr]
    missing = kubeconfig(
        tmp_path / "kc2", context="c", server="http://x", user=exec_user(state, command="nope-x")
    )
    with pytest.raises(KubeConfigError, match=r"command not found \(install fake-auth"):
        load_access(missing).credentials.headers()  # type: ignore[union-attr]
    legacy = kubeconfig(
        tmp_path / "kc3", context="c", server="http://x", user={"auth-provider": {"name": "gcp"}}
    )
    with pytest.raises(KubeConfigError, match="auth-provider 'gcp' is not supported"):
        load_access(legacy)


def test_async_client_renews_an_expired_or_refused_token(tmp_path: Path) -> None:
    """The services' client sends the plugin's token; a 401 runs the plugin again, once."""
    plugin(tmp_path)
    seen: list[str] = []

    async def nodes(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "")
        seen.append(token)
        if token == "Bearer tok-1":  # revoked by the server before its expiry
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/nodes", nodes)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        path = kubeconfig(
            tmp_path / "kc",
            context="c",
            server=f"http://127.0.0.1:{port}",
            user=exec_user(tmp_path / "runs"),
        )
        try:
            async with KubeClient(load_access(path)) as client:
                await client.list(RESOURCES["Node"])
                await client.list(RESOURCES["Node"])
        finally:
            await runner.cleanup()

    asyncio.run(scenario())
    assert seen == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-2"]


def test_cli_client_renews_a_refused_token(tmp_path: Path) -> None:
    """The CLI's client (`batch.kube.rest`) too: a 401 runs the plugin again, once, and the
    command succeeds with the new token."""
    plugin(tmp_path)
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "")
        seen.append(token)
        if token == "Bearer tok-1":  # revoked by the server before its expiry
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0"})

    async def scenario() -> str:
        app = web.Application()
        app.router.add_get("/version", version)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        path = kubeconfig(
            tmp_path / "kc",
            context="c",
            server=f"http://127.0.0.1:{port}",
            user=exec_user(tmp_path / "runs"),
        )
        try:
            args = ["version", "--kubeconfig", str(path)]
            result = await asyncio.to_thread(CliRunner().invoke, main, args)
        finally:
            await runner.cleanup()
        assert result.exit_code == 0, result.output
        return str(result.stdout)

    assert "Server Version: v1.33.0" in asyncio.run(scenario())
    assert seen == ["Bearer tok-1", "Bearer tok-2"]
    assert (tmp_path / "runs").read_text() == "2"


def test_cli_follows_kubeconfig_list_context_and_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin(tmp_path)
    with run_sandbox() as sb:
        server = yaml.safe_load(sb.kubeconfig_path.read_text())["clusters"][0]["cluster"]["server"]
        dead = kubeconfig(
            tmp_path / "dead", context="dead", server="http://127.0.0.1:9", user={"token": "x"}
        )
        live = kubeconfig(
            tmp_path / "live",
            context="sandbox",
            server=server,
            user=exec_user(tmp_path / "runs"),
            current=False,
        )
        monkeypatch.setenv("KUBECONFIG", f"{dead}{os.pathsep}{live}")
        refused = CliRunner().invoke(main, ["queue", "list"])
        assert refused.exit_code == 1 and "127.0.0.1:9" in refused.stderr
        result = CliRunner().invoke(main, ["queue", "list", "--context", "sandbox"])
        assert result.exit_code == 0, result.output
        assert "default" in result.stdout
        assert (tmp_path / "runs").read_text() == "1"  # the plugin signed the CLI in
        unknown = CliRunner().invoke(main, ["job", "list", "--context", "nope"])
        assert unknown.exit_code == 1 and "no context named 'nope'" in unknown.stderr


def test_minified_keeps_one_context_with_absolute_paths(tmp_path: Path) -> None:
    from batch.kube.config import minified

    (tmp_path / "certs").mkdir()
    path = tmp_path / "kc"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "a",
                "clusters": [
                    {
                        "name": "ca",
                        "cluster": {"server": "https://a", "certificate-authority": "certs/ca"},
                    },
                    {"name": "cb", "cluster": {"server": "https://b"}},
                ],
                "users": [{"name": "ub", "user": exec_user(tmp_path / "runs")}],
                "contexts": [
                    {"name": "a", "context": {"cluster": "ca"}},
                    {"name": "b", "context": {"cluster": "cb", "user": "ub", "namespace": "ml"}},
                ],
            }
        )
    )
    doc = minified(path, context="b")
    assert doc["current-context"] == "b" and [c["name"] for c in doc["contexts"]] == ["b"]
    assert [c["name"] for c in doc["clusters"]] == ["cb"]
    assert doc["users"][0]["user"]["exec"]["command"] == str(tmp_path / "bin" / "fake-auth")
    assert minified(path)["clusters"][0]["cluster"]["certificate-authority"] == str(
        tmp_path / "certs" / "ca"
    )


@pytest.mark.parametrize("service", ["scheduler", "controller"])
def test_services_take_a_context_from_a_kubeconfig_list(tmp_path: Path, service: str) -> None:
    import subprocess
    import threading

    plugin(tmp_path)
    with run_sandbox() as sb:
        server = yaml.safe_load(sb.kubeconfig_path.read_text())["clusters"][0]["cluster"]["server"]
        dead = kubeconfig(
            tmp_path / "dead", context="dead", server="http://127.0.0.1:9", user={"token": "x"}
        )
        live = kubeconfig(
            tmp_path / "live",
            context="sandbox",
            server=server,
            user=exec_user(tmp_path / "runs"),
            current=False,
        )
        env = {**os.environ, "KUBECONFIG": f"{dead}{os.pathsep}{live}", "PYTHONUNBUFFERED": "1"}
        extra = {
            "scheduler": ["--metrics-port", "0", "--healthz-port", "0", "-v"],
            "controller": ["--metrics-port", "0"],
        }[service]
        proc = subprocess.Popen(
            [sys.executable, "-m", "batch.cli.main", service, "--context", "sandbox", *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        want = {"scheduler": "cache synced", "controller": "controllers ready"}[service]
        lines: list[str] = []
        watchdog = threading.Timer(60, proc.kill)  # a service that never gets there ends
        watchdog.start()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                if want in line:
                    break
        finally:
            watchdog.cancel()
            proc.terminate()
            proc.wait(20)
        assert any(want in line for line in lines), "".join(lines[-20:])
        assert (tmp_path / "runs").read_text() >= "1"  # signed in through the exec plugin


def test_tls_server_name_is_the_name_checked(tmp_path: Path) -> None:
    """`tls-server-name`: the certificate is checked against that name, not the URL's host (an
    API server behind an address its certificate does not name), in both clients."""
    import ssl

    from batch.kube.certs import self_signed

    cert, key = self_signed(tmp_path / "pki", hosts=("kube.internal",))

    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0"})

    async def nodes(_request: web.Request) -> web.Response:
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    def config(port: int, name: str | None) -> Path:
        cluster: dict[str, Any] = {
            "server": f"https://127.0.0.1:{port}",
            "certificate-authority": str(cert),
        }
        if name:
            cluster["tls-server-name"] = name
        doc = {
            "current-context": "c",
            "clusters": [{"name": "k", "cluster": cluster}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        }
        path = tmp_path / f"kc-{name}"
        path.write_text(yaml.safe_dump(doc))
        return path

    async def scenario() -> tuple[int, list[str]]:
        app = web.Application()
        app.router.add_get("/version", version)
        app.router.add_get("/version/", version)
        app.router.add_get("/api/v1/nodes", nodes)
        runner = web.AppRunner(app)
        await runner.setup()
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        outcomes = []
        try:
            for name in ("kube.internal", None):
                try:
                    async with KubeClient(load_access(config(port, name))) as client:
                        await client.list(RESOURCES["Node"])
                    outcomes.append("ok")
                except Exception as exc:  # the outcome is what is compared
                    outcomes.append(type(exc).__name__)
            cli = await asyncio.to_thread(
                CliRunner().invoke,
                main,
                ["version", "--kubeconfig", str(config(port, "kube.internal"))],
            )
            outcomes.append(
                cli.stdout.strip().splitlines()[-1] if cli.exit_code == 0 else repr(cli.exception)
            )
        finally:
            await runner.cleanup()
        return port, outcomes

    _port, outcomes = asyncio.run(scenario())
    assert outcomes[0] == "ok"
    assert "Certificate" in outcomes[1]  # 127.0.0.1 is not a name the certificate holds
    assert outcomes[2] == "Server Version: v1.33.0"


def test_exec_plugin_interactive_only_on_a_terminal(tmp_path: Path) -> None:
    """As kubectl: a plugin is told it may prompt (spec.interactive) only when the command runs
    on a terminal and its interactiveMode allows; `Always` without one is refused."""
    plugin(tmp_path)
    state = tmp_path / "runs"

    def info(mode: str, terminal: bool) -> dict[str, Any]:
        user = exec_user(state)
        user["exec"]["interactiveMode"] = mode
        path = kubeconfig(tmp_path / f"kc-{mode}", context="c", server="http://x", user=user)
        creds = load_access(path).credentials
        assert creds is not None
        creds.terminal = terminal
        creds.headers()
        loaded: dict[str, Any] = json.loads((tmp_path / "runs.info").read_text())
        return loaded

    assert info("IfAvailable", True)["spec"]["interactive"] is True
    assert info("IfAvailable", False)["spec"]["interactive"] is False
    assert info("Never", True)["spec"]["interactive"] is False
    assert info("Always", True)["spec"]["interactive"] is True
    with pytest.raises(KubeConfigError, match="needs an interactive terminal"):
        info("Always", False)


def test_inline_certificates_leave_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubeconfig with `certificate-authority-data` and an inline client certificate and key
    (kind's, minikube's): both clients and kopf's login reach a server that demands the client
    certificate, and no copy of the key is left on disk (each load wrote three temp files
    before, never removed: thousands in /tmp after a day of CLI use)."""
    import base64
    import ssl
    import tempfile

    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from batch.controllers.kopflogin import connection_info
    from batch.kube.certs import issue, write_pem

    ca = issue("test-ca")
    server_key, server_cert = issue(
        "api", issuer=ca, hosts=("127.0.0.1",), usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client_key, client_cert = issue("admin", issuer=ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    pki = tmp_path / "pki"
    pki.mkdir()
    write_pem(pki / "ca.crt", ca[1])
    write_pem(pki / "server.crt", server_cert)
    write_pem(pki / "server.key", server_key)
    pem = serialization.Encoding.PEM

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    def config(port: int) -> Path:
        key = client_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        doc = {
            "current-context": "c",
            "clusters": [
                {
                    "name": "k",
                    "cluster": {
                        "server": f"https://127.0.0.1:{port}",
                        "certificate-authority-data": b64((pki / "ca.crt").read_bytes()),
                    },
                }
            ],
            "users": [
                {
                    "name": "u",
                    "user": {
                        "client-certificate-data": b64(client_cert.public_bytes(pem)),
                        "client-key-data": b64(key),
                    },
                }
            ],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        }
        path = tmp_path / "kc"
        path.write_text(yaml.safe_dump(doc))
        return path

    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0"})

    async def nodes(_request: web.Request) -> web.Response:
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    async def scenario() -> list[str]:
        app = web.Application()
        app.router.add_get("/version", version)
        app.router.add_get("/api/v1/nodes", nodes)
        runner = web.AppRunner(app)
        await runner.setup()
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
        tls.verify_mode = ssl.CERT_REQUIRED
        tls.load_cert_chain(pki / "server.crt", pki / "server.key")
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        path = config(port)
        try:
            async with KubeClient(load_access(path)) as client:
                await client.list(RESOURCES["Node"])
            cli = await asyncio.to_thread(
                CliRunner().invoke, main, ["version", "--kubeconfig", str(path)]
            )
            kopf_ctx = connection_info(path).as_ssl_context()
        finally:
            await runner.cleanup()
        return [cli.stdout.strip().splitlines()[-1], type(kopf_ctx).__name__]

    assert asyncio.run(scenario()) == ["Server Version: v1.33.0", "SSLContext"]
    assert list(temp.iterdir()) == []
