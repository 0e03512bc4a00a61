"""YAML reading and writing with Kubernetes' conventions.

Kubernetes turns YAML into JSON before anything reads it, so timestamps stay strings (PyYAML
would make `creationTimestamp: 2024-01-01T00:00:00Z` a datetime). Multi-document streams are
read lazily so a syntax error late in a file still lets earlier documents be used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

__all__ = ["KubeYamlLoader", "dump_yaml", "iter_documents", "yaml_error_summary"]


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


def yaml_error_summary(exc: yaml.YAMLError) -> str:
    """One line describing a YAML error and where it is."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "syntax error"
        return f"{what}{where}"
    return " ".join(str(exc).split())
