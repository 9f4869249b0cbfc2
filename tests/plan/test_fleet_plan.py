"""The multi-team plan end to end: determinism, quotas, the report's structure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.plan.fleet import plan_fleet
from gpufleet.plan.fleet_model import FleetPlan
from gpufleet.plan.fleet_quotas import split_whole
from gpufleet.report.fleet import all_charts, render_html, render_json, render_markdown

from .fleet_cases import spec, tiny

SEEDS = 3


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetPlan, FleetPlan]:
    """The tiny plan computed in-process and with a pool of two workers."""
    base = tmp_path_factory.mktemp("fleet")
    data = tiny(horizon="36h", warmup="4h")
    return (
        plan_fleet(spec(data), base, seeds=SEEDS, workers=1),
        plan_fleet(spec(data), base, seeds=SEEDS, workers=2),
    )


def test_the_answer_does_not_depend_on_the_worker_count(plans: tuple[FleetPlan, FleetPlan]) -> None:
    one, two = plans
    assert render_json(one) == render_json(two)
    assert render_markdown(one) == render_markdown(two)


def test_the_recommendation_is_the_first_passing_size(plans: tuple[FleetPlan, FleetPlan]) -> None:
    plan = plans[0]
    rec = plan.recommendation
    assert rec is not None
    search = next(c for c in plan.candidates if c.profile == "default" and c.arrival_scale == 1)
    by_nodes = {p.nodes: p for p in search.points}
    assert by_nodes[rec.nodes].passed
    assert rec.nodes - 1 not in by_nodes or not by_nodes[rec.nodes - 1].passed
    assert rec.gpus == rec.nodes * 8
    # every size above the answer that was tried passes (monotone in this case)
    assert all(p.passed for n, p in by_nodes.items() if n >= rec.nodes)
    assert search.binding, "one node below the answer some team's target binds"
    assert rec.cost_usd is not None
    assert rec.cost_usd > 0
    assert rec.deployment == "on-prem"


def test_quotas_partition_the_cluster_and_are_checked(plans: tuple[FleetPlan, FleetPlan]) -> None:
    plan = plans[0]
    assert plan.quotas is not None
    assert plan.recommendation is not None
    teams = plan.quotas.teams
    assert sum(q.guaranteed_gpus for q in teams) == plan.recommendation.gpus
    for q in teams:
        assert q.guaranteed_gpus <= q.burst_limit_gpus <= plan.recommendation.gpus
        assert q.guaranteed_gpus >= q.inference_peak_gpus
    alpha = next(q for q in teams if q.team == "alpha")
    assert 0 < alpha.inference_peak_gpus < 1, "the small service runs on a MIG slice"
    assert plan.quotas.verified is not None
    assert plan.quotas.verified.nodes == plan.recommendation.nodes


def test_allocation_and_gpus_held_are_counted_wherever_jobs_run(
    plans: tuple[FleetPlan, FleetPlan],
) -> None:
    """Every size of every search, and the quotas' measured use, count what teams held
    (the plan once printed "GPU allocation 0.0 % [0.0 %, 0.0 %]" and 0 GPUs held for
    every team without a service, its change log counting each release twice)."""
    plan = plans[0]
    for search in plan.candidates:
        for p in search.points:
            assert p.running_jobs_mean > 0
            assert (p.allocation.mean or 0.0) > 0, (search.profile, p.nodes)
            assert all(t.held_gpus_mean > 0 for t in p.teams), (search.profile, p.nodes)
    assert plan.quotas is not None
    assert all(q.mean_gpus_held > 0 for q in plan.quotas.teams)
    assert not re.search(r"\b0\.0 ?% \[0\.0 ?%, 0\.0 ?%\]", render_markdown(plan))


def test_the_policy_and_sensitivity_runs(plans: tuple[FleetPlan, FleetPlan]) -> None:
    plan = plans[0]
    assert [p.profile for p in plan.policies] == ["k8s-default"]
    assert [s.arrival_scale for s in plan.sensitivity] == [0.8, 1.2]
    rec = plan.recommendation
    assert rec is not None
    k8s = plan.policies[0]
    if k8s.gpus is not None:
        assert k8s.extra_gpus == k8s.gpus - rec.gpus
    up = plan.sensitivity[1]
    assert up.gpus is None or up.gpus >= rec.gpus - 8  # more work never needs much less
    assert any("binds" in s for s in plan.sensitive_to)


def test_the_report_has_every_section(plans: tuple[FleetPlan, FleetPlan]) -> None:
    plan = plans[0]
    md = render_markdown(plan)
    headings = re.findall(r"^## (.+)$", md, flags=re.MULTILINE)
    assert headings == [
        "Summary",
        "Where the answer is sensitive",
        "Teams and targets",
        "Candidates",
        "The recommended cluster at every size tried (h100-sxm5-80gb, default)",
        f"Service levels at the answer ({plan.recommendation.gpus} GPUs)"
        if plan.recommendation
        else "",
        "Concurrent-job capacity",
        "Services",
        "Recommended quotas",
        "Scheduling policy",
        "Sensitivity to the arrival rate",
        "Cost of the recommendation",
        "Method",
        "Assumptions and sources",
    ]
    assert "MIG 3g.40gb" in md
    html = render_html(plan)
    assert "<script" not in html
    assert 'id="chart-utilisation"' in html
    charts = all_charts(plan)
    assert set(charts) == {"wait:alpha", "wait:beta", "utilisation"}
    assert all(svg.startswith("<svg") and "<title" in svg for svg in charts.values())
    data = json.loads(render_json(plan))
    assert data["kind"] == "multi-team-plan"
    assert data["method"]["seeds"] == list(range(SEEDS))
    assert set(data) >= {
        "candidates",
        "recommendation",
        "capacity",
        "quotas",
        "policies",
        "sensitivity",
        "sensitive_to",
        "assumptions",
    }
    point = data["candidates"][0]["points"][0]
    assert set(point["teams"][0]["wait_p95_s"]) == {"mean", "low", "high", "n"}


@given(
    total=st.integers(0, 5000),
    weights=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3), st.floats(0, 1e4), min_size=1, max_size=8
    ),
)
def test_split_whole_sums_and_stays_proportional(total: int, weights: dict[str, float]) -> None:
    out = split_whole(total, weights)
    assert set(out) == set(weights)
    assert sum(out.values()) == total
    mass = sum(weights.values())
    for name, n in out.items():
        exact = total * weights[name] / mass if mass > 0 else total / len(weights)
        assert abs(n - exact) < 1 + 1e-9


def test_unreadable_trace_is_a_user_error(tmp_path: Path) -> None:
    from gpufleet.errors import UserError

    data = tiny()
    data["teams"][1]["trace"] = {"path": "missing.sacct", "format": "sacct"}
    with pytest.raises(UserError, match=r"missing\.sacct"):
        plan_fleet(spec(data), tmp_path, seeds=1)


def test_the_queue_policies_run_at_the_quotas_size_and_the_sentence_says_what_they_show(
    plans: tuple[FleetPlan, FleetPlan],
) -> None:
    """Fair share, priority and FIFO side by side (issue 25): each at the size the quotas are
    for, with them in force when they were verified; the summary sentence is built from the
    rows, so a policy is said to meet every target exactly when its row does."""
    plan = plans[0]
    assert plan.quotas is not None
    assert [q.profile for q in plan.queue_policies] == ["default", "priority", "fifo"]
    for q in plan.queue_policies:
        assert q.point.gpus == plan.quotas.gpus
        assert len(q.point.teams) == len(plan.teams)
        said = f"{q.profile} ({q.queue_order}) meets every target" in plan.queue_policy_summary
        assert said == q.point.passed
    default = plan.queue_policies[0]
    if plan.quotas.recommended:  # the plan's own profile with its quotas is the check run
        assert plan.quotas.verified is not None
        assert default.point == plan.quotas.verified


def test_costs_say_their_period_and_the_window_is_the_simulated_one(
    plans: tuple[FleetPlan, FleetPlan],
) -> None:
    """three-teams read "$30,484,535 over the horizon" while its Method table said "Horizon
    14 d": the cost is a TCO over horizon_years (3), the horizon the simulated window."""
    from rich.console import Console

    from gpufleet.cli.plan import _print_fleet_answer

    plan = plans[0]
    rec = plan.recommendation
    assert rec is not None
    assert rec.cost is not None
    assert rec.cost.horizon_years == 3.0
    assert rec.cost.period == "over 3 years"
    md, html = render_markdown(plan), render_html(plan)
    assert f"{rec.deployment}, ${rec.cost_usd:,.0f} over 3 years;" in md
    assert f"| Total over 3 years | ${rec.cost_usd:,.0f} |" in md
    assert "| Simulated window (horizon) |" in md
    assert "Cost over 3 years" in md
    for text in (md, html):
        assert "over the horizon" not in text
    out = Console(record=True, width=400)
    _print_fleet_answer(plan, "tiny", out)
    assert f"${rec.cost_usd:,.0f} over 3 years ({rec.deployment})" in out.export_text()
