"""The GPU count a plan leads with is the one its cost pays for, with those used beside it.

From the wizard review: a llama-3-70b service on H100 needs 12 GPUs (3 replicas of TP 4); the
Decision said "16 × h100 (the workloads need 12; whole nodes)" and the TCO priced 16, while
the Recommendation said "12 GPUs in total", the terminal "12 × h100" and the Alternatives
"12" (B200: 6 shown, 8 bought). A CFO buys from the number shown first. Expected counts are
the workloads' own GPUs rounded up to whole 8-GPU nodes here.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.plan.summary import fleet_text
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

from .test_cloud_gaps import SERVE

H100 = "h100-sxm5-80gb"
B200 = "b200-sxm-192gb"

SPEC: dict[str, Any] = {
    "kind": "plan",
    "name": "serve-llama-3-70b",
    "deployment": "both",
    "providers": ["aws", "gcp", "azure"],
    "expected_utilization": 0.7,
    "on_prem": {"rack_power_kw": 30, "electricity_usd_per_kwh": 0.1},
    "workloads": [SERVE],
}


def _plan(accelerators: list[str]) -> Plan:
    return plan(validate(PlanSpec, {**SPEC, "accelerators": accelerators}, "inline"))


def _nodes(gpus: int) -> int:
    return math.ceil(gpus / 8) * 8


@pytest.fixture(scope="module")
def h100() -> Plan:
    return _plan([H100])


def test_the_headline_count_is_the_one_priced(h100: Plan) -> None:
    rec, design, summary = h100.recommendation, h100.design, h100.summary
    assert design is not None
    assert summary is not None
    (w,) = rec.workloads
    assert w.gpus == 12
    assert int(w.parallelism["tp"]) * 3 == 12
    assert rec.deployment == "on-prem"
    assert design.gpus == _nodes(12) == 16
    assert (summary.headline_gpus, summary.gpus_used_at_once) == (16, 12)
    assert summary.workload_gpus_added_up == rec.total_gpus == 12  # the raw sum, kept
    assert fleet_text(h100) == f"16 × {H100} (12 used)"
    md = render_markdown(h100)
    assert f"Recommended: **{H100}**, on-prem, 16† GPUs (12 used), " in md
    assert "GPUs in total" not in md
    assert f"{H100}</strong>, on-prem, 16" in render_html(h100)


def test_alternatives_show_what_each_plan_buys() -> None:
    both = _plan([H100, B200])
    rec, summary = both.recommendation, both.summary
    assert summary is not None
    assert rec.accelerator == B200
    assert rec.total_gpus == 6
    assert (summary.headline_gpus, summary.gpus_used_at_once) == (_nodes(6), 6)
    (alt,) = both.alternatives
    assert alt.accelerator == H100
    assert (alt.total_gpus, alt.gpus_at_once, alt.priced_gpus) == (12, 12, _nodes(12))
    md = render_markdown(both)
    assert f"| **{B200}** (recommended) | serve-llama-3-70b: 6 | 8 (6 used) |" in md
    assert f"| {H100} | serve-llama-3-70b: 12 | 16 (12 used) |" in md
    assert fleet_text(both) == f"8 × {B200} (6 used)"
