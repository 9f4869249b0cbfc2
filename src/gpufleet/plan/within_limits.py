"""Which of a workload's sized options the plan may take: the ones that meet its deadline,
budget and GPU limit as the plan reports them (with failures and restarts, on whole horizons).

Apart from the planner because the searches hold the ideal figures to the constraints while
the plan prices and reports the real ones: a run sized a few hours inside its deadline, or a
few dollars inside its budget, missed them with failures while the plan said "meets
constraints"; and a service sized to 16 GPUs against `max_gpus: 8` was planned as if the
limit were not there. These functions are where the two readings are reconciled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.estimate.training_search import Candidate
from gpufleet.formatting import fmt_duration, fmt_usd
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, whole_instances
from gpufleet.plan.inference_search import ServingCandidate
from gpufleet.specs.plan import Constraints as WorkloadConstraints
from gpufleet.specs.training import TrainingSpec


@dataclass(frozen=True)
class Budget:
    """A workload's budget_usd and how the plan prices its GPU-hours against it: the list
    price per GPU-hour, on whole instances of `gpus_per_instance` GPUs (the accelerator
    ranking and the cost rent whole instances, `cost.instances`; 10 GPUs are billed as 16)."""

    usd: float | None = None
    usd_per_gpu_hour: float | None = None
    gpus_per_instance: int = 1

    def cost_usd(self, gpus: int, gpu_hours: float | None) -> float | None:
        """The GPU-hours' list-price cost on the instances that hold `gpus` (each workload's
        own: services that share instances are charged no more than this)."""
        if self.usd_per_gpu_hour is None or gpu_hours is None or gpus <= 0:
            return None
        rented = whole_instances(gpus, self.gpus_per_instance) / gpus
        return gpu_hours * rented * self.usd_per_gpu_hour

    def allows(self, cost: float | None) -> bool:
        return self.usd is None or cost is None or cost <= self.usd


def cheapest_on_time(
    base: TrainingSpec,
    front: Sequence[Candidate],
    deadline_s: float,
    budget: Budget | None = None,
) -> tuple[Candidate, TrainingEstimate] | str:
    """The cheapest layout of the search's front whose wall clock with failures meets the
    deadline and whose GPU-hours with failures, priced as the plan prices them (`Budget`),
    stay within its budget_usd, with its estimate; else why none does.

    The search holds the ideal train time to the deadline and the ideal GPU-hours to the
    budget, but the plan reports (and prices) the run with failures and restarts, so a run
    sized a few hours inside the deadline finished after it, and one a few dollars inside the
    budget cost more than it, while the plan said it met its constraints."""
    budget = budget or Budget()
    closest: tuple[Candidate, float] | None = None
    cheapest_over: float | None = None
    for pick in sorted(front, key=lambda c: (c.cost_usd or math.inf, c.gpus)):
        data = base.model_dump()
        data["hardware"]["count"] = pick.gpus
        data["parallelism"] = training_parallelism(pick)
        est = estimate_training(TrainingSpec.model_validate(data))
        wall_days = est.wall_clock_days_with_failures
        if wall_days is None or wall_days * 86_400.0 <= deadline_s:
            cost = budget.cost_usd(pick.gpus, est.gpu_hours_with_failures or est.gpu_hours)
            if budget.allows(cost):
                return pick, est
            assert cost is not None
            cheapest_over = cost if cheapest_over is None else min(cheapest_over, cost)
            continue
        if closest is None or wall_days < closest[1]:
            closest = (pick, wall_days)
    if cheapest_over is not None and budget.usd is not None:
        return (
            f"over budget with failures: the cheapest layout that meets the deadline costs "
            f"{fmt_usd(cheapest_over)} with failures and restarts against budget_usd "
            f"{fmt_usd(budget.usd)}"
        )
    assert closest is not None, "the front is never empty here"
    return (
        f"misses the deadline with failures: the fastest layout ({closest[0].gpus:,} GPUs) "
        f"needs {fmt_duration(closest[1] * 86_400.0)} with failures and restarts against "
        f"{fmt_duration(deadline_s)}"
    )


def training_parallelism(c: object) -> dict[str, object]:

    assert isinstance(c, Candidate)
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
    budget: Budget,
    horizon_years: float,
) -> ServingCandidate | str:
    """The cheapest way to serve the load (the search's order) within the workload's
    max_gpus and its budget over the horizon (`Budget`), else why none is: a service sized to
    16 GPUs against `max_gpus: 8` was planned and said to meet its constraints."""
    fits = [c for c in found if limits.max_gpus is None or c.gpus <= limits.max_gpus]
    if not fits:
        fewest = min(c.gpus for c in found)
        return (
            f"needs {fewest:,} GPUs to serve its load within its SLO (its fewest) against "
            f"max_gpus {limits.max_gpus:,}"
        )
    hours = HOURS_PER_YEAR * horizon_years
    costs = [budget.cost_usd(c.gpus, c.gpus * hours) for c in fits]
    for c, cost in zip(fits, costs, strict=True):
        if budget.allows(cost):
            return c
    cheapest = min(cost for cost in costs if cost is not None)
    return (
        f"over budget: serving it for {horizon_years:g} years costs at least "
        f"{fmt_usd(cheapest)} against budget_usd {fmt_usd(budget.usd)}"
    )
