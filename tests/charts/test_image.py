"""Static checks of the container image definition (it cannot be built on these machines).

What matters is checked against the chart it runs under: locked hash-verified dependencies, a
multi-stage build, the same non-root uid/gid as the chart's security context, the `tephra`
entry point, and a build context that carries no virtualenv, git history or caches.
"""

from __future__ import annotations

import re

import yaml

from tests.charts.helmtools import CHART_DIR, REPO_ROOT

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def _all(keyword: str) -> list[str]:
    return [i for i in INSTRUCTIONS if i.split(maxsplit=1)[0].upper() == keyword]


def test_multi_stage_slim_python_311() -> None:
    froms = _all("FROM")
    assert len(froms) >= 2
    (arg,) = [a for a in _all("ARG") if a.startswith("ARG PYTHON_IMAGE=")]
    # Pinned by digest, the tag beside it for the reader (a tag moves, a digest does not).
    assert re.fullmatch(r"ARG PYTHON_IMAGE=python:3\.11-slim(-\w+)?@sha256:[0-9a-f]{64}", arg)
    assert froms[-1].startswith("FROM ${PYTHON_IMAGE} AS runtime")


def test_dependencies_are_locked_and_hash_checked() -> None:
    runs = " ".join(_all("RUN"))
    assert "--require-hashes" in runs
    assert "-r requirements.lock" in runs
    # Everything installed later comes from the verified files only.
    for install in re.findall(r"pip install [^&]*", runs):
        assert "--no-index" in install, install
    assert "COPY requirements.lock" in " ".join(_all("COPY"))


def test_runtime_stage_is_non_root_with_tephra_entrypoint() -> None:
    runtime = DOCKERFILE.split("AS runtime", 1)[1]
    users = re.findall(r"^USER\s+(\S+)", runtime, re.M)
    assert users, "the runtime stage must switch to a non-root user"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert int(uid) == values["podSecurityContext"]["runAsUser"]
    assert int(gid) == values["podSecurityContext"]["runAsGroup"]
    assert re.search(r'^ENTRYPOINT \["tephra"\]$', runtime, re.M)
    assert "COPY --from=build /opt/venv /opt/venv" in runtime
    assert "requirements.lock" not in runtime  # no dev tools in the runtime stage


def test_build_context_is_minimal() -> None:
    lines = [
        ln.strip()
        for ln in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert allowed == {
        "requirements.lock",
        "pyproject.toml",
        "README.md",
        "batch",
        "integrations",
        "migrations",
    }
    copied = set()
    for copy in _all("COPY"):
        if "--from=" in copy:
            continue
        copied.update(p.rstrip("/").removeprefix("./") for p in copy.split()[1:-1])
    assert copied <= allowed, copied - allowed
    # pyproject's readme and packages are in the context.
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'readme = "README.md"' in pyproject


def test_ledger_migrations_ship_in_the_image() -> None:
    runtime = DOCKERFILE.split("AS runtime", 1)[1]
    (dest,) = re.findall(r"^COPY migrations (\S+)$", runtime, re.M)
    assert f"TEPHRA_MIGRATIONS_DIR={dest}" in re.sub(r"\\\n\s*", " ", runtime)
    assert (REPO_ROOT / "migrations" / "env.py").is_file()
