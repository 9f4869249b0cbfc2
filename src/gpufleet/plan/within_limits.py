"""Which of a workload's sized options the plan may take: the ones that meet its deadline
and GPU limit as the plan reports them (with failures and restarts, on whole horizons).

Apart from the planner because the searches hold the ideal figures to the constraints while
the plan prices and reports the real ones: a run sized a few hours inside its deadline, or a
few dollars inside its budget, missed them with failures while the plan said "meets
constraints"; and a service sized to 16 GPUs against `max_gpus: 8` was planned as if the
limit were not there. These functions are where the two readings are reconciled.

A budget is not held here: it is held to the cost the plan reports for the deployment it
recommends (the optimised purchase mix when renting, the on-prem TCO when owning), which
only exists once the workloads are costed together, so `plan.ranking.over_budget` checks it.
The on-demand list price held here before rejected B200 for a service at $2,994,154 whose
on-prem TCO was $456,423, and never checked an accelerator with no cloud price.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.estimate.training_search import Candidate
from gpufleet.formatting import fmt_duration
from gpufleet.plan.inference_search import ServingCandidate
from gpufleet.specs.plan import Constraints as WorkloadConstraints
from gpufleet.specs.training import TrainingSpec


def cheapest_on_time(
    base: TrainingSpec,
    front: Sequence[Candidate],
    deadline_s: float,
) -> tuple[Candidate, TrainingEstimate] | str:
    """The cheapest layout of the search's front whose wall clock with failures meets the
    deadline, with its estimate; else why none does.

    The search holds the ideal train time to the deadline, but the plan reports the run with
    failures and restarts, so a run sized a few hours inside the deadline finished after it
    while the plan said it met its constraints."""
    closest: tuple[Candidate, float] | None = None
    for pick in sorted(front, key=lambda c: (c.cost_usd or math.inf, c.gpus)):
        data = base.model_dump()
        data["hardware"]["count"] = pick.gpus
        data["parallelism"] = training_parallelism(pick)
        est = estimate_training(TrainingSpec.model_validate(data))
        wall_days = est.wall_clock_days_with_failures
        if wall_days is None or wall_days * 86_400.0 <= deadline_s:
            return pick, est
        if closest is None or wall_days < closest[1]:
            closest = (pick, wall_days)
    assert closest is not None, "the front is never empty here"
    return (
        f"misses the deadline with failures: the fastest layout ({closest[0].gpus:,} GPUs) "
        f"needs {fmt_duration(closest[1] * 86_400.0)} with failures and restarts against "
        f"{fmt_duration(deadline_s)}"
    )


def training_parallelism(c: Candidate) -> dict[str, object]:
    """A searched layout as a spec's `parallelism`, to estimate it on its own."""
    return {
        "tp": c.tp,
        "pp": c.pp,
        "dp": c.dp,
        "cp": c.cp,
        "ep": c.ep,
        "microbatch": c.microbatch,
        "virtual_stages": c.virtual_stages,
        "zero_stage": c.zero_stage,
        "recompute": c.recompute,
        "sequence_parallel": c.sequence_parallel,
    }


def serving_within_limits(
    found: Sequence[ServingCandidate],
    limits: WorkloadConstraints,
) -> ServingCandidate | str:
    """The cheapest way to serve the load (the search's order) within the workload's
    max_gpus, else why none is: a service sized to 16 GPUs against `max_gpus: 8` was planned
    and said to meet its constraints."""
    fits = [c for c in found if limits.max_gpus is None or c.gpus <= limits.max_gpus]
    if not fits:
        fewest = min(c.gpus for c in found)
        return (
            f"needs {fewest:,} GPUs to serve its load within its SLO (its fewest) against "
            f"max_gpus {limits.max_gpus:,}"
        )
    return fits[0]
