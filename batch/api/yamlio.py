"""YAML reading and writing with Kubernetes' conventions.

Kubernetes turns YAML into JSON before anything reads it, so timestamps stay strings (PyYAML
would make `creationTimestamp: 2024-01-01T00:00:00Z` a datetime). Multi-document streams are
read lazily so a syntax error late in a file still lets earlier documents be used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from batch.api.errors import UserError, one_line, yaml_error_summary

__all__ = [
    "FileInputError",
    "KubeYamlLoader",
    "dump_yaml",
    "iter_documents",
    "load_yaml_file",
    "manifest_paths",
    "read_text_file",
    "yaml_error_summary",
]

_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class FileInputError(UserError):
    """A file given by the user cannot be read or parsed: `PATH: what: reason`."""

    def __init__(self, path: str | Path, reason: str, *, what: str = "cannot read file") -> None:
        super().__init__(f"{path}: {what}: {reason}")
        self.path = str(path)
        self.reason = reason


class KubeYamlLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver (timestamps stay strings, as in Kubernetes)."""


KubeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def iter_documents(text: str) -> Iterator[Any]:
    """Each document of a YAML stream (raises yaml.YAMLError where the stream breaks)."""
    yield from yaml.load_all(text, Loader=KubeYamlLoader)


def dump_yaml(obj: Any) -> str:
    """Block-style YAML with keys in their given order."""
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of `path`; FileInputError naming the file when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
        raise FileInputError(path, reason) from None


def load_yaml_file(path: str | Path) -> list[Any]:
    """The documents of a YAML file (FileInputError naming the file). An empty document is
    None, so that positions count as in the file."""
    text = read_text_file(path)
    try:
        return list(iter_documents(text))
    except yaml.YAMLError as exc:
        raise FileInputError(path, yaml_error_summary(exc), what="invalid YAML") from None


def manifest_paths(paths: Iterable[str]) -> list[str]:
    """Files as given; a directory stands for its *.yaml, *.yml and *.json files, recursively
    (as for `kubectl apply -f DIR -R`). A directory without any stays, to be reported."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if p != "-" and path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix in _MANIFEST_SUFFIXES)
            out.extend(found or [p])
        else:
            out.append(p)
    return out
