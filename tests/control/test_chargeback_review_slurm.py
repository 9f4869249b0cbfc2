"""The ledger against sacct: an attempt Slurm never ran is billed nothing, and that agrees.

Review finding: the reconciler bills nothing for an attempt the engine never ran (a node
that failed to boot, or lost, before the job started: a `lost` end with no start), so the
ledger has no row for it; `admin slurm reconcile` then reported "Slurm ran it; the ledger
has no row" for a job Slurm itself says never ran, and exited 1.
"""

from __future__ import annotations

import pytest

from gpufleet.control.executors.base import RunKey
from gpufleet.control.executors.slurm_text import SlurmJob
from gpufleet.control.slurm_usage import compare

KEY = RunKey(3, 1)
NAME = "gpufleet-job-3-1"


@pytest.mark.parametrize("state", ["BOOT_FAIL", "NODE_FAIL", "CANCELLED"])
def test_a_job_slurm_never_ran_and_the_ledger_never_billed_agree(state: str) -> None:
    never_ran = SlurmJob("9", NAME, state, "", None, 1005.0, (), None, 8, 0.0)
    assert not never_ran.ran
    (check,) = compare([], {KEY: never_ran})
    assert check.problem == ""
    assert check.slurm_gpu_s == 0.0
    assert check.slurm_state == state


def test_a_job_slurm_ran_without_a_ledger_row_is_still_a_difference() -> None:
    ran = SlurmJob("9", NAME, "COMPLETED", "", 1000.0, 1100.0, ("n1",), 0, 8, 100.0)
    (check,) = compare([], {KEY: ran})
    assert check.problem == "Slurm ran it; the ledger has no row (not yet observed, or lost)"
    assert check.slurm_gpu_s == 800.0  # 8 GPUs x 100 s
