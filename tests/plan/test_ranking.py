"""The accelerators are ranked on the headline cost of the plan each would give.

A CFO's-eye review: examples/plan-pretrain-70b.yaml recommended H100, ranked on its
on-demand list price ($28,496,319 against the H200's $28,552,797), while its headline was the
optimised purchase mix ($27,861,617) and the H200's mix was lower ($27,839,359). The summary
then said "h200 would be recommended if its list-price cost fell by more than 0.2 %" beside
a headline the H200 already beat. Each figure here is the one a plan for that accelerator
alone shows as its headline, and every sentence that compares accelerators uses it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.formatting import fmt_pct, fmt_usd, fmt_usd_apart
from gpufleet.plan.cost.demand import HOURS_PER_YEAR
from gpufleet.plan.cost.steady import SteadyRent
from gpufleet.plan.model import (
    Alternative,
    CostBreakdown,
    Plan,
    Portfolio,
    Recommendation,
    WorkloadChoice,
)
from gpufleet.plan.planner import plan
from gpufleet.plan.ranking import why
from gpufleet.plan.summary import executive_summary
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

from .reviewed import at_reviewed_storage

EXAMPLES = Path(__file__).parents[2] / "examples"
H100, H200, B200 = "h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-192gb"
MIX, TCO = "with the optimised purchase mix", "on-prem TCO over 3 years"


def _plan(name: str, *accelerators: str) -> Plan:
    # as reviewed, at 2,000 GB/s of checkpoint storage (reviewed.py). Since the planner sizes
    # on every whole-server count that splits (not only powers of two), H100 on 2,560 GPUs
    # is cheapest on the headline and at list prices alike: the list-price clause of the
    # comparison is exercised by `test_a_comparison_names_each_figure_when_they_differ`
    spec = at_reviewed_storage(load(PlanSpec, EXAMPLES / name))
    if accelerators:
        spec = spec.model_copy(update={"accelerators": list(accelerators)})
    return plan(spec)


def _headline(p: Plan) -> tuple[float, str]:
    assert p.summary is not None
    assert p.summary.cost_usd is not None
    return p.summary.cost_usd, p.summary.cost_what


def _alternative(p: Plan, accelerator: str) -> Alternative:
    return next(a for a in p.alternatives if a.accelerator == accelerator)


@pytest.fixture(scope="module")
def pretrain() -> Plan:
    return _plan("plan-pretrain-70b.yaml")


@pytest.fixture(scope="module")
def h100_alone() -> Plan:
    return _plan("plan-pretrain-70b.yaml", H100)


def test_pretrain_70b_is_ranked_on_the_headline_each_plan_would_show(
    pretrain: Plan, h100_alone: Plan
) -> None:
    h200_alone = _plan("plan-pretrain-70b.yaml", H200)
    assert pretrain.recommendation.accelerator == H100
    assert _headline(pretrain) == pytest.approx(_headline(h100_alone))
    h200 = _alternative(pretrain, H200)
    # the figure it was ranked on is the headline its own plan shows
    assert (h200.plan_cost_usd, h200.plan_cost_what) == _headline(h200_alone)
    mine, what = _headline(pretrain)
    assert what == MIX
    for alt in pretrain.alternatives:
        assert alt.plan_cost_usd is not None
        assert mine <= alt.plan_cost_usd


def test_every_sentence_comparing_accelerators_states_the_ranked_figure(pretrain: Plan) -> None:
    mine, _ = _headline(pretrain)
    h200 = _alternative(pretrain, H200)
    assert h200.plan_cost_usd is not None
    assert h200.cost_usd is not None
    assert pretrain.cost.on_demand is not None
    assert pretrain.cost.on_demand < h200.cost_usd  # list prices order them the same way
    ours, theirs = fmt_usd_apart(mine, h200.plan_cost_usd)
    expected = (
        f"{H100} costs {fmt_pct(1 - mine / h200.plan_cost_usd)} less than {H200} for the same "
        f"work ({ours} vs {theirs} {MIX})"
    )
    assert expected in pretrain.recommendation.why
    assert expected.replace(H100, "the recommendation", 1) in h200.compared
    assert pretrain.summary is not None
    change = next(s for s in pretrain.summary.would_change if s.startswith(H200))
    cut = 1 - mine / h200.plan_cost_usd
    assert change == (
        f"{H200} would be recommended if its cost for this work {MIX} fell by more than "
        f"{fmt_pct(cut)} (from {fmt_usd(h200.plan_cost_usd)} to below {fmt_usd(mine)})"
    )
    every = [*pretrain.recommendation.why, *pretrain.summary.would_change]
    assert not any("list-price cost" in s for s in every)


def test_the_alternatives_table_shows_the_ranked_figure_and_the_list_price(
    pretrain: Plan,
) -> None:
    md = render_markdown(pretrain)
    assert "| GPUs† | Plan cost† | On demand† | Compared with the recommendation |" in md
    mine, _ = _headline(pretrain)
    rec_row = next(line for line in md.splitlines() if line.startswith(f"| **{H100}**"))
    assert f"| {fmt_usd(mine)} | {fmt_usd(pretrain.cost.on_demand)} |" in rec_row
    h200 = _alternative(pretrain, H200)
    row = next(line for line in md.splitlines() if line.startswith(f"| {H200} |"))
    assert f"| {fmt_usd(h200.plan_cost_usd)} | {fmt_usd(h200.cost_usd)} |" in row
    assert f"the headline cost of the plan each option would give, {MIX}" in md


def test_chat_70b_owns_the_accelerator_whose_tco_is_lowest() -> None:
    """chat-70b owns its fleet: the ranking compares what owning each would cost. H100 was
    first at list prices ($2,263,557 on demand); owning 8 B200s costs less than owning 16
    H100s, whatever the B200's cloud price."""
    chat = _plan("plan-chat-70b.yaml")
    h100_alone = _plan("plan-chat-70b.yaml", H100)
    assert chat.recommendation.accelerator == B200
    assert chat.recommendation.deployment == "on-prem"
    mine, what = _headline(chat)
    assert what == TCO
    h100 = _alternative(chat, H100)
    assert (h100.plan_cost_usd, h100.plan_cost_what) == _headline(h100_alone)
    assert h100.plan_cost_usd is not None
    assert mine < h100.plan_cost_usd
    nearest = chat.alternatives[0]
    assert nearest.plan_cost_usd is not None
    ours, theirs = fmt_usd_apart(mine, nearest.plan_cost_usd)
    assert any(f"({ours} vs {theirs} {TCO}" in s for s in chat.recommendation.why)


def _portfolio(name: str, plan_usd: float, what: str, list_usd: float) -> Portfolio:
    choice = WorkloadChoice(
        workload="w",
        kind="training",
        accelerator=name,
        gpus=8,
        parallelism={},
        metrics={},
        gpu_hours=1.0,
        cost_usd=list_usd,
        meets_constraints=True,
    )
    return Portfolio(name, [choice], plan_cost_usd=plan_usd, plan_cost_what=what)


def test_a_comparison_names_each_figure_when_they_differ() -> None:
    """With deployment: both one accelerator's plan may own and another's rent: each total is
    named, and the list price is added only where it orders them the other way."""
    own = _portfolio("a", 100.0, TCO, 300.0)
    rent = _portfolio("b", 150.0, MIX, 200.0)
    assert why(own, rent)[0] == (
        f"a costs 33.3% less than b for the same work ($100 {TCO} vs $150 {MIX}; all on "
        "demand at list prices it would cost 50.0% more, $300 vs $200, which the plan does "
        "not buy)"
    )
    cheaper = _portfolio("c", 100.0, MIX, 100.0)
    assert (
        why(cheaper, rent)[0] == f"c costs 33.3% less than b for the same work ($100 vs $150 {MIX})"
    )


def test_what_would_change_names_the_recommendations_figure_when_it_differs() -> None:
    rec = Recommendation(
        accelerator="a", deployment="cloud", provider=None, workloads=[], total_gpus=8, why=[]
    )
    cost = CostBreakdown(
        on_demand=None,
        reserved=None,
        spot=None,
        mix={"total_usd": 100.0},
        savings_vs_on_demand=None,
        tco={},
        break_even_months=None,
        sensitivity=[],
    )
    owned = Alternative(
        accelerator="b",
        workloads=[],
        total_gpus=8,
        cost_usd=90.0,
        compared=[],
        plan_cost_usd=150.0,
        plan_cost_what=TCO,
    )
    summary = executive_summary(rec, [owned], None, cost)
    assert summary.would_change == [
        f"b would be recommended if its {TCO} for this work fell by more than 33.3% (from "
        f"$150 to below $100, the recommendation's cost {MIX})"
    ]


def test_a_plan_json_ranked_on_list_prices_reads_as_one() -> None:
    """A plan.json from before has no plan cost for its alternatives: its summary, rebuilt,
    compares the list prices it was ranked on and says so."""
    rec = Recommendation(
        accelerator="a",
        deployment="cloud",
        provider=None,
        workloads=[_portfolio("a", 0.0, MIX, 100.0).choices[0]],
        total_gpus=8,
        why=[],
    )
    cost = CostBreakdown(
        on_demand=100.0,
        reserved=None,
        spot=None,
        mix={"total_usd": 60.0},
        savings_vs_on_demand=None,
        tco={},
        break_even_months=None,
        sensitivity=[],
    )
    old = Alternative(accelerator="b", workloads=[], total_gpus=8, cost_usd=125.0, compared=[])
    summary = executive_summary(rec, [old], None, cost)
    assert summary.would_change == [
        "b would be recommended if its cost for this work at on-demand list prices fell by "
        "more than 20.0% (from $125 to below $100)"
    ]


def test_the_hourly_part_of_steady_use_reads_as_an_average_in_every_format(
    h100_alone: Plan,
) -> None:
    """The hourly part of steady use is an average over the horizon: "and 0.8 on demand"
    beside whole reservations read as a fraction of a GPU rented (the H100 plan of 4,104 GPUs
    on the power-of-two grid bought 2,872 reservations and 0.8 GPU by the hour). The plan's
    basis reads the same in every format."""
    steady = SteadyRent(H100, 4_104, HOURS_PER_YEAR * 3, {"reserved_3y": 1.0, "on_demand": 2.0})
    mix = {"reserved_3y_gpus": 2_872.0, "reserved_1y_gpus": 0.0}
    mix["on_demand_gpu_hours"] = 0.8 * HOURS_PER_YEAR * 3
    basis = steady._basis(mix)
    assert basis == "2,872 GPUs on 3-year reservations and on average 0.8 GPU on demand"
    stated = h100_alone.cost.rent_or_own["rent_at_stated_basis"]
    assert isinstance(stated, str)
    assert any(stated in s for s in h100_alone.recommendation.why)
    for text in (render_markdown(h100_alone), render_html(h100_alone)):
        assert stated in text
