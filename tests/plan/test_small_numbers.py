"""Small plans print numbers that can be told apart, the same in every format.

A CFO's-eye review: a plan for a few minutes of training said "h100 costs 9.2% less than
h200 for the same work ($2 vs $2 at list prices)", "train in 0 days vs ... in 0 days", "from
$2 to below $2" and "on-demand $2, optimised mix $0": two different totals printed the same
under a verdict that one is cheaper. Totals below $100 now carry cents, durations below a
day are in hours or minutes, and a comparison prints as many decimals as tell its two
totals apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.formatting import fmt_usd, fmt_usd_apart
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

TINY = """\
kind: plan
name: tiny
deployment: both
workloads:
  - name: sft-8b
    kind: training
    model: {preset: llama-3-8b}
    training: {seq_len: 4096, global_batch: 32, tokens: 10M, precision: bf16, framework: fsdp}
    constraints: {deadline: 7d, max_gpus: 8}
"""
PAIR = re.compile(r"(\$[\d,.]+) vs (\$[\d,.]+)")  # whichever figure the sentence names
BELOW = re.compile(r"\(from (\$[\d,.]+) to below (\$[\d,.]+)\)")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "$0"),
        (0.35, "$0.35"),
        (1.834, "$1.83"),
        (2.41, "$2.41"),
        (-5.5, "-$5.50"),
        (0.00042, "$0.00042"),
        (99.999, "$100"),
        (100.0, "$100"),
        (1_234.4, "$1,234"),
        (4_512_300.4, "$4,512,300"),
    ],
)
def test_totals_below_100_dollars_carry_cents(value: float, text: str) -> None:
    assert fmt_usd(value) == text


def test_a_comparison_prints_as_many_decimals_as_tell_its_totals_apart() -> None:
    assert fmt_usd_apart(1_234.4, 1_234.1) == ("$1,234.40", "$1,234.10")
    assert fmt_usd_apart(1.834, 1.8349) == ("$1.834", "$1.835")
    assert fmt_usd_apart(2_000.0, 3_000.0) == ("$2,000", "$3,000")
    assert fmt_usd_apart(5.0, 5.0) == ("$5.00", "$5.00")  # equal totals stay equal


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan]:
    path = tmp_path_factory.mktemp("tiny") / "tiny.yaml"
    path.write_text(TINY)
    return path, plan(load(PlanSpec, path))


def test_a_tiny_plans_comparisons_never_print_two_totals_the_same(tiny: tuple[Path, Plan]) -> None:
    _, result = tiny
    sentences = [*result.recommendation.why, *(s for a in result.alternatives for s in a.compared)]
    assert result.summary is not None
    sentences += result.summary.would_change
    pairs = [m.groups() for s in sentences for m in [*PAIR.finditer(s), *BELOW.finditer(s)]]
    assert pairs, "the tiny plan compares accelerators by cost"
    for cheaper, dearer in pairs:
        assert cheaper != dearer
    # training runs of minutes read in minutes, not "0 days"
    assert not any(re.search(r"\b0(\.0)? days\b", s) for s in sentences)
    assert any(re.search(r"train in [\d.]+ (s|min) vs ", s) for s in result.recommendation.why)


def test_every_format_prints_the_small_totals_alike(
    tiny: tuple[Path, Plan], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, result = tiny
    s = result.summary
    assert s is not None
    assert s.cost_usd is not None
    assert s.cost_usd < 100
    numbers = [fmt_usd(s.cost_usd), fmt_usd(s.cost_low_usd), fmt_usd(s.cost_high_usd)]
    assert all("." in n for n in numbers), numbers  # cents, not "$0" and "$1"
    md, html = render_markdown(result), render_html(result)
    assert main(["plan", str(path), "--out", str(tmp_path / "out")]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    assert result.cost.on_demand is not None
    assert f"on-demand {fmt_usd(result.cost.on_demand)}" in terminal
    for text in (md, html, terminal):
        for number in numbers:
            assert number in text
    assert "0.0 days" not in md
    assert "0.0 days" not in html
