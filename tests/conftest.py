"""Settings for the whole test suite.

Every simulation a test runs (the simulator's own tests, the multi-team plan, the
control plane's queue ETAs) is checked for conservation of GPU-seconds
(`gpufleet.sim.conservation`): with GPUFLEET_DEBUG_CHECKS on, a run whose metrics do
not add up raises instead of reporting 0 % or 300 %. It is set in the environment, so
worker processes (the plan's pool, CLI subprocesses) check their runs too; set it to 0
to time the suite without the checks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gpufleet.sim.conservation import DEBUG_ENV


@pytest.fixture(autouse=True, scope="session")
def _debug_checks() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if DEBUG_ENV not in os.environ:
            mp.setenv(DEBUG_ENV, "1")
        yield
