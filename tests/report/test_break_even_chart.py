"""The break-even chart's owning line steps up where the TCO buys the hardware again (it drew
one straight line, capex + opex × t, through the replacement the table and payback count)."""

from __future__ import annotations

import pytest

from gpufleet.report.charts import BreakEven, _purchases


def test_purchases_after_day_zero_within_the_chart() -> None:
    tco = {
        "capex": 1_000.0,
        "capex_facility": 200.0,
        "depreciation_years": 3.0,
        "facility_life_years": 10.0,
    }
    assert _purchases(tco, 100.0) == ((36.0, 800.0), (72.0, 800.0))
    assert _purchases(tco, 36.0) == ()  # bought again at month 36: past a 36-month chart
    assert _purchases({"capex": 1_000.0}, 100.0) == ()  # an older plan.json: no lives


def test_the_owning_line_steps_at_each_purchase_and_ends_at_the_cash_total() -> None:
    lines = BreakEven(20.0, 1_000.0, 10.0, 60.0, ((36.0, 800.0),))
    points = lines.onprem_points(60.0)
    assert points == [(0.0, 1_000.0), (36.0, 1_360.0), (36.0, 2_160.0), (60.0, 2_400.0)]
    # by hand: capex + the second purchase + opex for 60 months
    assert points[-1][1] == pytest.approx(1_000.0 + 800.0 + 10.0 * 60.0)
    assert BreakEven(20.0, 1_000.0, 10.0, 60.0).onprem_points(40.0) == [
        (0.0, 1_000.0),
        (40.0, 1_400.0),
    ]
