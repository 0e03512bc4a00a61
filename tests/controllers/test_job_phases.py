"""Job phases have one home (`batch.api.constants.JOB_PHASES`): the controller's names and the
API model's Literal are that tuple, in order (issue 32: they were defined three times)."""

from __future__ import annotations

from typing import get_args

from batch.api.constants import JOB_PHASES
from batch.api.job import JobPhase
from batch.controllers import constants as c


def test_controller_phase_names_are_the_api_phases() -> None:
    names = [
        "PENDING", "ABORTING", "ABORTED", "RUNNING", "RESTARTING",
        "COMPLETING", "COMPLETED", "TERMINATING", "TERMINATED", "FAILED",
    ]  # fmt: skip
    assert [getattr(c, n) for n in names] == list(JOB_PHASES)
    assert all(getattr(c, n) == n.capitalize() for n in names)


def test_api_model_literal_is_the_same_tuple() -> None:
    assert get_args(JobPhase) == JOB_PHASES
