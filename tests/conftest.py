"""Suite-wide settings.

Hypothesis profiles: `dev` (the default) draws new examples on every run, so property tests keep
exploring on developers' machines; `ci` (selected by `.ci/run` through HYPOTHESIS_PROFILE)
derives examples from each test's name, so the gate that decides whether work lands runs the
same examples every time and a red run is reproducible. A counter-example found by a dev run is
stored in `.hypothesis/` and replayed there until fixed.
"""

from __future__ import annotations

import os

from hypothesis import settings

# No per-example deadline: hypothesis's default (200 ms) is a wall-clock bound, and one example
# of a property test ran past it on two loaded cores; speed is measured in benchmarks/.
settings.register_profile("dev", print_blob=True, deadline=None)
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The real control plane's session fixtures, shared by tests/real and tests/sandbox's `real` runs.
from tests.realplane import kubelets, real  # noqa: E402, F401
