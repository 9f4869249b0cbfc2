"""A rack power budget that cannot hold one server is said to be overridden, not used quietly.

From the wizard review: `rack_power_kw: 5` with DGX H100s (10.2 kW each, systems.csv) showed
"Rack power budget | 10.2 kW per rack" unmarked in the design table; only an appendix row
said the racks need liquid cooling. The design table and the executive summary now say the
stated 5 kW cannot hold one server and what the plan assumed instead.
"""

from __future__ import annotations

import math

from markupsafe import escape

from gpufleet.catalog.systems import get_system
from gpufleet.plan.design.power import rack_power_note
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

H100 = "h100-sxm5-80gb"


def _spec(rack_kw: float) -> PlanSpec:
    return validate(
        PlanSpec,
        {
            "kind": "plan",
            "name": "train-llama-3-8b",
            "deployment": "on-prem",
            "on_prem": {"rack_power_kw": rack_kw},
            "accelerators": [H100],
            "workloads": [
                {
                    "name": "train-llama-3-8b",
                    "kind": "training",
                    "model": {"preset": "llama-3-8b"},
                    "training": {"seq_len": 8192, "global_batch": 512, "tokens": "160B"},
                }
            ],
        },
        "inline",
    )


def test_a_five_kw_rack_budget_is_said_to_be_overridden() -> None:
    result = plan(_spec(5))
    design, summary = result.design, result.summary
    assert design is not None
    assert summary is not None
    server_kw = get_system("dgx-h100").node_max_power_kw
    assert server_kw is not None
    assert server_kw > 5  # one server alone is over the budget
    assert design.system == "dgx-h100"
    assert design.rack_power_kw == server_kw
    assert design.rack_power_stated_kw == 5
    assert design.racks == math.ceil(design.gpus / 8)  # one server per rack
    kw = f"{server_kw:,.1f}"
    note = (
        f"the stated rack power budget of 5 kW cannot hold one dgx-h100, which draws {kw} kW: "
        f"the plan assumes {kw} kW racks instead, one dgx-h100 each ({design.racks} rack"
        f"{'s' if design.racks != 1 else ''}), which need liquid cooling or a higher-density "
        "rack; set on_prem.rack_power_kw to what the site can supply"
    )
    assert rack_power_note(design) == note
    assert summary.caveats == [f"Rack power: {note}"]
    md = render_markdown(result)
    assert f"| Rack power budget | {kw} kW per rack, assumed: {note} |" in md
    assert f"**Check first:** Rack power: {note}." in md
    assert str(escape(note)) in render_html(result)


def test_a_budget_that_holds_a_server_is_not_marked() -> None:
    result = plan(_spec(30))
    assert result.design is not None
    assert result.design.rack_power_kw == 30
    assert result.design.rack_power_stated_kw is None
    assert rack_power_note(result.design) is None
    assert result.summary is not None
    assert result.summary.caveats == []
