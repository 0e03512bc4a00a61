"""Where the Kubernetes API is and how to authenticate, by kubectl's rules: one loader for all.

Why this exists: the scheduler and the controllers talk to the API server with their own asyncio
HTTP client (the official client is synchronous and too slow for a thousand binds a second),
the CLI with a small synchronous one (`batch.kube.rest`); both must find the cluster exactly as
kubectl does, or a user who can `kubectl get pods` cannot run Tephra. The rules (client-go's
loading rules):

* `--kubeconfig FILE` is the only file read (it must exist). Otherwise `$KUBECONFIG` is a list
  of files separated by `os.pathsep` (`:`), merged: the first file that names a cluster, user or
  context wins it, the first non-empty `current-context` wins, missing files are skipped.
  Otherwise `~/.kube/config`, otherwise the in-cluster service account (inside a pod the
  service account comes first, as controller-runtime orders them for services).
* `--context NAME` replaces `current-context`. Relative paths (certificates, an exec plugin's
  command with a `/` in it) are relative to the file that holds the entry. A cluster's
  `tls-server-name` is the name its certificate is checked against.
* Users authenticate with a token (`token`, `tokenFile`), basic auth, client certificates, or an
  exec credential plugin (`client.authentication.k8s.io/v1` or `v1beta1` ExecCredential: EKS's
  `aws eks get-token`, GKE's `gke-gcloud-auth-plugin`, AKS's `kubelogin`). A plugin runs when a
  credential is first needed and again when it expires (`expirationTimestamp`) or when the
  server answers 401; it gets `KUBERNETES_EXEC_INFO` (and the cluster with
  `provideClusterInfo`), and may prompt (`interactive`) only when the command runs on a
  terminal and its `interactiveMode` is not `Never`. Legacy `auth-provider` entries are
  refused with one line.

`resolve()` gives the facts (`Target`); `load_access()` turns them into the `ClusterAccess` of
`batch.kube.client.KubeClient` and of the CLI's `batch.kube.rest.RestClient`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batch.api.errors import UserError
from batch.api.timestamps import parse_time
from batch.api.yamlio import FileInputError, read_text_file, yaml_error_summary

__all__ = [
    "ClusterAccess",
    "Credential",
    "ExecCredentials",
    "KubeConfigError",
    "Target",
    "kubeconfig_paths",
    "load_access",
    "minified",
    "resolve",
]

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_EXEC_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: a credential this close to its expiry is renewed before use
_EXPIRY_MARGIN_S = 10.0


class KubeConfigError(UserError):
    """The kubeconfig is missing, unreadable or incomplete, or its credential plugin failed."""


# ---------------------------------------------------------------------------- exec plugins


@dataclass(frozen=True)
class Credential:
    """What an exec plugin answered: a bearer token or a client certificate, until when."""

    token: str | None
    cert_data: bytes | None
    key_data: bytes | None
    expires_at: float | None  # epoch seconds; None: never


class ExecCredentials:
    """A user's exec credential plugin: runs it, caches the credential until it expires.

    Thread-safe: the CLI's client, kopf's thread and the asyncio client may share one.
    """

    def __init__(
        self,
        spec: dict[str, Any],
        *,
        base: Path,
        cluster: dict[str, Any] | None = None,
        clock: Any = time.time,
    ) -> None:
        self.api_version = str(spec.get("apiVersion") or "")
        if self.api_version not in _EXEC_VERSIONS:
            raise KubeConfigError(
                f"exec plugin: apiVersion {self.api_version!r} is not one of "
                + ", ".join(_EXEC_VERSIONS)
            )
        command = str(spec.get("command") or "")
        if not command:
            raise KubeConfigError("exec plugin: no command")
        if "/" in command and not Path(command).is_absolute():
            command = str(base / command)
        self.argv = [command, *(str(a) for a in spec.get("args") or [])]
        self.env = {str(e.get("name")): str(e.get("value")) for e in spec.get("env") or []}
        self.install_hint = str(spec.get("installHint") or "").strip()
        self.interactive = str(spec.get("interactiveMode") or "IfAvailable")
        self.cluster = cluster if spec.get("provideClusterInfo") else None
        #: the command runs on a terminal (the CLI sets it): the plugin may prompt there
        self.terminal = False
        self.runs = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: Credential | None = None

    def stale(self) -> bool:
        """Whether the next use must run the plugin (nothing cached, or expired)."""
        cred = self._cached
        if cred is None:
            return True
        return cred.expires_at is not None and self._clock() >= cred.expires_at - _EXPIRY_MARGIN_S

    def invalidate(self) -> None:
        """Forget the credential (the server refused it): the next use runs the plugin."""
        with self._lock:
            self._cached = None

    def current(self) -> Credential:
        with self._lock:
            if self.stale() or self._cached is None:
                self._cached = self._run()
            return self._cached

    def token(self) -> str | None:
        return self.current().token

    def headers(self) -> dict[str, str]:
        token = self.token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _interactive(self) -> bool:
        return self.terminal and self.interactive != "Never"

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": self._interactive()}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    def _run(self) -> Credential:
        interactive = self._interactive()
        if self.interactive == "Always" and not interactive:
            raise KubeConfigError(f"exec plugin {self.argv[0]}: needs an interactive terminal")
        if shutil.which(self.argv[0]) is None:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise KubeConfigError(f"exec plugin {self.argv[0]}: command not found{hint}")
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self._exec_info()}
        try:
            done = subprocess.run(  # the user's own kubeconfig names the command
                self.argv,
                env=env,
                stdout=subprocess.PIPE,
                stderr=None if interactive else subprocess.PIPE,  # its prompts reach the user
                stdin=None if interactive else subprocess.DEVNULL,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KubeConfigError(f"exec plugin {self.argv[0]}: {exc}") from None
        self.runs += 1
        if done.returncode != 0:
            lines = (done.stderr or b"").decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit status {done.returncode}"
            raise KubeConfigError(f"exec plugin {self.argv[0]} failed: {why}")
        return self._parse(done.stdout)

    def _parse(self, raw: bytes) -> Credential:
        where = f"exec plugin {self.argv[0]}"
        try:
            doc = json.loads(raw)
        except ValueError:
            raise KubeConfigError(f"{where}: output is not an ExecCredential (not JSON)") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise KubeConfigError(f"{where}: output is not an ExecCredential")
        if doc.get("apiVersion") != self.api_version:
            raise KubeConfigError(
                f"{where}: answered apiVersion {doc.get('apiVersion')!r}, "
                f"configured {self.api_version!r}"
            )
        status = doc.get("status") or {}
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise KubeConfigError(f"{where}: status has neither a token nor a client certificate")
        return Credential(
            token=token,
            cert_data=cert.encode() if cert else None,
            key_data=key.encode() if key else None,
            expires_at=_epoch(status.get("expirationTimestamp"), where),
        )


def _epoch(stamp: Any, where: str) -> float | None:
    if not stamp:
        return None
    parsed = parse_time(stamp)
    if parsed is None:
        raise KubeConfigError(f"{where}: expirationTimestamp {stamp!r} is not RFC 3339")
    return parsed.timestamp()


# ---------------------------------------------------------------------------- kubeconfig files


@dataclass(frozen=True)
class _Entry:
    value: dict[str, Any]
    base: Path  # directory of the file that holds it


@dataclass
class _Merged:
    files: list[Path]
    current_context: str = ""
    sections: dict[str, dict[str, _Entry]] = field(
        default_factory=lambda: {"clusters": {}, "users": {}, "contexts": {}}
    )


def kubeconfig_paths(explicit: str | Path | None = None) -> list[Path]:
    """The files kubectl would read, in merge order (empty: use the in-cluster account)."""
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        listed = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
        return [p for p in dict.fromkeys(listed) if p.exists()]
    default = Path("~/.kube/config").expanduser()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return []  # inside a pod the service account comes before ~/.kube/config
    return [default] if default.exists() else []


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(read_text_file(path))
    except FileInputError as exc:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        summary = yaml_error_summary(exc)
        raise KubeConfigError(f"kubeconfig {path} is not valid YAML: {summary}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path} is not a mapping")
    return doc


def _merge(paths: list[Path]) -> _Merged:
    merged = _Merged(files=paths)
    for path in paths:
        doc = _read(path)
        if not merged.current_context and doc.get("current-context"):
            merged.current_context = str(doc["current-context"])
        for section, entries in merged.sections.items():
            for item in doc.get(section) or []:
                if not isinstance(item, dict) or not item.get("name"):
                    continue
                value = item.get(section[:-1])
                name = str(item["name"])
                if name not in entries and isinstance(value, dict):
                    entries[name] = _Entry(value, path.parent)
    return merged


# ---------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Target:
    """One API server and one identity, resolved from kubeconfig files or the service account.

    `*_file` fields are paths; inline `*-data` stays in memory (`*_data`) and is never left on
    disk: a client certificate given inline is written to a private directory only while
    `ssl` loads it (it takes no bytes), then removed.
    """

    server: str
    namespace: str = "default"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    username: str | None = None
    password: str | None = None
    exec: ExecCredentials | None = None
    context: str = ""
    source: str = ""

    def bearer(self) -> str | None:
        """The bearer token to send now (an exec plugin's is renewed when it expires)."""
        return self.exec.token() if self.exec is not None else self.token


def _material(entry: dict[str, Any], key: str, base: Path) -> tuple[str | None, bytes | None]:
    """`<key>` as a path (relative to the file that holds it) or `<key>-data` as bytes."""
    data = entry.get(f"{key}-data")
    if data:
        return None, base64.b64decode(data)
    path = entry.get(key)
    if path:
        p = Path(str(path)).expanduser()
        return str(p if p.is_absolute() else base / p), None
    return None, None


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """The cluster as an exec plugin's `provideClusterInfo` receives it."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url"):
        if cluster.get(key) is not None:
            info[key] = cluster[key]
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    extension = _extension(cluster, "client.authentication.k8s.io/exec")
    if extension is not None:
        info["config"] = extension
    return info


def _extension(entry: dict[str, Any], name: str) -> Any:
    for ext in entry.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == name:
            return ext.get("extension")
    return None


def _user_fields(user: _Entry, cluster: dict[str, Any], where: str) -> dict[str, Any]:
    value, base = user.value, user.base
    if value.get("auth-provider"):
        name = (value["auth-provider"] or {}).get("name", "?")
        raise KubeConfigError(
            f"{where}: auth-provider {name!r} is not supported (kubectl dropped it too); "
            "use its exec credential plugin"
        )
    token = value.get("token")
    if not token and value.get("tokenFile"):
        token_path = Path(str(value["tokenFile"])).expanduser()
        token = read_text_file(token_path if token_path.is_absolute() else base / token_path)
    plugin = None
    if isinstance(value.get("exec"), dict):
        plugin = ExecCredentials(value["exec"], base=base, cluster=_cluster_info(cluster))
    return {
        "token": str(token).strip() if token else None,
        "username": value.get("username"),
        "password": value.get("password"),
        **_material_fields(value, base, cert="client-certificate", key="client-key"),
        "exec": plugin,
    }


def _material_fields(entry: dict[str, Any], base: Path, **keys: str) -> dict[str, Any]:
    """`<field>_file`/`<field>_data` of `Target` for each kubeconfig key named."""
    fields: dict[str, Any] = {}
    for field_name, key in keys.items():
        fields[f"{field_name}_file"], fields[f"{field_name}_data"] = _material(entry, key, base)
    return fields


def _named(merged: _Merged, section: str, name: str, where: str) -> _Entry:
    entry = merged.sections[section].get(name)
    if entry is None:
        raise KubeConfigError(f"{where}: no {section[:-1]} named {name!r}")
    return entry


def _from_files(paths: list[Path], context: str | None) -> Target:
    merged = _merge(paths)
    where = "kubeconfig " + os.pathsep.join(str(p) for p in paths)
    name = context or merged.current_context
    if not name:
        raise KubeConfigError(f"{where}: no current-context (give --context)")
    ctx = _named(merged, "contexts", name, where).value
    cluster_entry = _named(merged, "clusters", str(ctx.get("cluster") or ""), where)
    cluster = cluster_entry.value
    if not cluster.get("server"):
        raise KubeConfigError(f"{where}: cluster {ctx.get('cluster')!r} has no server")
    user = _named(merged, "users", str(ctx["user"]), where) if ctx.get("user") else None
    fields = _user_fields(user, cluster, where) if user is not None else {}
    return Target(
        server=str(cluster["server"]).rstrip("/"),
        namespace=str(ctx.get("namespace") or "default"),
        **_material_fields(cluster, cluster_entry.base, ca="certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        context=name,
        source=where,
        **fields,
    )


def _absolute(entry: dict[str, Any], keys: tuple[str, ...], base: Path) -> dict[str, Any]:
    out = dict(entry)
    for key in keys:
        value = out.get(key)
        if value and not Path(str(value)).expanduser().is_absolute():
            out[key] = str(base / str(value))
    return out


def minified(kubeconfig: str | Path | None = None, *, context: str | None = None) -> dict[str, Any]:
    """One context of the kubeconfig(s), as `kubectl config view --minify` gives it: the
    context, its cluster and its user, paths made absolute, that context current. A service
    given `--context` reads this instead, so it needs no context of its own."""
    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        raise KubeConfigError("--context: no kubeconfig file (--kubeconfig, $KUBECONFIG)")
    merged = _merge(paths)
    where = "kubeconfig " + os.pathsep.join(str(p) for p in paths)
    name = context or merged.current_context
    if not name:
        raise KubeConfigError(f"{where}: no current-context (give --context)")
    ctx = _named(merged, "contexts", name, where).value
    cluster = _named(merged, "clusters", str(ctx.get("cluster") or ""), where)
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "contexts": [{"name": name, "context": ctx}],
        "clusters": [
            {
                "name": ctx.get("cluster"),
                "cluster": _absolute(cluster.value, ("certificate-authority",), cluster.base),
            }
        ],
        "users": [],
    }
    if ctx.get("user"):
        user = _named(merged, "users", str(ctx["user"]), where)
        value = _absolute(user.value, ("client-certificate", "client-key", "tokenFile"), user.base)
        plugin = value.get("exec")
        if isinstance(plugin, dict) and "/" in str(plugin.get("command") or ""):
            value["exec"] = _absolute(plugin, ("command",), user.base)
        doc["users"].append({"name": ctx["user"], "user": value})
    return doc


def _in_cluster() -> Target:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeConfigError(
            "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not inside a cluster"
        )
    token = (_SA_DIR / "token").read_text().strip()
    namespace_file = _SA_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    if ":" in host:
        host = f"[{host}]"
    return Target(
        server=f"https://{host}:{port}",
        namespace=namespace,
        ca_file=str(_SA_DIR / "ca.crt"),
        token=token,
        source="in-cluster service account",
    )


def resolve(kubeconfig: str | Path | None = None, *, context: str | None = None) -> Target:
    """The API server and identity kubectl would use (see the module docstring for the rules)."""
    paths = kubeconfig_paths(kubeconfig)
    if paths:
        return _from_files(paths, context)
    if context:
        raise KubeConfigError(f"--context {context}: no kubeconfig file to find it in")
    return _in_cluster()


# ---------------------------------------------------------------------------- asyncio access


@dataclass(frozen=True)
class ClusterAccess:
    """Everything needed to open HTTP connections to one API server.

    `headers` are sent on every request; `credentials` (an exec plugin) add a bearer token that
    is renewed when it expires.
    """

    server: str
    ssl_context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)
    namespace: str = "default"
    credentials: ExecCredentials | None = None
    #: the name the server's certificate must hold, when not the URL's host (`tls-server-name`)
    tls_server_name: str | None = None


def _ssl_context(target: Target) -> ssl.SSLContext:
    cadata = target.ca_data.decode() if target.ca_data else None
    ctx = ssl.create_default_context(cafile=target.ca_file, cadata=cadata)
    if target.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert, key = client_certificate(target)
    if isinstance(cert, bytes):
        _load_chain_data(ctx, cert, key if isinstance(key, bytes) else None)
    elif cert:
        ctx.load_cert_chain(cert, key if isinstance(key, str) else None)
    return ctx


def client_certificate(target: Target) -> tuple[str | bytes | None, str | bytes | None]:
    """The client certificate and key: paths, inline bytes, or an exec plugin's bytes."""
    if target.exec is not None and not target.exec.current().token:
        cred = target.exec.current()
        return cred.cert_data or b"", cred.key_data or b""
    return target.cert_data or target.cert_file, target.key_data or target.key_file


def _load_chain_data(ctx: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """Load an inline certificate chain; `ssl` reads files only, so they live only meanwhile."""
    with tempfile.TemporaryDirectory(prefix="tephra-kube-") as tmp:  # mode 0700
        cert_path, key_path = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        cert_path.write_bytes(cert)
        if key is not None:
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
        ctx.load_cert_chain(str(cert_path), str(key_path) if key is not None else None)


def access_for(target: Target) -> ClusterAccess:
    """The asyncio client's access for a resolved target."""
    headers: dict[str, str] = {}
    if target.token:
        headers["Authorization"] = f"Bearer {target.token}"
    elif target.username is not None and target.password is not None:
        basic = base64.b64encode(f"{target.username}:{target.password}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    tls = _ssl_context(target) if target.server.startswith("https") else None
    return ClusterAccess(
        server=target.server,
        ssl_context=tls,
        headers=headers,
        namespace=target.namespace,
        credentials=target.exec,
        tls_server_name=target.tls_server_name if tls is not None else None,
    )


def load_access(
    kubeconfig: str | Path | None = None, *, context: str | None = None
) -> ClusterAccess:
    """Access by kubectl's rules: `kubeconfig`, else `$KUBECONFIG`, `~/.kube/config`, in-cluster."""
    return access_for(resolve(kubeconfig, context=context))
