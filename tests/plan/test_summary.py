"""The executive summary (issue 27 item 8): its numbers are the plan's own, checked by hand,
and every format (terminal, JSON, Markdown, HTML, PDF) shows the same ones."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.formatting import fmt_pct, fmt_usd
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Driver, Plan
from gpufleet.plan.planner import plan
from gpufleet.plan.summary import cost_range, headline_cost
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"


NAMES = ["plan-pretrain-70b.yaml", "plan-shared-cluster.yaml"]  # rent wins / own was asked


@pytest.fixture(scope="module", params=NAMES)
def example(request: pytest.FixtureRequest) -> tuple[str, Plan]:
    return request.param, plan(load(PlanSpec, EXAMPLES / request.param))


@pytest.fixture
def planned(example: tuple[str, Plan]) -> Plan:
    return example[1]


def _driver(low: float, high: float) -> Driver:
    return Driver(factor="x", name="X", low_label="-", high_label="+", low_usd=low, high_usd=high)


def test_the_range_combines_swings_as_independent_by_hand() -> None:
    # downsides 3 and 4 -> 5; upsides 12 and 5 -> 13 (a driver whose high end is cheaper
    # counts its low end as the upside)
    low, high = cost_range(100.0, [_driver(97.0, 112.0), _driver(105.0, 96.0)])
    assert (low, high) == pytest.approx((95.0, 113.0))
    assert cost_range(100.0, []) == (100.0, 100.0)


def test_the_summary_reads_the_plans_own_numbers(planned: Plan) -> None:
    s = planned.summary
    assert s is not None
    base, what = headline_cost(planned.recommendation, planned.cost)
    assert (s.cost_usd, s.cost_what) == (base, what)
    assert base is not None
    assert s.cost_low_usd is not None
    assert s.cost_high_usd is not None
    assert s.cost_low_usd <= base <= s.cost_high_usd
    # the tornado is about the number the headline states (the base it names)
    for row in planned.cost.sensitivity:
        assert float(row["base_usd"]) == pytest.approx(base, rel=1e-9)
    # the drivers are the tornado's widest rows, widest first
    widest = sorted(planned.cost.sensitivity, key=lambda r: -float(r["swing_usd"]))[:3]
    assert [d.factor for d in s.drivers] == [r["factor"] for r in widest]
    # the range is no wider than every input at its worst end together
    lows = [min(float(r["low_usd"]), float(r["high_usd"])) for r in planned.cost.sensitivity]
    highs = [max(float(r["low_usd"]), float(r["high_usd"])) for r in planned.cost.sensitivity]
    assert base - s.cost_low_usd <= sum(base - x for x in lows) + 1e-6
    assert s.cost_high_usd - base <= sum(x - base for x in highs) + 1e-6
    assert base - s.cost_low_usd >= max(base - x for x in lows) - 1e-6  # and no narrower


def test_what_would_change_it_is_the_verdict_and_the_alternatives_in_numbers(
    planned: Plan,
) -> None:
    s = planned.summary
    assert s is not None
    v = RentOrOwn.from_json(planned.cost.rent_or_own)
    assert any(fmt_pct(v.breakeven_utilization) in line for line in s.would_change)
    # the cheapest alternative, and the cut that would make it win, by hand, in the figure
    # the plan is ranked on: the headline cost of the plan each accelerator would give
    rec_cost = s.cost_usd
    assert rec_cost is not None
    alt = min(
        (a for a in planned.alternatives if a.plan_cost_usd is not None),
        key=lambda a: a.plan_cost_usd or math.inf,
    )
    assert alt.plan_cost_usd is not None
    assert alt.plan_cost_what == s.cost_what  # both examples compare like with like
    cut = 1 - rec_cost / alt.plan_cost_usd
    line = next(x for x in s.would_change if x.startswith(alt.accelerator))
    assert f"by more than {fmt_pct(cut)}" in line
    assert f"(from {fmt_usd(alt.plan_cost_usd)} to below {fmt_usd(rec_cost)})" in line
    assert "list-price" not in line


def test_owned_side_sensitivity_moves_with_utilisation_and_electricity(planned: Plan) -> None:
    """The tornado of owning (recommended or not) shows utilisation and electricity; the one
    of renting shows neither, where they would be flat rows."""
    own, rent = planned.cost.sensitivity, planned.cost.sensitivity_alternative
    if planned.recommendation.deployment == "cloud":
        own, rent = rent, own
    own_factors = {r["factor"] for r in own}
    assert {"utilization", "electricity_price"} <= own_factors
    assert not {"utilization", "electricity_price"} & {r["factor"] for r in rent}
    for row in own:
        assert float(row["base_usd"]) == pytest.approx(planned.cost.tco["total"], rel=1e-9)


def _numbers(planned: Plan) -> list[str]:
    s = planned.summary
    assert s is not None
    return [
        fmt_usd(s.cost_usd),
        fmt_usd(s.cost_low_usd),
        fmt_usd(s.cost_high_usd),
        *(fmt_usd(d.low_usd) for d in s.drivers),
        *(fmt_usd(d.high_usd) for d in s.drivers),
    ]


def test_every_format_shows_the_same_summary(
    example: tuple[str, Plan], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, planned = example
    s = planned.summary
    assert s is not None
    md, html = render_markdown(planned), render_html(planned)
    for text in (md, html):
        assert "Executive summary" in text
        assert text.index("Executive summary") < text.index("Recommended:")
        for number in _numbers(planned):
            assert number in text
        for sentence in s.would_change:
            assert sentence.replace("→", "") in text.replace("&gt;", ">")
    # the terminal prints the headline range and every would-change sentence
    assert main(["plan", str(EXAMPLES / name), "--out", str(tmp_path / "out")]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    for number in (fmt_usd(s.cost_usd), fmt_usd(s.cost_low_usd), fmt_usd(s.cost_high_usd)):
        assert number in terminal
    for sentence in s.would_change:
        assert " ".join(sentence.split()) in terminal
    pdf = tmp_path / "out" / "plan.pdf"
    if not pdf.exists() or shutil.which("pdftotext") is None:
        return  # no PDF libraries or no pdftotext here: the other formats are checked
    text = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", str(pdf), "-"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    page_one = " ".join(text.split())
    assert "Executive summary" in page_one
    assert "Alternatives" not in page_one, "the summary is a page of its own"
    for number in _numbers(planned):
        assert number in page_one


def _verdict(**changes: float | str | None) -> RentOrOwn:
    """100 GPUs for a year: steady use of all of them rents at $2/GPU-h used (reserved), the
    stated 80 % at $2.50 per GPU-hour used (the same reservation, less used)."""
    base: dict[str, float | str | None] = {
        "fleet_gpus": 100,
        "horizon_years": 1.0,
        "rent_usd_per_gpu_hour": 6.0,
        "own_usd": 1_000_000.0,
        "work_gpu_hours": 700_000.0,
        "rent_work_usd": 4_200_000.0,
        "stated_utilization": 0.8,
        "payback_months": None,
        "rent_at_stated_usd": 2.0 * 876_000,
        "rent_at_stated_basis": "100 GPUs on 1-year reservations",
        "rent_full_usd": 2.0 * 876_000,
        "rent_full_basis": "100 GPUs on 1-year reservations",
        "breakeven_utilization": 0.152,
    }
    base.update(changes)
    return RentOrOwn(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("deployment", "changes"),
    [
        ("on-prem", {}),  # owning wins: renting would win below 15.2 %
        ("cloud", {"own_usd": 9e6, "work_gpu_hours": 50_000.0, "rent_work_usd": 300_000.0}),
        ("cloud", {"own_usd": 9e6, "breakeven_utilization": 5.1, "rent_work_usd": 300_000.0}),
    ],
)
def test_the_full_use_rate_says_it_is_every_hours_use(
    deployment: str, changes: dict[str, float]
) -> None:
    """chat-70b: "Renting would win if the fleet were less than 15.2% busy on average (steady
    use of it rents at $3.99 per GPU-hour used ...)" read as the rate at 15.2 %, and as a
    second price beside the $4.98 at the stated 80 %: it is the rate of the fleet kept busy
    every hour, and every branch now says so."""
    from gpufleet.plan.summary import _rent_or_own_changes

    (sentence,) = _rent_or_own_changes(deployment, _verdict(**changes))
    assert "steady use of it" not in sentence
    assert "steadily" not in sentence
    assert "$2.00 per GPU-hour used as 100 GPUs on 1-year reservations" in sentence
    assert "busy every hour" in sentence


def test_one_node_and_one_rack_read_in_the_singular() -> None:
    """chat-70b's decision said "1 dgx-b200 nodes, 1 racks"."""
    from gpufleet.plan.planner import plan
    from gpufleet.specs.load import load
    from gpufleet.specs.plan import PlanSpec

    result = plan(load(PlanSpec, EXAMPLES / "plan-chat-70b.yaml"))
    assert result.summary is not None
    assert "1 dgx-b200 node, 1 rack," in result.summary.decision
