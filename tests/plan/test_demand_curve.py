"""The demand curve and the owned fleet sized from it (issue 27: "a plan with several runs over
a year and diurnal serving sizes the owned fleet from the demand curve and rents the bursts")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpufleet.cli.main import main
from gpufleet.errors import UserError
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.demand_curve import fleet_for, split, total_curve
from gpufleet.plan.model import WorkloadChoice
from gpufleet.plan.planner import plan
from gpufleet.specs.load import load, validate
from gpufleet.specs.plan import PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
MODEL = {"preset": "llama-3-8b"}
TRAINING = {"seq_len": 4096, "global_batch": 256, "tokens": "1B"}
SERVING = {"input_tokens": 512, "output_tokens": 128, "request_rate": 1}


def _spec(*workloads: dict[str, Any], horizon_years: float = 1.0) -> PlanSpec:
    return validate(
        PlanSpec,
        {"kind": "plan", "horizon_years": horizon_years, "workloads": list(workloads)},
        "inline",
    )


def _train(name: str, start: str = "0d") -> dict[str, Any]:
    return {"name": name, "kind": "training", "model": MODEL, "training": TRAINING, "start": start}


def _serve(name: str, trough: float = 1.0, peak_hour: int = 14) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "inference",
        "model": MODEL,
        "serving": SERVING,
        "daily_trough": trough,
        "peak_hour": peak_hour,
    }


def _choice(name: str, kind: str, gpus: int, *, days: float = 0.0, tp: int = 1) -> WorkloadChoice:
    return WorkloadChoice(
        workload=name,
        kind=kind,
        accelerator="h100-sxm5-80gb",
        gpus=gpus,
        parallelism={"tp": tp},
        metrics={"wall_clock_days_with_failures": days},
        gpu_hours=gpus * days * 24 if kind == "training" else None,
        cost_usd=None,
        meets_constraints=True,
    )


def test_a_daily_shape_by_hand() -> None:
    """4 replicas of TP 2 at the peak (15:00); at the trough (03:00) 25 % of the rate needs
    ceil(4 × 0.25) = 1 replica, 2 GPUs; at 09:00 the cosine is half-way: ceil(4 × 0.625) = 3."""
    spec = _spec(_serve("chat", trough=0.25, peak_hour=15))
    curve = total_curve(spec, [_choice("chat", "inference", 8, tp=2)])
    assert curve.size == 8_760
    assert curve[15] == 8
    assert curve[3] == 2
    assert curve[9] == 6
    assert curve[15 + 24] == 8  # every day alike


def test_runs_that_do_not_overlap_never_add_up() -> None:
    spec = _spec(_train("a"), _train("b", start="100d"))
    choices = [_choice("a", "training", 64, days=30), _choice("b", "training", 32, days=30)]
    curve = total_curve(spec, choices)
    assert curve.max() == 64  # not 96
    assert curve[24 * 10] == 64
    assert curve[24 * 110] == 32
    assert curve[24 * 60] == 0
    assert fleet_for(curve, "peak") == 64
    assert fleet_for(curve, "p90") == int(np.ceil(np.percentile(curve, 90)))


def test_a_run_that_does_not_fit_is_rented_whole_and_the_hours_add_up() -> None:
    spec = _spec(_serve("chat"), _train("small"), _train("big", start="60d"))
    choices = [
        _choice("chat", "inference", 8),
        _choice("small", "training", 16, days=10),
        _choice("big", "training", 64, days=10),
    ]
    dc = split(spec, choices, 32, "p90")
    assert dc.rented_runs == ["big"]  # 8 serving + 64 > 32; 8 + 16 fits
    assert dc.rented_serving_gpu_hours == 0
    serving_hours = 8 * 8_760
    run_hours = 16 * 10 * 24 + 64 * 10 * 24
    assert dc.owned_gpu_hours + dc.rented_gpu_hours == pytest.approx(serving_hours + run_hours)
    assert dc.rented_gpu_hours == pytest.approx(64 * 10 * 24)
    # serving above the fleet is rented hour by hour
    dc = split(spec, choices, 6, "p50")
    assert dc.rented_serving_gpu_hours == pytest.approx(2 * 8_760)
    assert dc.rented_runs == ["small", "big"]


def test_by_default_the_owned_fleet_is_every_workloads_gpus_as_before() -> None:
    """Runs starting together and a flat service: the peak is the sum (no change for the
    shipped single-run examples)."""
    result = plan(load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml"))
    dc = result.demand_curve
    assert dc is not None
    assert dc.peak_gpus == result.recommendation.total_gpus
    assert dc.rented_gpu_hours == 0
    assert result.design is not None
    assert result.design.gpus == dc.fleet_gpus


def test_a_year_of_runs_owns_the_percentile_and_rents_the_rest() -> None:
    result = plan(load(PlanSpec, EXAMPLES / "plan-year-of-runs.yaml"))
    dc = result.demand_curve
    assert dc is not None
    assert dc.policy == "p90"
    assert dc.peak_gpus < result.recommendation.total_gpus  # the runs do not overlap
    assert dc.rented_runs == ["sweep-70b"]
    assert dc.rent_usd is not None
    assert dc.rent_usd > 0
    tco = result.cost.tco
    assert tco["burst_rent"] == pytest.approx(dc.rent_usd)
    v = RentOrOwn.from_json(result.cost.rent_or_own)
    assert v.own_usd == pytest.approx(tco["total"])
    assert v.own_burst_rent_usd == pytest.approx(dc.rent_usd)
    assert v.work_utilization == pytest.approx(dc.owned_gpu_hours / (dc.fleet_gpus * 8_760))
    assert result.summary is not None
    assert f"up to {dc.peak_gpus:,.0f} ×" in result.summary.decision


def test_a_run_outside_the_horizon_is_refused_with_what_to_change(tmp_path: Path) -> None:
    data = {"kind": "plan", "horizon_years": 1, "workloads": [_train("late", start="400d")]}
    path = tmp_path / "late.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["check", str(path)]) == 2
    spec = _spec(_train("spills", start="8759h"))  # the run takes about 3 hours
    with pytest.raises(UserError, match="spills starts at day 365 and runs"):
        plan(spec)
