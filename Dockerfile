# syntax=docker/dockerfile:1
# Tephra container image: one image for the scheduler, the controller and the admission webhook
# (console script `tephra`; the chart passes the component as the first argument).
#
#   docker build -t tephra:0.1.0 .
#
# Stage 1 downloads every locked distribution with its sha256 checked (--require-hashes), builds
# the project wheel, and installs the project with only its runtime dependencies, offline, from
# those verified files. Stage 2 copies that virtualenv into a clean slim image that runs as an
# unprivileged user; no compiler, pip cache or development tool (pytest, ruff, mypy) ships.

# The base is pinned by digest (the tag beside it says what it is): the multi-arch index of
# python:3.11-slim-bookworm built 2026-08-25 (Python 3.11.16), as Docker's official-images record
# lists it (github.com/docker-library/repo-info, repos/python/remote/3.11-slim-bookworm.md at
# commit 33a22f41ac7b). To move to a newer build, replace the digest with the one
# `docker buildx imagetools inspect python:3.11-slim-bookworm` prints.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src

# Locked, hash-verified distributions (binary wheels only, so nothing is built from an sdist).
COPY requirements.lock ./
RUN pip download --require-hashes --no-deps --only-binary=:all: -r requirements.lock -d /wheels

# The project wheel, built with the locked setuptools and without network access.
RUN python -m venv /opt/buildenv \
    && /opt/buildenv/bin/pip install --no-index --find-links /wheels setuptools wheel
COPY pyproject.toml README.md ./
COPY batch ./batch
COPY integrations ./integrations
RUN /opt/buildenv/bin/pip wheel --no-deps --no-build-isolation --no-index -w /wheels .

# Runtime virtualenv: the project plus the runtime closure of its dependencies, at the locked
# versions (the only versions present in /wheels).
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-index --find-links /wheels tephra \
    && /opt/venv/bin/pip uninstall --yes pip \
    && /opt/venv/bin/tephra --version


FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="tephra" \
      org.opencontainers.image.description="Volcano-compatible batch scheduler for AI workloads on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"

# Same uid/gid as the chart's podSecurityContext (runAsUser/runAsGroup 10001).
RUN groupadd --system --gid 10001 tephra \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin tephra

COPY --from=build /opt/venv /opt/venv
# The ledger's Alembic migrations are not part of the wheel (batch.ledger.migrate finds them
# through TEPHRA_MIGRATIONS_DIR).
COPY migrations /opt/tephra/migrations
ENV PATH=/opt/venv/bin:$PATH \
    TEPHRA_MIGRATIONS_DIR=/opt/tephra/migrations \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Byte code was compiled at install time; the root filesystem can be mounted read-only.
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 8081 8443 11251
ENTRYPOINT ["tephra"]
CMD ["--help"]
