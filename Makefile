# Tephra developer entry points. Everything bootstraps .venv from requirements.lock on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck layers pytest coverage services kube oracles cluster demo crds bench clean-venv

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	@touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check batch integrations tests benchmarks migrations
	$(BIN)/ruff format --check batch integrations tests benchmarks migrations

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# Services the suite needs that a new machine lacks: PostgreSQL on 127.0.0.1:5432 (installed and
# started when missing; idempotent), unzip for the Helm fetch and chromium for the browser tests
# (tests/sim/test_report_browser.py, tests/dashboard).
services:
	scripts/ensure-postgres.sh
	scripts/ensure-packages.sh unzip=unzip flock=util-linux chromium=chromium

# The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) of the
# `real` test tier, built from the Go modules in tools/ once and cached in ~/.cache/tephra.
kube:
	scripts/build-kube.sh >/dev/null

# The oracles of the differential and operator tiers (Volcano v1.10.0, Kubeflow training-operator
# v1.8.1, KubeRay ray-operator v1.5.0) with their CRDs, from the Go modules in tools/, cached the
# same way; one at a time, so the machine holds one Go build at once.
ORACLES := volcano training-operator kuberay
oracles:
	for o in $(ORACLES); do scripts/build-oracle.sh $$o >/dev/null || exit 1; done

cluster: $(STAMP) kube
	$(BIN)/tephra cluster up --kubeconfig $(or $(KUBECONFIG_OUT),real.kubeconfig) --bin-dir "$$(scripts/build-kube.sh)"

# The suite as `make test` runs it, and with branch coverage (`make coverage`, not part of
# `make test`: measuring every line doubles the in-process tests' time, and `make test` keeps
# within 15 minutes on 2 cores).
PYTEST_ENV = TEPHRA_KUBE_BIN="$$(scripts/build-kube.sh)" \
	TEPHRA_VOLCANO_BIN="$$(scripts/build-oracle.sh volcano)" \
	TEPHRA_TRAINING_OPERATOR_BIN="$$(scripts/build-oracle.sh training-operator)" \
	TEPHRA_KUBERAY_BIN="$$(scripts/build-oracle.sh kuberay)"

pytest: $(STAMP) services kube oracles
	$(PYTEST_ENV) $(BIN)/pytest -n 2 --dist loadgroup --durations=25 $(PYTEST_ARGS)

coverage: $(STAMP) services kube oracles
	$(PYTEST_ENV) $(BIN)/pytest -n 2 --dist loadgroup --cov --cov-report=term:skip-covered $(PYTEST_ARGS)

test: lint typecheck layers pytest

crds: $(STAMP)
	$(BIN)/tephra crds --out crds/
	scripts/sync-chart-crds.sh

# `make demo DEMO_ARGS=--keep` leaves the sandbox and its dashboard up until Ctrl-C.
demo: $(STAMP)
	$(BIN)/tephra demo $(DEMO_ARGS)

clean-venv:
	rm -rf $(VENV)
