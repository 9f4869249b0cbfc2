"""A CFO reviewer's defects on examples/plan-year-of-runs.yaml: the rent of the demand above the
owned fleet, the basis of the rent-or-own comparison at the stated utilisation, and the
failure-rate row of the tornado."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.estimate.goodput import default_reliability, goodput
from gpufleet.plan import assemble
from gpufleet.plan.cost.demand import HOURS_PER_YEAR
from gpufleet.plan.cost.steady import SteadyRent, steady_prices
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Plan, Portfolio
from gpufleet.plan.planner import plan
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

from .reviewed import at_reviewed_storage, at_storage

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="module")
def year() -> tuple[PlanSpec, Plan]:
    # the review's figures were costed at 2,000 GB/s of checkpoint storage (reviewed.py)
    spec = at_reviewed_storage(load(PlanSpec, EXAMPLES / "plan-year-of-runs.yaml"))
    return spec, plan(spec)


@pytest.fixture(scope="module")
def big() -> tuple[PlanSpec, Plan]:
    spec = load(PlanSpec, EXAMPLES / "plan-pretrain-405b.yaml")
    return spec, plan(spec)


def _prices(result: Plan) -> dict[str, float]:
    mix = result.cost.mix
    return {
        k[len("price_") : -len("_usd_per_gpu_hour")]: v
        for k, v in mix.items()
        if k.startswith("price_") and k.endswith("_usd_per_gpu_hour")
    }


def test_the_rented_burst_is_priced_in_its_window_on_its_gang(year: tuple[PlanSpec, Plan]) -> None:
    """sweep-70b (512 GPUs, 24.7 days) rented as GPU-hours free to spread over the year came
    to $1,140,866 (34 reserved GPUs and block hours, which cannot run the gang); priced as the
    rental mix prices it, with its window and gang in whole instances, $1,492,801."""
    _, result = year
    dc = result.demand_curve
    assert dc is not None
    assert dc.rented_runs == ["sweep-70b"]
    assert dc.rent_usd == pytest.approx(1_492_801, abs=1)
    assert result.cost.tco["burst_rent"] == pytest.approx(dc.rent_usd)


def test_rent_or_own_at_the_stated_use_carries_the_burst_rent_on_both_sides(
    year: tuple[PlanSpec, Plan],
) -> None:
    """Owning (the TCO) holds the rent of the demand above the fleet; renting the fleet's
    steady use must too, or the break-even (which held it) and the payback (which did not)
    describe different comparisons."""
    _, result = year
    v = RentOrOwn.from_json(result.cost.rent_or_own)
    burst = v.own_burst_rent_usd
    assert burst == pytest.approx(1_492_801, abs=1)
    steady = SteadyRent(
        result.recommendation.accelerator,
        v.fleet_gpus,
        v.horizon_years * HOURS_PER_YEAR,
        steady_prices(_prices(result)),
        instance_gpus=int(result.cost.mix["instance_gpus"]),
    )
    stated = steady.at_utilization(v.stated_utilization)
    assert v.rent_at_stated_usd == pytest.approx(stated.total_usd + burst, abs=0.01)
    assert v.rent_full_usd == pytest.approx(steady.at_utilization(1.0).total_usd + burst, abs=0.01)
    # the rate said is the fleet's steady rate, the one the payback rents at
    assert v.rent_at_stated_usd_per_gpu_hour == pytest.approx(stated.usd_per_gpu_hour)
    # break-even: where the steady rent plus the burst rent equals owning (burst included)
    at_breakeven = steady.at_utilization(v.breakeven_utilization).total_usd + burst
    assert at_breakeven == pytest.approx(v.own_usd, rel=1e-6)
    # the cash sentence compares owning's cash (burst in) with the rent (burst in)
    text = v.sentence()
    assert f"against ${v.rent_at_stated_usd:,.0f} to rent that use steadily" in text
    assert f"plus ${burst:,.0f} renting the demand above the fleet on both sides" in text
    assert f"owning pays ${v.own_cash_usd:,.0f} against ${v.rent_at_stated_usd:,.0f}" in text


def test_the_tornado_has_a_failure_rate_row_from_the_goodput_model(
    big: tuple[PlanSpec, Plan],
) -> None:
    """No plan passed the failure-rate GPU-hours, so the row the guide promises never showed;
    pretrain-405b runs at 92.7 % goodput, so its failure rate moves the total by millions.
    The storage stays what the plan builds while the failure rate moves."""
    spec, result = big
    rows = {r["factor"]: r for r in result.cost.sensitivity}
    assert "failure_rate" in rows
    row = rows["failure_rate"]
    assert float(row["low_usd"]) < float(row["base_usd"]) < float(row["high_usd"])
    assert float(row["high_usd"]) - float(row["base_usd"]) > 10e6
    # the pair is the goodput ratio at the per-GPU MTBF ÷ m, one run here, at the checkpoint
    # storage the plan designs for it (the planner states it in the spec it costs)
    (run,) = [c for c in result.recommendation.workloads if c.kind == "training"]
    storage = run.design_inputs["checkpoint_write_bytes_per_s"]
    built = at_storage(spec, f"{storage!r}B/s")
    pair = assemble._failure_hours(
        built, Portfolio(result.recommendation.accelerator, list(result.recommendation.workloads))
    )
    assert pair is not None
    mtbf = default_reliability().gpu_mtbf_s
    ideal = float(run.metrics["train_time_days"] or 0.0) * 86_400.0
    ckpt = run.design_inputs["checkpoint_bytes"]

    def fraction(scale: float) -> float:
        g = goodput(
            gpus=run.gpus,
            ideal_time_s=ideal,
            checkpoint_bytes=ckpt,
            storage_bytes_per_s=storage,
            gpu_mtbf_s=mtbf * scale,
        )
        return float(g.fraction)

    assert fraction(1.0) == pytest.approx(run.metrics["goodput_fraction"])
    assert pair[0] == pytest.approx(fraction(1.0) / fraction(2.0))
    assert pair[1] == pytest.approx(fraction(1.0) / fraction(0.5))
    assert pair[0] < 1.0 < pair[1]


def test_no_training_no_failure_rate_pair(year: tuple[PlanSpec, Plan]) -> None:
    spec, result = year
    serving = [c for c in result.recommendation.workloads if c.kind == "inference"]
    assert (
        assemble._failure_hours(spec, Portfolio(result.recommendation.accelerator, serving)) is None
    )
