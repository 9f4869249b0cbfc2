"""A service is planned within its `max_gpus` and `budget_usd` (they were read for training
only: a chat service needing 16 GPUs was planned on 16 against `max_gpus: 8`, "meets
constraints")."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.plan.planner import InfeasiblePlanError, plan
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

H100 = "h100-sxm5-80gb"


def _chat(constraints: dict[str, Any]) -> PlanSpec:
    return validate(
        PlanSpec,
        {
            "kind": "plan",
            "name": "chat",
            "deployment": "cloud",
            "accelerators": [H100],
            "workloads": [
                {
                    "name": "chat",
                    "kind": "inference",
                    "model": {"preset": "llama-3-70b"},
                    "serving": {
                        "precision": "fp8",
                        "engine": "vllm",
                        "input_tokens": 1500,
                        "output_tokens": 300,
                        "request_rate": 20,
                        "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 60},
                    },
                    "constraints": constraints,
                }
            ],
        },
        "inline",
    )


@pytest.fixture(scope="module")
def unconstrained_gpus() -> int:
    (service,) = plan(_chat({})).recommendation.workloads
    assert service.gpus > 1
    return service.gpus


def test_a_service_is_sized_within_max_gpus_or_the_plan_says_why(unconstrained_gpus: int) -> None:
    with pytest.raises(InfeasiblePlanError) as info:
        plan(_chat({"max_gpus": unconstrained_gpus - 1}))
    assert info.value.advice[0].startswith(f"chat on {H100}: needs ")
    assert f"against max_gpus {unconstrained_gpus - 1:,}" in info.value.advice[0]
    (service,) = plan(_chat({"max_gpus": unconstrained_gpus})).recommendation.workloads
    assert service.gpus <= unconstrained_gpus
    assert service.meets_constraints


def test_a_service_over_its_budget_for_the_horizon_is_infeasible(unconstrained_gpus: int) -> None:
    # held to the plan's headline for the horizon (the optimised purchase mix for this cloud
    # plan), not the on-demand list price it used to be held to (plan.ranking.over_budget)
    headline = plan(_chat({})).summary.cost_usd
    assert headline is not None
    with pytest.raises(InfeasiblePlanError) as info:
        plan(_chat({"budget_usd": headline * 0.99}))
    assert info.value.advice[0].startswith(
        f"chat on {H100}: over budget: the cost for this work with the optimised purchase mix is "
    )
    within = plan(_chat({"budget_usd": headline * 1.01})).summary.cost_usd
    assert within is not None
    assert within <= headline * 1.01
