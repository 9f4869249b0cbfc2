"""A plan says which providers and regions rent none of its accelerator, and why renting has
no price when none does (`plan.cloud_gaps`).

From the wizard review: `deployment: both` on MI300X (no row in instances.csv) became owning
with only "No cloud options: this plan does not consider renting." and "No break-even was
computed", and `regions: [us-east-1]` with aws, gcp and azure silently dropped GCP and Azure,
whose regions are named us-east1 and eastus. Expected sentences are checked against the
catalog's rows, read here directly.
"""

from __future__ import annotations

from typing import Any

import pytest
from markupsafe import escape

from gpufleet.catalog.instances import load_instances
from gpufleet.formatting import fmt_usd
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

MI300X = "mi300x"
A100 = "a100-sxm4-80gb"
H100 = "h100-sxm5-80gb"

SERVE: dict[str, Any] = {
    "name": "serve-llama-3-70b",
    "kind": "inference",
    "model": {"preset": "llama-3-70b"},
    "serving": {
        "precision": "bf16",
        "engine": "vllm",
        "input_tokens": 1500,
        "output_tokens": 300,
        "request_rate": 10,
        "slo": {"ttft_p99_ms": 800, "tpot_p99_ms": 60},
    },
}


def _plan(**data: Any) -> Plan:
    return plan(validate(PlanSpec, {"kind": "plan", "name": "gaps", **data}, "inline"))


def _regions(provider: str, accelerator: str | None = None) -> set[str]:
    return {
        r.region
        for r in load_instances()
        if r.provider == provider and (accelerator is None or r.accelerator == accelerator)
    }


@pytest.fixture(scope="module")
def mi300x() -> Plan:
    return _plan(deployment="both", accelerators=[MI300X, A100], workloads=[SERVE])


def test_owning_an_unrentable_accelerator_says_why_renting_was_not_compared(mi300x: Plan) -> None:
    assert not any(r.accelerator == MI300X for r in load_instances())  # the catalog's gap
    rec = mi300x.recommendation
    assert (rec.accelerator, rec.deployment) == (MI300X, "on-prem")
    assert mi300x.cloud == {}
    reason = (
        "gpufleet's catalog (instances.csv) has no cloud instance of mi300x from aws, gcp or "
        "azure, so renting could not be priced for it"
    )
    assert mi300x.cloud_notes == [reason]
    assert f"owning, without comparing renting: {reason}" in rec.why
    # the cheapest alternative the catalog rents, at its on-demand list price
    (alt,) = mi300x.alternatives
    assert alt.accelerator == A100
    assert alt.cost_usd is not None
    assert alt.plan_cost_usd is not None
    summary = mi300x.summary
    assert summary is not None
    assert summary.caveats == [
        f"Renting was not compared: {reason}; the cheapest alternative to rent is {A100}: "
        f"{fmt_usd(alt.cost_usd)} for this work at on-demand list prices, "
        f"{fmt_usd(alt.plan_cost_usd)} with the optimised purchase mix"
    ]
    md, html = render_markdown(mi300x), render_html(mi300x)
    for text, written in ((md, str), (html, lambda s: str(escape(s)))):
        assert "this plan does not consider renting" not in text
        assert written(f"No cloud options: {reason}; the cheapest alternative to rent") in text
        assert written(f"compare owning with ({reason})") in text
        assert "Check first:" in text


def test_a_region_named_by_one_provider_says_the_others_rent_nothing_there() -> None:
    result = _plan(
        deployment="cloud",
        providers=["aws", "gcp", "azure"],
        regions=["us-east-1"],
        accelerators=[H100],
        workloads=[
            {
                "name": "train-llama-3-8b",
                "kind": "training",
                "model": {"preset": "llama-3-8b"},
                "training": {"seq_len": 8192, "global_batch": 512, "tokens": "160B"},
            }
        ],
    )
    # us-east-1 is an AWS name: neither gcp nor azure has any row there
    assert "us-east-1" in _regions("aws", H100)
    assert "us-east-1" not in _regions("gcp") | _regions("azure")
    assert set(result.cloud) == {"aws"}
    (note,) = result.cloud_notes
    assert note.startswith(
        "gcp and azure have no region named us-east-1 in gpufleet's catalog, for any accelerator"
    )
    assert note.endswith(f"so the plan prices renting {H100} from aws alone")
    # the nearest names each of them uses, first: gcp's us-east1, azure's eastus
    gcp_like = note.split("gcp's are named like ", 1)[1].split(",", 1)[0]
    azure_like = note.split("azure's are named like ", 1)[1].split(",", 1)[0]
    assert gcp_like in _regions("gcp")
    assert azure_like in _regions("azure")
    assert (gcp_like, azure_like) == ("us-east1", "eastus")
    logged = {a.name: a for a in result.assumptions}
    assert logged["cloud providers"].source == f"instances.csv: {note}"
    md, html = render_markdown(result), render_html(result)
    assert f"Not listed: {note}." in md
    assert f"<p>Not listed: {escape(note)}.</p>" in html
