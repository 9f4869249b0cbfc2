"""The on-prem TCO's delivered GPU-hours read the demand table's figure (CFO review, (a)).

The TCO divided by gpus × horizon × 8,760 × the stated utilization while the plan's demand
table said the owned fleet serves every one of its hours: chat-70b's 8 serving GPUs served
210,240 GPU-hours and the TCO divided by 168,192 (80 % of them), $2.71 per GPU-hour against
$2.17 at the hours it holds and serves. Delivered is now the stated utilization × the
GPU-hours held, or the planned work the owned fleet serves (the demand curve's "Served by the
owned fleet") where that is more (docs/design/0007-cost-model.md, "What a delivered GPU-hour
is"). Expected values here are worked by hand from the hours, not read from the function.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost import Demand, OnPremInputs, SensitivityInputs, on_prem_tco, sensitivity
from gpufleet.plan.cost.tco import per_gpu_hour_text
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load, validate
from gpufleet.specs.plan import OnPremPreferences, PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
H100 = "h100-sxm5-80gb"
PREFS = OnPremPreferences(
    pue=1.3,
    electricity_usd_per_kwh=0.10,
    colocation_usd_per_kw_month=50.0,
    depreciation_years=4.0,
    staff_fte_per_100_nodes=1.5,
    fte_usd_per_year=200_000.0,
    support_fraction_per_year=0.1,
)
# two DGX H100 over 3 years, worked by hand in test_cost.test_tco_by_hand_for_two_dgx_h100
TOTAL = 748_114.56
HELD = 16 * 3 * 8_760  # 420,480 GPU-hours held
STATED = HELD * 0.7  # 294,336 at the stated 70 %


def _tco(served: float | None) -> dict[str, float]:
    return on_prem_tco(
        H100, 16, 2, 20.4, 26.52, PREFS, 3.0, 0.7, Assumptions(), served_gpu_hours=served
    )


def test_a_fleet_its_work_holds_every_hour_delivers_every_hour() -> None:
    """16 GPUs serving every hour: 420,480 delivered, not 294,336; $1.78, not $2.54."""
    tco = _tco(float(HELD))
    assert tco["held_gpu_hours"] == pytest.approx(420_480)
    assert tco["served_gpu_hours"] == pytest.approx(420_480)
    assert tco["delivered_gpu_hours"] == pytest.approx(420_480)
    assert tco["per_gpu_hour"] == pytest.approx(TOTAL / 420_480)  # $1.7792
    assert tco["per_gpu_hour"] == pytest.approx(1.7792, abs=1e-4)


def test_a_training_fleet_keeps_the_stated_utilization() -> None:
    """A 90-day run on all 16 GPUs fills 34,560 of 420,480 hours: the stated 70 % says other
    work fills the rest, so the per-GPU-hour figure is what it was."""
    tco = _tco(16 * 24 * 90.0)
    assert tco["delivered_gpu_hours"] == pytest.approx(294_336)
    assert tco["per_gpu_hour"] == pytest.approx(TOTAL / 294_336)
    text = per_gpu_hour_text(tco)
    assert "the stated 70.0% utilization × the 420,480 GPU-hours" in text
    assert "the planned work fills 8.2% of them (34,560 GPU-hours)" in text


def test_served_hours_never_count_more_than_the_fleet_holds() -> None:
    tco = _tco(500_000.0)
    assert tco["delivered_gpu_hours"] == pytest.approx(HELD)


def test_without_the_served_hours_the_stated_utilization_stands() -> None:
    """The fleet planner passes a simulated utilization and no served hours."""
    tco = _tco(None)
    assert "served_gpu_hours" not in tco
    assert tco["delivered_gpu_hours"] == pytest.approx(STATED)
    assert tco["per_gpu_hour"] == pytest.approx(TOTAL / STATED)


def test_the_row_says_what_is_divided_by_what() -> None:
    text = per_gpu_hour_text(_tco(float(HELD)))
    assert text.startswith(
        "Per delivered GPU-hour: $748,115 (the TCO) ÷ 420,480 delivered GPU-hours = $1.78."
    )
    assert "100.0% of the 420,480 GPU-hours its 16 GPUs hold over 3 years" in text
    assert "more than the stated 70.0% utilization's 294,336" in text


def test_a_serving_fleets_tornado_does_not_grow_with_lower_utilization() -> None:
    """Its work fills every hour: -20 % utilization priced 16 × 0.7 ÷ 0.56 = 20 GPUs."""
    demand = Demand(H100, 16, 0.0, 0.0, 0.0, 3 * 8_760.0)
    inputs = OnPremInputs(
        gpus=16, nodes=2, it_power_kw=20.4, facility_power_kw=26.52, prefs=PREFS, utilization=0.7
    )
    row = next(
        r
        for r in sensitivity(SensitivityInputs("on-prem", demand, {}, inputs))
        if r["factor"] == "utilization"
    )
    assert float(row["low_usd"]) == pytest.approx(TOTAL)
    assert float(row["high_usd"]) == pytest.approx(TOTAL)
    assert row["low_label"] == "-20 %: 16 GPUs"
    assert "whose planned work fills 100% of their hours" in str(row["note"])


# ----------------------------------------------------------------- whole plans


@pytest.fixture(scope="module")
def chat() -> Plan:
    return plan(load(PlanSpec, EXAMPLES / "plan-chat-70b.yaml"))


def test_chat_70b_delivers_what_its_demand_table_serves(chat: Plan) -> None:
    assert chat.recommendation.deployment == "on-prem"
    assert chat.design is not None
    assert chat.demand_curve is not None
    held = chat.design.gpus * 3 * 8_760  # a service held and serving every hour
    tco = chat.cost.tco
    assert chat.demand_curve.owned_gpu_hours == pytest.approx(held)
    assert tco["delivered_gpu_hours"] == pytest.approx(held)
    assert tco["per_gpu_hour"] == pytest.approx(tco["total"] / held)
    verdict = RentOrOwn.from_json(chat.cost.rent_or_own)
    assert verdict.work_utilization == pytest.approx(1.0)


def test_the_report_shows_one_figure_in_both_tables(chat: Plan) -> None:
    """The demand table's "Served by the owned fleet" and the TCO's delivered GPU-hours are
    the same number, and the rate's row says what it divides."""
    assert chat.design is not None
    held = chat.design.gpus * 3 * 8_760
    hours = f"{held:,}"
    rate = f"${chat.cost.tco['total'] / held:,.2f}"
    markdown = render_markdown(chat)
    assert f"| Served by the owned fleet | {hours}† GPU-h |" in markdown
    assert (
        f"| Delivered GPU-hours (held × utilization, or served where more) | {hours} GPU-h† |"
        in (markdown)
    )
    assert f"| Per delivered GPU-hour (owning ÷ delivered GPU-hours) | {rate}† |" in markdown
    note = f"÷ {hours} delivered GPU-hours = {rate}. Delivered: the planned work"
    assert note in markdown
    assert note in render_html(chat)


def test_pretrain_70b_keeps_a_meaningful_rate() -> None:
    """`make run`'s spec: a 78-day run and a small service on a 3-year fleet fill 7 % of its
    hours; the rate stays per GPU-hour at the stated 70 %, not ÷ 7 %."""
    result = plan(load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml"))
    assert result.design is not None
    assert result.demand_curve is not None
    held = result.design.gpus * 3 * 8_760
    tco = result.cost.tco
    assert result.demand_curve.owned_gpu_hours < 0.7 * held
    assert tco["served_gpu_hours"] == pytest.approx(result.demand_curve.owned_gpu_hours)
    assert tco["delivered_gpu_hours"] == pytest.approx(0.7 * held)
    assert tco["per_gpu_hour"] == pytest.approx(tco["total"] / (0.7 * held))


TROUGH = {
    "kind": "plan",
    "name": "chat-trough",
    "deployment": "both",
    "expected_utilization": 0.8,
    "workloads": [
        {
            "name": "chat-70b",
            "kind": "inference",
            "model": {"preset": "llama-2-70b"},
            "serving": {
                "precision": "fp8",
                "engine": "vllm",
                "input_tokens": {"mean": 1024, "p99": 3000},
                "output_tokens": 256,
                "request_rate": 50,
                "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 100},
            },
            "daily_trough": 0.25,
            "peak_hour": 15,
        }
    ],
}


def test_a_service_with_a_nightly_trough_counts_the_hours_it_serves() -> None:
    """Quiet by night, the service serves fewer GPU-hours than its fleet holds: the demand
    table's figure, not the peak every hour (the verdict said 100 % busy, $0 idle, beside a
    table that served 142,350 of 210,240). Below the stated 80 %, the stated share stands."""
    result = plan(validate(PlanSpec, TROUGH, "inline"))
    assert result.design is not None
    assert result.demand_curve is not None
    choice = result.recommendation.workloads[0]
    tp = int(choice.parallelism.get("tp", 1) or 1)
    replicas = choice.gpus // tp
    served = 0.0
    for h in range(3 * 8_760):  # the daily shape, by hand
        wave = (1.0 + math.cos(2.0 * math.pi * ((h % 24) - 15) / 24.0)) / 2.0
        served += tp * math.ceil(replicas * (0.25 + 0.75 * wave) - 1e-9)
    held = result.design.gpus * 3 * 8_760
    assert result.demand_curve.owned_gpu_hours == pytest.approx(served)
    tco = result.cost.tco
    assert tco["served_gpu_hours"] == pytest.approx(served)
    assert tco["delivered_gpu_hours"] == pytest.approx(max(0.8 * held, served))
    verdict = RentOrOwn.from_json(result.cost.rent_or_own)
    assert verdict.work_utilization == pytest.approx(served / held)
    assert verdict.work_utilization < 1.0
