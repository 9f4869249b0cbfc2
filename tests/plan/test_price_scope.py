"""A plan's providers and regions bound its prices; an accelerator with no price there is
never taken as free (issue 27: `budget_usd: 1000` chose MI300X, which has no cloud price, and
`regions: [eu-west-3]` with H100 crashed the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.catalog.instances import load_instances
from gpufleet.catalog.pricing import (
    ANYWHERE,
    PriceScope,
    cheapest_gpu_hour,
    no_price_reason,
    offered_in,
)
from gpufleet.cli.main import main
from gpufleet.errors import SpecError
from gpufleet.plan.planner import InfeasiblePlanError, plan
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

H100 = "h100-sxm5-80gb"

TRAIN_8B = {
    "name": "pretrain",
    "kind": "training",
    "model": {"preset": "llama-3-8b"},
    "training": {"seq_len": 4096, "global_batch": 512, "tokens": "100B", "precision": "bf16"},
    "constraints": {"deadline": "30d"},
}


def _spec(**fields: Any) -> PlanSpec:
    return validate(PlanSpec, {"kind": "plan", "workloads": [TRAIN_8B], **fields}, "inline")


def _by_hand(accelerator: str, scope: PriceScope) -> float | None:
    """The cheapest on-demand GPU-hour in the scope, straight from the catalog rows."""
    prices = [
        float(r.on_demand_usd_per_hour) / float(r.accelerators_count)
        for r in load_instances()
        if r.accelerator == accelerator
        and r.is_whole_price
        and r.on_demand_usd_per_hour is not None
        and r.accelerators_count
        and r.accelerators_count >= 1
        and scope.admits(r.provider, r.region)
    ]
    return min(prices) if prices else None


@pytest.mark.parametrize(
    "scope",
    [
        ANYWHERE,
        PriceScope(("aws",)),
        PriceScope(("azure",)),
        PriceScope(("aws", "gcp", "azure"), ("us-east-1",)),
        PriceScope(("aws",), ("eu-west-3",)),
    ],
)
def test_cheapest_gpu_hour_stays_in_scope(scope: PriceScope) -> None:
    price = cheapest_gpu_hour(H100, scope)
    expected = _by_hand(H100, scope)
    if expected is None:
        assert price is None
        return
    assert price is not None
    assert price.usd_per_gpu_hour == pytest.approx(expected)
    assert scope.admits(price.provider, price.region)


def test_a_provider_filter_changes_the_price_it_quotes() -> None:
    """providers: [azure] used to quote the cheapest price anywhere (GCP's)."""
    azure = cheapest_gpu_hour(H100, PriceScope(("azure",)))
    assert azure is not None
    assert azure.provider == "azure"


def test_no_price_reason_names_where_it_is_offered() -> None:
    scope = PriceScope(("aws", "gcp", "azure"), ("eu-west-3",))
    assert cheapest_gpu_hour(H100, scope) is None
    reason = no_price_reason(H100, scope)
    first = offered_in(H100)[0]
    assert "eu-west-3" in reason
    assert first in reason
    assert "in the catalog" in no_price_reason("mi300x", ANYWHERE)


def test_a_budget_never_picks_an_unpriced_accelerator() -> None:
    spec = _spec(
        deployment="both",
        accelerators=[H100, "mi300x"],
        workloads=[{**TRAIN_8B, "constraints": {"deadline": "30d", "budget_usd": 1000}}],
    )
    with pytest.raises(InfeasiblePlanError) as err:
        plan(spec)
    advice = "\n".join(err.value.advice)
    # each is held to the headline its plan would give: MI300X, with no cloud price, to the
    # on-prem TCO `deployment: both` costs it at (once "budget_usd cannot be checked"; an
    # accelerator with no headline at all is never within budget: test_budget_headline.py)
    assert "pretrain on mi300x: over budget: the on-prem TCO over 3 years" in advice
    assert f"pretrain on {H100}: over budget: the cost for this work with the optimised" in advice


def test_a_generous_budget_still_plans_on_a_priced_accelerator() -> None:
    spec = _spec(
        deployment="both",
        accelerators=[H100, "mi300x"],
        workloads=[{**TRAIN_8B, "constraints": {"deadline": "30d", "budget_usd": 1e6}}],
    )
    result = plan(spec)
    assert result.recommendation.accelerator == H100
    choice = result.recommendation.workloads[0]
    assert choice.cost_usd is not None
    assert choice.cost_usd <= 1e6


def test_a_cloud_plan_in_a_region_without_the_accelerator_is_infeasible() -> None:
    spec = _spec(deployment="cloud", regions=["eu-west-3"])  # default candidates
    with pytest.raises(InfeasiblePlanError) as err:
        plan(spec)
    assert "no cloud price for h100-sxm5-80gb in eu-west-3" in "\n".join(err.value.advice)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"regions": ["us-east-9"]}, "regions: 'us-east-9' is not a region of"),
        (
            {"deployment": "cloud", "regions": ["eu-west-3"], "accelerators": [H100]},
            "accelerators: no cloud price for h100-sxm5-80gb in eu-west-3",
        ),
    ],
)
def test_check_refuses_regions_without_offers(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(**fields)
    assert message in str(err.value)


def test_the_crashing_specs_exit_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The two specs that raised a Jinja UndefinedError: now exit 1 with the reason."""
    spec = tmp_path / "plan.yaml"
    spec.write_text(
        "kind: plan\nname: budget\ndeployment: cloud\nworkloads:\n"
        "  - name: pretrain\n    kind: training\n    model: {preset: llama-3-8b}\n"
        "    training: {seq_len: 4096, global_batch: 512, tokens: 100B, precision: bf16}\n"
        "    constraints: {deadline: 30d, budget_usd: 1000}\n"
    )
    code = main(["plan", str(spec), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out.out + out.err
    assert "no cloud price for mi300x" in out.out + out.err
    assert not (tmp_path / "out").exists()


def test_an_on_prem_plan_never_buys_an_accelerator_with_no_purchase_price() -> None:
    """An on-prem L40S plan printed 'saves 72.0 %' (a cloud mix) and no TCO."""
    spec = validate(
        PlanSpec,
        {
            "kind": "plan",
            "deployment": "on-prem",
            "accelerators": ["l40s", H100],
            "workloads": [TRAIN_8B],
        },
        "inline",
    )
    result = plan(spec)
    assert result.recommendation.accelerator == H100
    assert "total" in result.cost.tco
    only_l40s = spec.model_copy(update={"accelerators": ["l40s"]})
    with pytest.raises(InfeasiblePlanError) as err:
        plan(only_l40s)
    assert "no on-prem purchase price for l40s" in "\n".join(err.value.advice)
