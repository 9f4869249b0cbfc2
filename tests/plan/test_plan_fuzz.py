"""Generated plan specs end in a plan, an infeasible answer (exit 1) or a clear input error
(exit 2), never in a traceback (issue 27).

Hypothesis draws plan specs over the schema's choices: deployment, providers, regions (real
ones and a typo), candidate accelerators (priced and unpriced), utilisation and horizon,
and one or two workloads (training with token budgets, deadlines, GPU caps and budgets;
serving with request rates, precisions, engines and SLOs) on catalog models from 7B to
405B. Each spec is validated, planned and rendered to JSON, Markdown and HTML (the PDF is
WeasyPrint printing that HTML). 500 examples in four shards of 125, so `pytest -n auto`
spreads them; `GPUFLEET_PLAN_FUZZ_EXAMPLES` sets the examples per shard.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gpufleet.catalog.accelerators import load_accelerators
from gpufleet.catalog.instances import load_instances
from gpufleet.errors import UserError
from gpufleet.formatting import fmt_usd
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import InfeasiblePlanError, plan
from gpufleet.report.render import headline_cost, render_html, render_json, render_markdown
from gpufleet.specs.load import load, validate
from gpufleet.specs.plan import PlanSpec

EXAMPLES = int(os.environ.get("GPUFLEET_PLAN_FUZZ_EXAMPLES", "125"))
ACCELERATORS = sorted(a.name for a in load_accelerators())
REGIONS = [*sorted({r.region for r in load_instances()}), "us-east-9"]
MODELS = (
    "llama-2-7b",
    "llama-3-8b",
    "mixtral-8x7b",
    "llama-3-70b",
    "qwen2.5-72b",
    "deepseek-v3",
    "llama-3.1-405b",
)
PROVIDERS = ("aws", "gcp", "azure")


def _days(draw: st.DrawFn, low: int, high: int) -> str:
    return f"{draw(st.integers(low, high))}d"


@st.composite
def training(draw: st.DrawFn, name: str) -> dict[str, Any]:
    constraints: dict[str, Any] = {}
    if draw(st.booleans()):
        constraints["deadline"] = _days(draw, 1, 365)
    if draw(st.booleans()):
        constraints["max_gpus"] = draw(st.sampled_from([8, 64, 512, 4096, 16384]))
    if draw(st.booleans()):
        constraints["budget_usd"] = draw(st.sampled_from([1e3, 1e5, 1e7, 1e9]))
    return {
        "name": name,
        "kind": "training",
        "model": {"preset": draw(st.sampled_from(MODELS))},
        "training": {
            "seq_len": draw(st.sampled_from([2048, 4096, 8192])),
            "global_batch": draw(st.sampled_from([256, 1024, 2048])),
            "tokens": draw(st.sampled_from(["1B", "100B", "2T", "15T"])),
            "precision": draw(st.sampled_from(["bf16", "fp8"])),
        },
        "constraints": constraints,
        "start": _days(draw, 0, 2000),  # past the horizon too: refused with a message (exit 2)
    }


@st.composite
def serving(draw: st.DrawFn, name: str) -> dict[str, Any]:
    slo: dict[str, Any] = {"ttft_p99_ms": draw(st.sampled_from([100, 500, 2000]))}
    if draw(st.booleans()):
        slo["tpot_p99_ms"] = draw(st.sampled_from([20, 60, 200]))
    return {
        "name": name,
        "kind": "inference",
        "model": {"preset": draw(st.sampled_from(MODELS))},
        "serving": {
            "precision": draw(st.sampled_from(["bf16", "fp8"])),
            "engine": draw(st.sampled_from(["vllm", "tensorrt-llm", "generic"])),
            "input_tokens": draw(st.sampled_from([128, 1500, 8000])),
            "output_tokens": draw(st.sampled_from([64, 300, 1000])),
            "request_rate": draw(st.sampled_from([0.5, 5, 50, 500])),
            "slo": slo,
        },
        "daily_trough": draw(st.sampled_from([0.05, 0.5, 1.0])),
        "peak_hour": draw(st.integers(0, 23)),
    }


@st.composite
def plan_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": "plan",
        "name": "fuzz",
        "deployment": draw(st.sampled_from(["cloud", "on-prem", "both"])),
        "expected_utilization": draw(st.sampled_from([0.05, 0.3, 0.7, 1.0])),
        "horizon_years": draw(st.sampled_from([0.5, 1, 3, 5])),
    }
    if draw(st.booleans()):
        spec["providers"] = draw(
            st.lists(st.sampled_from(PROVIDERS), min_size=1, max_size=3, unique=True)
        )
    if draw(st.integers(0, 3)) == 0:
        spec["regions"] = draw(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2))
    if draw(st.booleans()):
        on_prem: dict[str, Any] = {
            "facility": draw(st.sampled_from(["colocation", "build", "existing"])),
            "discount_rate": draw(st.sampled_from([0.0, 0.07, 0.2])),
            "fleet_policy": draw(st.sampled_from(["peak", "p90", "p50"])),
        }
        if draw(st.booleans()):  # a small site: often too small for the plan
            on_prem["site_power_kw"] = draw(st.sampled_from([5.0, 100.0, 2_000.0]))
        spec["on_prem"] = on_prem
    if draw(st.booleans()):  # what the clouds let the plan have, down to nothing
        spec["cloud"] = {
            "spot_max_gpus": draw(st.sampled_from([0, 8, 64, 4096])),
            "capacity_block_max_gpus": draw(st.sampled_from([0, 64, 512])),
            "spot_reclaims_per_node_day": draw(st.sampled_from([0.01, 0.1, 5.0])),
        }
    # one or two candidates keep an example near a third of a second
    spec["accelerators"] = draw(
        st.lists(st.sampled_from(ACCELERATORS), min_size=1, max_size=2, unique=True)
    )
    kinds = draw(st.lists(st.sampled_from(["training", "inference"]), min_size=1, max_size=2))
    spec["workloads"] = [
        draw(training(f"w{i}") if kind == "training" else serving(f"w{i}"))
        for i, kind in enumerate(kinds)
    ]
    return spec


def outcome(data: dict[str, Any]) -> str:
    """What the CLI would do with this spec: 'planned' (exit 0), 'infeasible' (exit 1) or
    'refused' (exit 2). Any other exception is a traceback and fails the test."""
    try:
        spec = validate(PlanSpec, data, "generated")
    except UserError:
        return "refused"
    try:
        result = plan(spec)
    except InfeasiblePlanError as exc:
        advice = exc.advice  # an infeasible plan says what would fix it
        return "infeasible" if advice else "infeasible without advice"
    except UserError:
        return "refused"
    render_json(result)
    md = render_markdown(result)
    html = render_html(result)
    verdict_agrees(spec, result, html)
    summary_agrees(result, md, html)
    return "planned"


def summary_agrees(result: Plan, *texts: str) -> None:
    """The executive summary states the headline the plan prices, a range around it, and
    the same figures in every format."""
    s = result.summary
    assert s is not None
    assert (s.cost_usd, s.cost_what) == headline_cost(result)
    if s.cost_usd is None:
        return
    assert s.cost_low_usd is not None
    assert s.cost_high_usd is not None
    assert s.cost_low_usd <= s.cost_usd <= s.cost_high_usd
    for row in result.cost.sensitivity:
        assert math.isclose(float(row["base_usd"]), s.cost_usd, rel_tol=1e-9)
    for text in texts:
        for usd in (s.cost_usd, s.cost_low_usd, s.cost_high_usd):
            assert fmt_usd(usd) in text


def verdict_agrees(spec: PlanSpec, result: Plan, html: str) -> None:
    """The rent-or-own verdict, the recommendation, the payback and the costs agree."""
    data = result.cost.rent_or_own
    if not data:
        return
    v = RentOrOwn.from_json(data)
    assert (v.own_usd < v.rent_work_usd) == (v.cheaper_for_work == "own")
    assert (v.own_usd < v.rent_at_stated_usd) == (v.cheaper_at_stated == "own")
    # owning wins at the stated utilisation exactly when it is above the break-even one
    if not math.isclose(v.stated_utilization, v.breakeven_utilization, rel_tol=1e-9):
        assert (v.stated_utilization > v.breakeven_utilization) == (v.cheaper_at_stated == "own")
    if result.cost.break_even_months is not None:
        assert v.cheaper_at_stated == "own", "a payback is shown only where owning wins"
    if spec.deployment == "both":
        sentence = v.sentence()
        assert sentence in result.recommendation.why
        assert sentence.startswith("renting" if v.cheaper_for_work == "rent" else "owning")
        assert (result.recommendation.deployment == "on-prem") == (v.cheaper_for_work == "own")
        assert fmt_usd(v.own_usd) in html
    # the side-by-side table shows the same numbers as the verdict
    assert "Rent or own" in html
    assert fmt_usd(v.rent_work_usd) in html
    assert fmt_usd(v.rent_at_stated_usd) in html


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(4))
def test_generated_plans_never_end_in_a_traceback(shard: int) -> None:
    seen: dict[str, int] = {}

    @seed(27_000 + shard)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan_specs())
    def run(data: dict[str, Any]) -> None:
        result = outcome(data)
        assert result != "infeasible without advice", data
        seen[result] = seen.get(result, 0) + 1

    run()
    assert sum(seen.values()) >= min(EXAMPLES, 50)


EXAMPLES_DIR = Path(__file__).parents[2] / "examples"
PLAN_EXAMPLES = sorted(
    p.name
    for p in EXAMPLES_DIR.glob("plan-*.yaml")
    if "kind: plan" in (text := p.read_text("utf-8")) and "\nteams:" not in text
)


@pytest.mark.parametrize("name", PLAN_EXAMPLES)
def test_every_example_verdict_agrees_with_its_numbers(name: str) -> None:
    spec = load(PlanSpec, EXAMPLES_DIR / name)
    result = plan(spec)
    html = render_html(result)
    verdict_agrees(spec, result, html)
    summary_agrees(result, render_markdown(result), html)
    rec = result.recommendation
    if rec.deployment == "cloud" and rec.provider is not None:
        assert rec.provider in spec.providers, "the headline names a provider the plan allows"
        if result.cost.mix_by_provider:  # ... and the one the optimised mix buys most from
            assert rec.provider == max(result.cost.mix_by_provider.items(), key=lambda kv: kv[1])[0]
    headline, what = headline_cost(result)
    if rec.deployment == "on-prem" and result.cost.tco:
        assert headline == result.cost.tco["total"]
        assert what.startswith("on-prem TCO")
