"""The Alternatives table's comparison sentences read as sentences, one after another.

From the wizard review (md and pdf): "…($1,996,906 vs $2,086,693 with the optimised purchase
mix) train-llama-3-70b: 256 × the recommendation train in 64.8 d vs …": the planner's
clauses carry no full stop and were joined with a bare space.
"""

from __future__ import annotations

from markupsafe import escape
from tests.report.test_render import make_plan

from gpufleet.report.render import fmt_sentences, render_html, render_markdown

PRICE = (
    "the recommendation costs 4.3% less than h200-sxm-141gb for the same work ($1,996,906 vs "
    "$2,086,693 with the optimised purchase mix)"
)
DAYS = (
    "train-llama-3-70b: 256 × the recommendation train in 64.8 d vs 256 × h200-sxm-141gb in 61.5 d"
)
JOINED = (
    "The recommendation costs 4.3% less than h200-sxm-141gb for the same work ($1,996,906 vs "
    "$2,086,693 with the optimised purchase mix). train-llama-3-70b: 256 × the "
    "recommendation train in 64.8 d vs 256 × h200-sxm-141gb in 61.5 d."
)


def test_clauses_become_sentences() -> None:
    assert fmt_sentences([PRICE, DAYS]) == JOINED
    # a sentence that already ends keeps its stop; a name keeps its case
    assert fmt_sentences(["Costs $5 more.", "h100-sxm5-80gb: no price"]) == (
        "Costs $5 more. h100-sxm5-80gb: no price."
    )


def test_the_alternatives_table_separates_them() -> None:
    plan = make_plan()
    alt = plan.alternatives[0].model_copy(update={"compared": [PRICE, DAYS]})
    plan = plan.model_copy(update={"alternatives": [alt, *plan.alternatives[1:]]})
    md, html = render_markdown(plan), render_html(plan)
    assert f"| {JOINED} |" in md
    assert "purchase mix) train-llama" not in md
    assert f"<td>{escape(JOINED)}</td>" in html
