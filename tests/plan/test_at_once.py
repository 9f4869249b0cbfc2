"""What a plan rents and reserves is what its workloads use at once (a CFO's review).

examples/plan-year-of-runs.yaml runs four training runs at different times of a year beside a
service. Its demand curve peaks at 528 GPUs, but the decision said "the workloads use 1,296 at
once", the Cloud options table listed 162 instances and "Reserved / committed $34,806,751"
reserved 1,064 GPUs for a year: each sized on the sum of every workload's GPUs, or on every
run's GPU-hours squeezed into one window. pretrain-8b said "Rent … on aws" beside an instance
on gcp, and the plans whose verdict chose renting labelled the rental tornado "on-prem total
cost".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.cli.plan import _fleet_text
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand, busiest
from gpufleet.plan.cost.prices import RESERVED_1Y, RESERVED_3Y
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
H100 = "h100-sxm5-80gb"


def _plan(name: str) -> Plan:
    return plan(load(PlanSpec, EXAMPLES / name))


@pytest.fixture(scope="module")
def year_of_runs() -> Plan:
    return _plan("plan-year-of-runs.yaml")


@pytest.fixture(scope="module")
def pretrain_8b() -> Plan:
    return _plan("plan-pretrain-8b.yaml")


def test_a_demand_counts_the_gangs_that_run_together() -> None:
    gangs = ((256, 1_000.0), (256, 1_000.0), (512, 2_000.0))
    spans = ((0.0, 10.0), (20.0, 30.0), (25.0, 40.0))
    d = Demand("x", 16, 4_000.0, 0.0, 0.0, HOURS_PER_YEAR, burst_gangs=gangs, burst_spans=spans)
    assert d.gpus_at_once == 16 + 256 + 512  # the second and third overlap, the first alone
    # without spans every gang is taken to run at once, as before
    assert Demand("x", 16, 4_000.0, 0.0, 0.0, HOURS_PER_YEAR, burst_gangs=gangs).gpus_at_once == (
        16 + 1_024
    )
    # whole instances round each part, and the spans travel with the gangs
    assert d.on_instances(24).gpus_at_once == 24 + 264 + 528
    assert busiest([4, 4], [(0.0, 5.0), (5.0, 9.0)]) == 4  # a run ends as the next starts
    with pytest.raises(ValueError, match="spans"):
        Demand("x", 0, 1.0, 0.0, 0.0, 10.0, burst_gangs=gangs, burst_spans=spans[:1])


def test_year_of_runs_rents_and_reserves_what_it_uses_at_once(year_of_runs: Plan) -> None:
    rec, cost, curve = year_of_runs.recommendation, year_of_runs.cost, year_of_runs.demand_curve
    assert curve is not None
    assert rec.total_gpus == 1_296  # every workload's GPUs added up
    assert rec.gpus_at_once == curve.peak_gpus == 528
    mix = cost.mix
    assert (mix["rented_gpus"], mix["rented_instances"], mix["idle_gpus"]) == (528, 66, 0)
    offer = next(o for o in year_of_runs.cloud["aws"] if o.instance == "p5.48xlarge")
    assert (offer.instances, offer.gpus) == (66, 528)
    assert rec.why[0].startswith(f"renting takes 528 × {H100} as 66 × 8-GPU p5.48xlarge")
    assert "the workloads use 528 at once (1,296 added up across them)" in rec.why[0]
    summary = year_of_runs.summary
    assert summary is not None
    assert summary.decision.startswith(f"Rent up to 528 × {H100} at once (1,296 across")
    # the reservation holds the GPUs in use at once, at the cheaper term, for the year
    assert cost.reserved_gpus == 528
    assert cost.reserved_gpus <= curve.peak_gpus
    term = min(
        mix[f"price_{k}_usd_per_gpu_hour"] * max(1.0, years) * HOURS_PER_YEAR
        for k, years in ((RESERVED_1Y, 1.0), (RESERVED_3Y, 3.0))
    )
    assert cost.reserved == pytest.approx(528 * term)
    assert cost.reserved < 20e6  # $34.8 M for 1,064 GPUs before
    # every format says the same
    assert _fleet_text(year_of_runs) == f"528 × {H100} at once (1,296 across the workloads)"
    md = render_markdown(year_of_runs)
    assert "528† GPUs at once (1,296 across the workloads)" in md
    assert "Reserved / committed: every hour's work on reservations alone, 528 GPUs (66 × " in md
    assert "</span> GPUs at once (1,296 across the workloads)" in render_html(year_of_runs)


def test_the_rented_instances_are_those_the_mix_buys(pretrain_8b: Plan, year_of_runs: Plan) -> None:
    """The sentence names the provider the decision names: the optimised mix buys all of
    pretrain-8b in AWS capacity blocks, so its instance is the p5.48xlarge, not gcp's
    on-demand a3-highgpu-8g."""
    for result, instance in ((pretrain_8b, "p5.48xlarge"), (year_of_runs, "p5.48xlarge")):
        rec = result.recommendation
        assert rec.provider is not None
        assert f"{instance} ({rec.provider} " in rec.why[0]
        assert result.summary is not None
        assert f" on {rec.provider};" in result.summary.decision
    assert (
        "in capacity blocks: the optimised mix's largest part, 100.0% of its cost"
        in (pretrain_8b.recommendation.why[0])
    )
    assert "gcp" not in pretrain_8b.recommendation.why[0]


def test_a_rented_tornado_is_labelled_renting(pretrain_8b: Plan) -> None:
    """deployment: both priced owning's tornado first; the verdict chose renting and the
    tornado was redone, but the log kept the first label."""
    assert pretrain_8b.recommendation.deployment == "cloud"
    lines = [a for a in pretrain_8b.assumptions if a.name == "sensitivity method"]
    assert [a.value for a in lines] == ["cloud total cost, one factor at a time"]


def test_the_mix_obtains_capacity_over_every_runs_weeks(year_of_runs: Plan) -> None:
    """The purchase mix's burst window is the hours some run is running (the union of the
    runs' spans), not the longest run alone: with one 593-hour window the block cap (512 GPUs
    at once) held only sweep-70b's 303,662 GPU-hours, and the three 8B runs, which never
    overlap it, were bought on demand ($3,710,025 against $3,563,002 with each run in its
    own weeks)."""
    curve, mix = year_of_runs.demand_curve, year_of_runs.cost.mix
    assert curve is not None
    runs = [c for c in year_of_runs.recommendation.workloads if c.kind == "training"]
    hours = sum(float(c.metrics["wall_clock_days_with_failures"] or 0.0) * 24 for c in runs)
    assert len(runs) == 4
    assert mix["burst_window_hours"] == pytest.approx(hours)  # the runs never overlap
    burst = sum(c.gpu_hours or 0.0 for c in runs)
    assert mix["capacity_block_gpu_hours"] == pytest.approx(burst)  # every gang <= 512 GPUs
    assert mix["on_demand_gpu_hours"] == pytest.approx(0.0, abs=1.0)
