"""The rent-or-own table adds up where owning rents the demand above the fleet.

examples/plan-year-of-runs.yaml owns 272 GPUs and rents sweep-70b above them (303,662 GPU-h
for $1,492,801), and both sides of the stated-utilisation column carry that rent. The table's
GPU-hours row counted the fleet's 1,667,904 alone, and the sentence above it said "Each
column puts the same GPU-hours on both sides" without the burst: 1,667,904 GPU-h at the
$3.77 shown is $6,280,918, beside $7,773,719 to rent. Each check reads plan.json's numbers
and finds them in plan.md and plan.html, the rows' GPU-hours and rates reproducing the
column's totals on both sides.
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest

from gpufleet.formatting import fmt_count, fmt_usd, fmt_usd_rate
from gpufleet.plan.cost.demand import HOURS_PER_YEAR
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report import render_html, render_json, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
GOLDEN_PLAN = Path(__file__).parents[1] / "plan" / "golden" / "chat-8b.plan.json"
PLAIN = "Each column puts the same GPU-hours on both sides"


@pytest.fixture(scope="module")
def year() -> Plan:
    """year-of-runs as plan.json stores it (the tables are rendered from the JSON, as a
    re-render of a saved plan would be)."""
    spec = load(PlanSpec, EXAMPLES / "plan-year-of-runs.yaml")
    return Plan.model_validate_json(render_json(plan(spec)))


def _md_rows(markdown: str) -> dict[str, tuple[str, str]]:
    """The Rent or own table of plan.md: row label -> (planned work, stated), daggers off."""
    section = markdown.split("### Rent or own", 1)[1].split("###", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip().replace("†", "") for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] and not set(cells[1]) <= set("-:"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def _html_rows(page: str) -> dict[str, tuple[str, str]]:
    """The same table in plan.html, its cells as text."""
    section = page.split("<h3>Rent or own</h3>", 1)[1].split("</table>", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for label, work, stated in re.findall(
        r"<tr><th>(.*?)</th><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>", section
    ):

        def text(cell: str) -> str:
            return html_lib.unescape(re.sub(r"<[^>]+>", "", cell)).replace("†", "").strip()

        rows[text(label)] = (text(work), text(stated))
    return rows


def _number(cell: str) -> float:
    """The first number of a cell: '1,971,566 GPU-h' -> 1971566.0, '$3.77 per' -> 3.77."""
    found = re.search(r"[\d,]+(?:\.\d+)?", cell)
    assert found is not None, cell
    return float(found.group().replace(",", ""))


def test_the_table_adds_up_with_the_burst_on_both_sides(year: Plan) -> None:
    data = year.cost.rent_or_own
    v = RentOrOwn.from_json(data)
    dc = year.demand_curve
    assert dc is not None
    assert dc.rent_usd is not None
    burst_usd = v.own_burst_rent_usd
    assert burst_usd == pytest.approx(dc.rent_usd)
    assert burst_usd == pytest.approx(year.cost.tco["burst_rent"])
    burst_h = dc.rented_gpu_hours
    # 303,662 as reviewed; 309,240 since sweep-70b's goodput is costed at the checkpoint
    # storage the plan designs (stop 47)
    assert burst_h == pytest.approx(309_240, abs=1)
    assert data["own_burst_gpu_hours"] is not None  # the planner passes them
    if data.get("own_burst_gpu_hours") is not None:  # the same hours
        assert data["own_burst_gpu_hours"] == pytest.approx(burst_h)
        assert data["rent_at_stated_gpu_hours"] == pytest.approx(
            v.fleet_gpus * v.horizon_years * HOURS_PER_YEAR * v.stated_utilization + burst_h
        )
    steady_h = v.fleet_gpus * v.horizon_years * HOURS_PER_YEAR * v.stated_utilization
    steady_rate = (v.rent_at_stated_usd - burst_usd) / steady_h
    burst_rate = burst_usd / burst_h
    # the hand calculation: each side of the stated column pays for the fleet's steady use
    # and the burst, and the rates times their GPU-hours are the totals
    assert steady_h * steady_rate + burst_h * burst_rate == pytest.approx(v.rent_at_stated_usd)
    own_rate = year.cost.tco["per_gpu_hour"]  # per GPU-hour the fleet delivers
    assert steady_h * own_rate + burst_h * burst_rate == pytest.approx(v.own_usd)
    # the planned work: its GPU-hours at the blended rate are the rent
    assert v.work_gpu_hours * v.rent_usd_per_gpu_hour == pytest.approx(v.rent_work_usd)

    for rows in (_md_rows(render_markdown(year)), _html_rows(render_html(year))):
        work_h, stated_h = rows["GPU-hours"]
        assert _number(work_h) == round(v.work_gpu_hours)
        assert _number(stated_h) == round(steady_h + burst_h)  # both sides, the burst in
        above = rows["Of them above the owned fleet, rented on both sides"]
        assert above == (f"{fmt_count(round(burst_h))} GPU-h",) * 2
        # the row sums: the fleet's GPU-hours named by its rate, plus those above it
        rate_cell = rows["Rented at"][1]
        fleet_h = re.search(r"for the fleet's ([\d,]+) GPU-h", rate_cell)
        assert fleet_h is not None, rate_cell
        assert _number(fleet_h.group(1)) + _number(above[1]) == pytest.approx(
            _number(stated_h), abs=1
        )
        assert rate_cell.startswith(fmt_usd_rate(steady_rate) + " per GPU-hour used")
        assert rate_cell.endswith(f"{fmt_usd_rate(burst_rate)}/GPU-h above it")
        # the totals, and what of owning is the burst's rent, on both columns
        assert rows["Renting them"] == (fmt_usd(v.rent_work_usd), fmt_usd(v.rent_at_stated_usd))
        assert rows["Owning the fleet (TCO)"] == (fmt_usd(v.own_usd),) * 2
        assert rows["Of it renting above the fleet"] == (fmt_usd(burst_usd),) * 2
        # at the rates as shown (to the cent), the GPU-hours give the total to the rounding
        shown = _number(fleet_h.group(1)) * _number(rate_cell) + _number(above[1]) * _number(
            rate_cell.rsplit(";", 1)[1]
        )
        assert shown == pytest.approx(v.rent_at_stated_usd, abs=0.005 * _number(stated_h))


def test_the_sentence_names_the_gpu_hours_above_the_fleet(year: Plan) -> None:
    v = RentOrOwn.from_json(year.cost.rent_or_own)
    dc = year.demand_curve
    assert dc is not None
    named = (
        f"{PLAIN}, {fmt_count(round(dc.rented_gpu_hours))} GPU-hours of them above the owned "
        f"fleet's {v.fleet_gpus:,} GPUs, which both sides rent "
        f"({fmt_usd(v.own_burst_rent_usd)} in the TCO"
    )
    markdown = render_markdown(year)
    page = html_lib.unescape(re.sub(r"<[^>]+>", "", render_html(year)))
    for text in (markdown, page):
        assert named in text
        assert f"{PLAIN}†." not in text  # the plain sentence is kept for plans without burst


def test_without_burst_the_table_and_sentence_are_the_plain_ones() -> None:
    """chat-8b owns all of its demand: the plain sentence, and no burst rows."""
    result = Plan.model_validate_json(GOLDEN_PLAN.read_text("utf-8"))
    v = RentOrOwn.from_json(result.cost.rent_or_own)
    assert not v.own_burst_rent_usd
    assert v.same_hours_text() == PLAIN
    markdown = render_markdown(result)
    assert f"{PLAIN}†. Owning wins above" in markdown
    rows = _md_rows(markdown)
    assert "Of them above the owned fleet, rented on both sides" not in rows
    assert "Of it renting above the fleet" not in rows
    assert _number(rows["GPU-hours"][1]) == round(
        v.fleet_gpus * v.horizon_years * HOURS_PER_YEAR * v.stated_utilization
    )


def test_a_burst_rent_without_its_gpu_hours_is_said_without_a_number() -> None:
    """A verdict whose burst's GPU-hours are unknown (no demand curve to read them from)
    still says that both sides rent it, and gives no GPU-hours figure that leaves it out."""
    v = RentOrOwn(
        fleet_gpus=100,
        horizon_years=1.0,
        rent_usd_per_gpu_hour=6.0,
        own_usd=1_200_000.0,
        work_gpu_hours=100_000.0,
        rent_work_usd=600_000.0,
        stated_utilization=0.7,
        payback_months=None,
        own_burst_rent_usd=200_000.0,
        rent_at_stated_usd=1_426_400.0,
        rent_at_stated_basis="70 GPUs on 1-year reservations",
        rent_full_usd=1_952_000.0,
        rent_full_basis="100 GPUs on 1-year reservations",
        breakeven_utilization=0.57,
    )
    assert v.burst_gpu_hours is None
    assert v.rent_at_stated_gpu_hours is None
    assert v.burst_usd_per_gpu_hour is None
    assert v.same_hours_text() == (
        f"{PLAIN}, with the demand above the owned fleet's 100 GPUs rented on both sides "
        "($200,000 in the TCO and in the rent at the stated utilisation; the rent of the "
        "planned work buys them in its mix)"
    )
    known = RentOrOwn.from_json({**v.to_json(), "own_burst_gpu_hours": 40_000.0})
    assert known.rent_at_stated_gpu_hours == pytest.approx(613_200 + 40_000)
    assert known.burst_usd_per_gpu_hour == pytest.approx(5.0)
    assert known.to_json()["rent_at_stated_gpu_hours"] == pytest.approx(653_200)
