"""Fixtures for the chart checks: the pinned helm binary, fetched once per test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.charts.helmtools import fetch_helm


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return fetch_helm()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
