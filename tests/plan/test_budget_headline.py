"""A workload's `budget_usd` is held to the cost the plan reports for it: the headline of the
deployment it recommends (the optimised purchase mix when renting, the on-prem TCO when
owning), checked after costing in `plan.ranking.over_budget`.

It was held at sizing to the on-demand list price on whole instances: with `budget_usd:
1000000` on examples/plan-chat-70b.yaml, an on-prem plan rejected B200 ("serving it ... costs at
least $2,994,154") though its TCO was $456,423, and picked MI300X (no cloud price, so never
checked) at $684,232 as "the only accelerator that meets every constraint"; a cloud plan was
infeasible though B200's optimised mix was $838,363.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.plan.model import Plan, Portfolio, WorkloadChoice
from gpufleet.plan.planner import plan
from gpufleet.plan.ranking import over_budget
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

EXAMPLE = Path(__file__).parents[2] / "examples" / "plan-chat-70b.yaml"
B200 = "b200-sxm-192gb"


def _chat(deployment: str, budget_usd: float) -> PlanSpec:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["deployment"] = deployment
    data["workloads"][0]["constraints"] = {"budget_usd": budget_usd}
    return validate(PlanSpec, data, "inline")


def _left_out(result: Plan) -> dict[str, str]:
    return {
        a.name.removeprefix("ranking[").removesuffix("]"): a.value + ": " + a.source
        for a in result.assumptions
        if a.name.startswith("ranking[")
    }


@pytest.fixture(scope="module")
def on_prem() -> Plan:
    return plan(_chat("on-prem", 1_000_000))


@pytest.fixture(scope="module")
def cloud() -> Plan:
    return plan(_chat("cloud", 1_000_000))


def test_an_on_prem_budget_is_held_to_the_tco(on_prem: Plan) -> None:
    assert on_prem.recommendation.accelerator == B200
    assert on_prem.summary.cost_what == "on-prem TCO over 3 years"
    assert on_prem.summary.cost_usd is not None
    assert on_prem.summary.cost_usd <= 1_000_000
    assert "the only accelerator that meets every constraint" not in on_prem.recommendation.why
    # MI300X (no cloud price) is held to its TCO too, and loses to B200 on it
    assert "mi300x" in {a.accelerator for a in on_prem.alternatives}


def test_a_cloud_budget_is_held_to_the_optimised_mix(cloud: Plan) -> None:
    assert cloud.recommendation.accelerator == B200
    assert cloud.summary.cost_what == "with the optimised purchase mix"
    assert cloud.summary.cost_usd is not None
    assert 800_000 < cloud.summary.cost_usd <= 1_000_000


@pytest.mark.parametrize("which", ["on_prem", "cloud"])
def test_every_accelerator_shown_is_within_budget_and_the_rest_say_why(
    which: str, request: pytest.FixtureRequest
) -> None:
    result: Plan = request.getfixturevalue(which)
    for alt in result.alternatives:
        assert alt.plan_cost_usd is not None
        assert alt.plan_cost_usd <= 1_000_000
    shown = {result.recommendation.accelerator} | {a.accelerator for a in result.alternatives}
    for name, why in _left_out(result).items():
        assert name not in shown
        assert "over budget" in why
        assert "against budget_usd $1,000,000" in why


def _choice(name: str, cost_usd: float | None) -> WorkloadChoice:
    return WorkloadChoice(
        workload=name,
        kind="inference",
        accelerator="x",
        gpus=8,
        parallelism={},
        metrics={},
        gpu_hours=1.0,
        cost_usd=cost_usd,
        meets_constraints=True,
    )


def _two(budgets: tuple[float | None, float | None]) -> PlanSpec:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    first = data["workloads"][0]
    data["workloads"] = [
        {**first, "name": name, "constraints": {} if b is None else {"budget_usd": b}}
        for name, b in zip(("a", "b"), budgets, strict=True)
    ]
    return validate(PlanSpec, data, "inline")


def _portfolio(headline: float | None, costs: tuple[float | None, float | None]) -> Portfolio:
    p = Portfolio("x", [_choice("a", costs[0]), _choice("b", costs[1])])
    p.plan_cost_usd, p.plan_cost_what = headline, "with the optimised purchase mix"
    return p


def test_budgets_on_every_workload_hold_the_headline_to_their_sum() -> None:
    spec = _two((600.0, 500.0))
    # each workload's list price is over its own budget: the headline is what is held
    assert over_budget(spec, _portfolio(1_100.0, (900.0, 900.0))) == []
    (why,) = over_budget(spec, _portfolio(1_101.0, (1.0, 1.0)))
    assert why == (
        "x: the plan's workloads: over budget: the cost for this work with the optimised "
        "purchase mix is $1,101 against their budget_usd together $1,100"
    )


def test_a_missing_headline_is_never_within_budget() -> None:
    (why,) = over_budget(_two((600.0, 500.0)), _portfolio(None, (1.0, 1.0)))
    assert "no plan cost to hold to their budget_usd together $1,100" in why


def test_budgets_on_some_workloads_hold_each_to_its_own_list_price() -> None:
    spec = _two((600.0, None))
    assert over_budget(spec, _portfolio(1.0, (600.0, 10_000.0))) == []
    (why,) = over_budget(spec, _portfolio(1.0, (601.0, 1.0)))
    assert why.startswith("a on x: over budget: $601 at on-demand list prices on whole instances")
    (none,) = over_budget(spec, _portfolio(1.0, (None, 1.0)))
    assert none.startswith("a on x: no cloud price to hold to budget_usd $600")


def test_no_budget_no_check() -> None:
    assert over_budget(_two((None, None)), _portfolio(None, (None, None))) == []
