"""A real Kubernetes control plane on 127.0.0.1: the oracle the sandbox is checked against.

Starts etcd, kube-apiserver and (optionally) kube-controller-manager built from their published
Go modules by `scripts/build-kube.sh`, with a PKI generated here: a CA, the apiserver's serving
certificate (SAN 127.0.0.1 and localhost), an admin client certificate in `system:masters`,
and a service-account signing key. Authorization is RBAC, admission runs the apiserver's default
plugins. `ControlPlane.kubeconfig` is an admin kubeconfig any client can use.

No Go is needed to import this module; only starting a control plane needs the binaries.
"""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["ControlPlane", "ControlPlaneError", "control_plane"]

SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    """A component failed to start; the message names it and quotes its log's tail."""


@dataclass
class ControlPlane:
    """A running control plane: where it listens and the files a client needs."""

    workdir: Path
    server: str
    kubeconfig: Path
    pki: dict[str, Path]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: how each component was started (binary, arguments): what `restart` runs again
    commands: dict[str, list[str]] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the apiserver and presents the admin certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki["ca"]))
        ctx.load_cert_chain(str(self.pki["admin"]), str(self.pki["admin-key"]))
        return ctx

    def kill(self, name: str) -> None:
        """SIGKILL component `name` and reap it: a crash, no clean shutdown."""
        proc = self.processes[name]
        proc.kill()
        proc.wait()

    def restart(self, name: str, timeout: float = 120.0) -> None:
        """Start component `name` again as it was started (same ports, same etcd data), after
        `kill`; for the apiserver, wait until it is ready."""
        if self.processes[name].poll() is None:
            self.kill(name)
        _spawn(self, name, self.commands[name], mode="ab")
        if name == "kube-apiserver":
            _wait_ready(self, name, f"{self.server}/readyz", timeout)

    def stop(self) -> None:
        """Stop the components in reverse start order (clients before the apiserver)."""
        for name in reversed(list(self.processes)):
            proc = self.processes[name]
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def control_plane(
    bin_dir: Path,
    workdir: Path,
    *,
    controller_manager: bool = True,
    timeout: float = 120.0,
    port: int = 0,
) -> Iterator[ControlPlane]:
    """Start a control plane in `workdir` (its etcd data, PKI and logs) and stop it on exit;
    the apiserver listens on 127.0.0.1:`port` (0: a free port)."""
    pki = _write_pki(workdir / "pki")
    etcd_port, peer_port, free = _free_ports(3)
    api_port = port or free
    server = f"https://127.0.0.1:{api_port}"
    plane = ControlPlane(workdir, server, workdir / "admin.kubeconfig", pki)
    _write_kubeconfig(plane.kubeconfig, server, pki)
    try:
        _start(plane, "etcd", bin_dir, _etcd_args(workdir, etcd_port, peer_port))
        _start(plane, "kube-apiserver", bin_dir, _apiserver_args(pki, etcd_port, api_port))
        _wait_ready(plane, "kube-apiserver", f"{server}/readyz", timeout)
        if controller_manager:
            _start(plane, "kube-controller-manager", bin_dir, _kcm_args(plane.kubeconfig, pki))
            # Its serviceaccount controller creating `default` proves it runs and can write.
            sa = f"{server}/api/v1/namespaces/default/serviceaccounts/default"
            _wait_ready(plane, "kube-controller-manager", sa, timeout)
        yield plane
    finally:
        plane.stop()


def _etcd_args(workdir: Path, port: int, peer: int) -> list[str]:
    peer_url = f"http://127.0.0.1:{peer}"
    return [
        f"--data-dir={workdir / 'etcd'}",
        "--name=tephra",
        f"--listen-client-urls=http://127.0.0.1:{port}",
        f"--advertise-client-urls=http://127.0.0.1:{port}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=tephra={peer_url}",
        "--unsafe-no-fsync",  # throwaway test data: fsync would only add noise
        "--log-level=warn",
    ]


def _apiserver_args(pki: dict[str, Path], etcd_port: int, port: int) -> list[str]:
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={pki['ca'].parent}",
        f"--tls-cert-file={pki['server']}",
        f"--tls-private-key-file={pki['server-key']}",
        f"--client-ca-file={pki['ca']}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={pki['sa-pub']}",
        f"--service-account-signing-key-file={pki['sa-key']}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
    ]


def _kcm_args(kubeconfig: Path, pki: dict[str, Path]) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={_free_ports(1)[0]}",
        f"--root-ca-file={pki['ca']}",
        f"--service-account-private-key-file={pki['sa-key']}",
        "--controllers="
        + ",".join(
            f"{c}-controller"
            for c in (
                "namespace",
                "garbage-collector",
                "serviceaccount",
                "serviceaccount-token",
                "root-ca-certificate-publisher",
                "job",
                "replicaset",
                "statefulset",
                "deployment",
                "pod-garbage-collector",
                "node-lifecycle",  # lifts the not-ready taint of Ready nodes
                "clusterrole-aggregation",
            )
        ),
        "--leader-elect=false",
        "--kube-api-qps=1000",
        "--kube-api-burst=2000",
    ]


def _start(plane: ControlPlane, name: str, bin_dir: Path, args: list[str]) -> None:
    binary = bin_dir / name
    if not binary.is_file():
        raise ControlPlaneError(f"{binary} is missing: build it with scripts/build-kube.sh")
    _spawn(plane, name, [str(binary), *args], mode="wb")


def _spawn(plane: ControlPlane, name: str, command: list[str], *, mode: str) -> None:
    plane.commands[name] = command
    with (plane.workdir / f"{name}.log").open(mode) as log:
        plane.processes[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=plane.workdir
        )


def _wait_ready(plane: ControlPlane, name: str, url: str, timeout: float) -> None:
    ctx = plane.ssl_context()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc_name, proc in plane.processes.items():
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{proc_name} exited {proc.returncode}: {_tail(plane, proc_name)}"
                )
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise ControlPlaneError(f"{name} not ready within {timeout:.0f} s: {_tail(plane, name)}")


def _tail(plane: ControlPlane, name: str, lines: int = 5) -> str:
    text = (plane.workdir / f"{name}.log").read_text(errors="replace").splitlines()
    return " | ".join(text[-lines:])


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------------------------- PKI
def _write_pki(directory: Path) -> dict[str, Path]:
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from batch.kube.certs import issue, new_key, write_pem

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    ca = issue("tephra-ca")
    server = issue(
        "kube-apiserver",
        issuer=ca,
        hosts=["127.0.0.1", "10.0.0.1", "localhost", "kubernetes.default.svc"],
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    )
    admin = issue(
        "tephra-admin",
        organization="system:masters",
        issuer=ca,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    sa_key = new_key()
    return {
        "ca": write_pem(directory / "ca.crt", ca[1]),
        "server": write_pem(directory / "apiserver.crt", server[1]),
        "server-key": write_pem(directory / "apiserver.key", server[0]),
        "admin": write_pem(directory / "admin.crt", admin[1]),
        "admin-key": write_pem(directory / "admin.key", admin[0]),
        "sa-key": write_pem(directory / "sa.key", sa_key),
        "sa-pub": write_pem(directory / "sa.pub", sa_key.public_key()),
    }


def _write_kubeconfig(path: Path, server: str, pki: dict[str, Path]) -> None:
    def data(name: str) -> str:
        return base64.b64encode(pki[name].read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "real",
                "cluster": {"server": server, "certificate-authority-data": data("ca")},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": data("admin"),
                    "client-key-data": data("admin-key"),
                },
            }
        ],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": "admin"}}],
        "current-context": "real",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
