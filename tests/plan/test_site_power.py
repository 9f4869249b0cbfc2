"""A power-capped site (issue 27): "we have 2 MW" gives the largest fleet that fits, and a
plan that needs more is told so: exit 1 on-prem, renting (with the reason) when both are
allowed. The largest fleet is checked by hand and against one more system."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.assemble import InfeasiblePlanError
from gpufleet.plan.design import design_cluster
from gpufleet.plan.design.cluster import SitePowerError
from gpufleet.plan.planner import plan
from gpufleet.specs.load import load, validate
from gpufleet.specs.plan import OnPremPreferences, PlanSpec

H100 = "h100-sxm5-80gb"
EXAMPLES = Path(__file__).parents[2] / "examples"


def _facility_kw(gpus: int, prefs: OnPremPreferences) -> float:
    return design_cluster(H100, gpus, prefs, None, Assumptions()).power_kw["facility"]


def test_inference_only_nodes_by_hand() -> None:
    """Without a scale-out fabric or shared storage a DGX H100 draws its 10.2 kW maximum:
    at PUE 1.3 that is 13.26 kW, so 100 kW holds floor(100 / 13.26) = 7 nodes, 56 GPUs."""
    prefs = OnPremPreferences(pue=1.3, site_power_kw=100.0)
    d = design_cluster(H100, 8, prefs, None, Assumptions())
    assert d.site_max_gpus == 56
    assert d.site_power_kw == 100.0
    free = OnPremPreferences(pue=1.3)
    assert _facility_kw(56, free) == pytest.approx(7 * 10.2 * 1.3)
    assert _facility_kw(56, free) <= 100.0 < _facility_kw(64, free)


@pytest.mark.parametrize("site_kw", [50.0, 700.0, 2_000.0])
def test_the_largest_fleet_fits_and_one_more_system_does_not(site_kw: float) -> None:
    prefs = OnPremPreferences(site_power_kw=site_kw)
    d = design_cluster(H100, 8, prefs, None, Assumptions())
    assert d.site_max_gpus is not None
    assert d.site_max_gpus > 0
    free = OnPremPreferences()  # the same design without the cap
    assert _facility_kw(d.site_max_gpus, free) <= site_kw < _facility_kw(d.site_max_gpus + 8, free)


def test_a_fleet_over_the_site_says_what_would_fit() -> None:
    prefs = OnPremPreferences(site_power_kw=100.0)
    with pytest.raises(SitePowerError, match=r"holds at most 56 × h100-sxm5-80gb \(7 dgx-h100"):
        design_cluster(H100, 64, prefs, None, Assumptions())
    with pytest.raises(SitePowerError, match="cannot power one dgx-h100"):
        design_cluster(H100, 8, OnPremPreferences(site_power_kw=5.0), None, Assumptions())


def _shared_cluster(**on_prem: object) -> PlanSpec:
    data = load(PlanSpec, EXAMPLES / "plan-shared-cluster.yaml").model_dump(exclude_unset=True)
    data["on_prem"] = on_prem
    return validate(PlanSpec, data, "inline")


def test_an_on_prem_plan_over_the_site_is_infeasible_with_advice(tmp_path: Path) -> None:
    spec = _shared_cluster(site_power_kw=1_000)  # not even the B200 fleet fits (1,420 kW)
    with pytest.raises(InfeasiblePlanError) as exc:
        plan(spec)
    for accelerator in spec.accelerators:  # each candidate's reason, not the first one's
        assert any(
            line.startswith(f"on-prem on {accelerator}: the site's 1,000 kW holds at most")
            for line in exc.value.advice
        )
    path = tmp_path / "spec.yaml"
    path.write_text(spec.model_dump_json(), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["plan", str(path), "--out", str(out)]) == 1
    assert not out.exists()  # nothing written


def test_an_on_prem_plan_owns_the_accelerator_whose_fleet_fits_the_site() -> None:
    """The ranking costs each accelerator's plan: at 1,500 kW the H100 and H200 fleets
    (1,168 GPUs, 2,127 kW) do not fit, the B200 one (560 GPUs, 1,420 kW) does. The plan used
    to stop at the first accelerator by list price (H100) and call itself infeasible."""
    result = plan(_shared_cluster(site_power_kw=1_500))
    assert result.recommendation.accelerator == "b200-sxm-192gb"
    assert result.design is not None
    assert result.design.power_kw["facility"] <= 1_500
    assert not result.alternatives  # the others have no plan to compare
    left_out = {a.name: a.source for a in result.assumptions if a.name.startswith("ranking[")}
    assert set(left_out) == {"ranking[h100-sxm5-80gb]", "ranking[h200-sxm-141gb]"}
    assert (
        "the site's 1,500 kW holds at most 816 × h100-sxm5-80gb"
        in left_out["ranking[h100-sxm5-80gb]"]
    )


def test_a_plan_that_may_rent_rents_when_owning_does_not_fit() -> None:
    data = _shared_cluster(site_power_kw=1_500).model_dump(exclude_unset=True)
    data["deployment"] = "both"
    result = plan(validate(PlanSpec, data, "inline"))
    assert result.recommendation.deployment == "cloud"
    assert result.design is None
    assert any("owning does not fit the site" in s for s in result.recommendation.why)


def test_a_plan_within_the_site_shows_the_headroom() -> None:
    result = plan(_shared_cluster(site_power_kw=2_500))
    d = result.design
    assert d is not None
    assert d.power_kw["facility"] <= 2_500
    assert d.site_max_gpus is not None
    assert d.site_max_gpus >= d.gpus
