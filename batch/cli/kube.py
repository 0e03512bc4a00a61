"""What every `tephra` command that talks to the cluster shares: kubectl's connection flags
(`--kubeconfig`, `--context`, `-n`, `-A`), the API access (`Kube`) and one-line failures.

`Kube` speaks to the API server through `batch.kube.rest` (the standard library's HTTP client
over the kubeconfig `batch.kube.config` resolves, as kubectl would), never through the
official `kubernetes` client: importing that client's generated modules cost every command
about a second of CPU before its first request (docs/cli.md, benchmarks/cli_startup.py).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import click

from batch.api.errors import UserError, one_line
from batch.cli.output import Columns
from batch.kube.resource import RESOURCES, ApiError, Resource

__all__ = [
    "COMMAND",
    "QUEUE",
    "VCJOB",
    "Kube",
    "all_namespaces_option",
    "fail",
    "kube_options",
    "name_argument",
    "namespace_option",
    "table",
]

F = TypeVar("F", bound=Callable[..., Any])

VCJOB = Resource("batch.volcano.sh/v1alpha1", "jobs", "Job")
COMMAND = Resource("bus.volcano.sh/v1alpha1", "commands", "Command")
QUEUE = RESOURCES["Queue"]

_CONTEXT_KEY = "tephra.kube_context"


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """vcctl-style left-aligned columns."""
    return "\n".join(Columns(headers, rows).lines)


def _remember_context(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    ctx.meta[_CONTEXT_KEY] = value


namespace_option = click.option(
    "-n",
    "--namespace",
    default=None,
    help="Namespace (default: the kubeconfig context's, else default).",
)

all_namespaces_option = click.option(
    "-A", "--all-namespaces", is_flag=True, help="Every namespace (as kubectl's -A)."
)


def kube_options(fn: F) -> F:
    """--kubeconfig and --context for every command that talks to the cluster (kubectl's)."""
    fn = click.option(
        "--context",
        default=None,
        expose_value=False,
        callback=_remember_context,
        help="The kubeconfig context to use (default: its current-context).",
    )(fn)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig file (default: $KUBECONFIG, files separated by ':', merged as kubectl "
        "does; then ~/.kube/config).",
    )(fn)


def _complete_names(res: Resource) -> Callable[..., list[str]]:
    """Shell completion of NAME: the names the cluster has (none when it cannot be asked)."""

    def complete(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
        from batch.kube.config import access_for, resolve
        from batch.kube.rest import RestClient

        try:
            target = resolve(ctx.params.get("kubeconfig"), context=ctx.meta.get(_CONTEXT_KEY))
            namespace = ctx.params.get("namespace") or target.namespace
            rest = RestClient(access_for(target), timeout=5.0)
            listing = rest.list(res, namespace=namespace if res.namespaced else None)
        except Exception:
            return []
        names = (str((o.get("metadata") or {}).get("name") or "") for o in listing["items"])
        return sorted(n for n in names if n.startswith(incomplete))

    return complete


def pick_name(kind: str, name: str | None, flag: str | None, *, required: bool = True) -> str:
    """NAME from the argument or vcctl's `--name` flag (both: they must agree)."""
    if name and flag and name != flag:
        raise click.UsageError(f"two {kind} names: {name} and --name {flag}")
    chosen = name or flag or ""
    if not chosen and required:
        raise click.UsageError(f"give the {kind}'s NAME (as an argument, or vcctl's -N/--name)")
    return chosen


def name_argument(
    res: Resource,
    *,
    required: bool = True,
    vcctl_n: bool = False,
) -> Callable[[F], F]:
    """A positional NAME, as kubectl takes it, that vcctl's `-N/--name NAME` still gives; the
    command receives `name` (when `required`, a usage error if neither is given).

    `vcctl_n` (queues, which have no namespace): `-n` is a namespace, as everywhere, and ignored;
    but vcctl's `queue ... -n NAME` without a NAME argument still names the queue, with a
    deprecation warning on stderr."""
    kind = "job" if res is VCJOB else res.kind.lower()

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, name: str | None, name_flag: str | None, **kwargs: Any) -> Any:
            namespace = kwargs.pop("namespace", None) if vcctl_n else None
            if namespace and not (name or name_flag):
                name = namespace
                command = click.get_current_context().command_path
                click.echo(
                    f"warning: `-n {namespace}` as the {kind}'s name is vcctl's spelling and is "
                    f"deprecated: write `{command} {namespace}` (-n is a namespace everywhere)",
                    err=True,
                )
            chosen = pick_name(kind, name, name_flag, required=required)
            return fn(*args, name=chosen, **kwargs)

        flag = click.option(
            "-N", "--name", "name_flag", default=None, help=f"The {kind}'s name (vcctl's spelling)."
        )
        argument = click.argument(
            "name", required=False, metavar="NAME", shell_complete=_complete_names(res)
        )
        decorated: Any = argument(flag(wrapper))
        if vcctl_n:
            decorated = click.option(
                "-n",
                "--namespace",
                default=None,
                help=f"Ignored: {res.plural} have no namespace (vcctl's `-n NAME`, deprecated, "
                "names the queue when NAME is not given).",
            )(decorated)
        return cast(F, decorated)

    return decorate


def _short(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None)
    text = str(reason or exc)
    return text.split(": ", 1)[-1][:200]


def _api_message(exc: ApiError) -> str:
    message = exc.body.get("message") or exc.reason or "refused"
    return f"{message} (HTTP {exc.status})"


class Kube:
    """The cluster, as the kubeconfig (and `--context`) names it; every failure is one line
    on stderr and exit status 1."""

    def __init__(self, kubeconfig: Path | None) -> None:
        from batch.kube.config import KubeConfigError, access_for, resolve
        from batch.kube.rest import RestClient

        context = click.get_current_context(silent=True)
        name = context.meta.get(_CONTEXT_KEY) if context is not None else None
        try:
            target = resolve(kubeconfig, context=name)
            if target.exec is not None:  # a sign-in plugin may prompt on the user's terminal
                target.exec.terminal = sys.stdin.isatty()
            access = access_for(target)
        except (KubeConfigError, OSError, ValueError) as exc:  # config errors are user errors
            fail(one_line(exc))
        #: the context's namespace, the default of `-n` (as kubectl's)
        self.namespace = target.namespace
        self.host = target.server
        self.rest = RestClient(access)

    def _failed(self, what: str, exc: Exception) -> NoReturn:
        from batch.kube.config import KubeConfigError

        if isinstance(exc, ApiError):
            fail(f"{what}: {_api_message(exc)}")
        if isinstance(exc, KubeConfigError):  # the exec plugin failed when asked again
            fail(one_line(exc))
        fail(f"{what}: cannot reach the API server at {self.host} ({_short(exc)})")

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """`fn()`'s answer; a refusal or an unreachable server ends the command."""
        try:
            return fn()
        except (ApiError, OSError, UserError) as exc:
            self._failed(what, exc)

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object, None when it does not exist."""
        where = f"{namespace}/{name}" if res.namespaced and namespace else name
        try:
            return self.rest.get(res, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            self._failed(f"get {res.kind.lower()} {where}", exc)
        except (OSError, UserError) as exc:
            self._failed(f"get {res.kind.lower()} {where}", exc)

    def items(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        missing_ok: bool = False,
        **params: str,
    ) -> dict[str, Any]:
        """A whole listing (`namespace` None: every namespace, or a cluster-scoped kind);
        `missing_ok`: an empty one when the server does not serve the kind (404)."""
        try:
            return self.rest.list(res, namespace=namespace, **params)
        except ApiError as exc:
            if missing_ok and exc.status == 404:
                return {"items": []}
            if exc.status == 404:  # the path, not an object, is missing
                fail(
                    f"list {res.plural}: the API server does not serve {res.api_version} "
                    f"{res.plural}; are Tephra's CRDs installed (`tephra crds`, the Helm chart)?"
                )
            self._failed(f"list {res.plural}", exc)
        except (OSError, UserError) as exc:
            self._failed(f"list {res.plural}", exc)

    def job(self, name: str, namespace: str) -> dict[str, Any]:
        found = self.get(VCJOB, name, namespace)
        if found is None:
            fail(f"job {namespace}/{name} not found")
        return found

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        version: str,
        timeout: int | None,
        **params: str,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch events after `version` until `timeout` seconds pass (None: until interrupted);
        a stream the server ends early is reopened from the last version seen. `params`: the
        watch's (`labelSelector`, `accept`)."""
        while True:
            stream = self.rest.watch(
                res,
                namespace=namespace,
                resource_version=version,
                timeout_seconds=timeout,
                **params,
            )
            try:
                for kind, obj in stream:
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    yield kind, obj
            except (ApiError, OSError, UserError) as exc:
                self._failed(f"watch {res.plural}", exc)
            if timeout is not None:
                return
