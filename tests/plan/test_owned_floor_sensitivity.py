"""The on-prem sensitivity never prices an owned fleet too small to run the planned work.

The tornado prices owning at another utilization as the fleet that delivers the same
GPU-hours: gpus × base utilization ÷ utilization. Its floor counted only the GPUs that serve
around the clock, so a fleet set by a training gang shrank below the gang: the wizard's
shared-cluster answers (an 8B run on 128 GPUs beside a 16-GPU service, 144 owned) priced
+20 % utilization at $5,747,347 = $6,896,816 ÷ 1.2, a 120-GPU fleet, and the default 70B
plan's owning tornado priced about 213 GPUs for a 256-GPU run. The floor is now the GPUs the
owned fleet's work holds at once, in whole nodes, and it holds for every row (a faster run,
at a higher MFU, holds the same gang). Expected values below come from `on_prem_tco` and the
arithmetic stated, not from the tornado.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.tco import OnPremInputs, on_prem_tco
from gpufleet.plan.cost.tornado import SensitivityInputs, sensitivity
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.specs.load import validate
from gpufleet.specs.plan import OnPremPreferences, PlanSpec

H100 = "h100-sxm5-80gb"
PREFS = OnPremPreferences()
HORIZON = 3 * HOURS_PER_YEAR


def _rows(rows: list[dict[str, float | str]]) -> dict[str, dict[str, float | str]]:
    return {str(r["factor"]): r for r in rows}


def _owned(gpus: int, held: int | None = None) -> OnPremInputs:
    nodes = gpus // 8
    kw: dict[str, Any] = {} if held is None else {"held_gpus": held}
    return OnPremInputs(gpus, nodes, 10.2 * nodes, 13.26 * nodes, PREFS, 0.8, **kw)


def _tco(gpus: int) -> float:
    nodes = gpus // 8
    return on_prem_tco(
        H100, gpus, nodes, 10.2 * nodes, 13.26 * nodes, PREFS, 3.0, 0.8, Assumptions()
    )["total"]


def _gang_demand() -> Demand:
    # 16 GPUs serving every hour, and one 128-GPU run for 500 hours
    return Demand(
        H100,
        16,
        128 * 500.0,
        0.0,
        0.0,
        HORIZON,
        burst_gangs=((128, 128 * 500.0),),
        burst_spans=((0.0, 500.0),),
    )


def test_a_fleet_set_by_a_gang_is_no_cheaper_run_busier() -> None:
    """144 GPUs own a 128-GPU gang beside 16 serving GPUs: +20 % utilization prices the
    144 (the work holds them all at once), −20 % prices 144 × 0.8 / 0.64 = 180."""
    base = _tco(144)
    rows = _rows(sensitivity(SensitivityInputs("on-prem", _gang_demand(), {}, _owned(144))))
    u = rows["utilization"]
    assert float(u["base_usd"]) == pytest.approx(base)
    assert float(u["high_usd"]) == pytest.approx(base)  # was base / 1.2: 120 GPUs
    assert float(u["low_usd"]) == pytest.approx(base * 144 * 0.8 / (0.8 * 0.8) / 144)
    assert u["high_label"] == "+20 %: 144 GPUs (no fewer: in use at once)"
    assert u["low_label"] == "-20 %: 180 GPUs"
    assert "never fewer than the 144 GPUs its work holds at once" in str(u["note"])
    # fewer training GPU-hours (a higher MFU) do not shrink the gang either
    assert float(rows["mfu"]["high_usd"]) == pytest.approx(base)
    assert float(rows["mfu"]["low_usd"]) > base


def test_the_floor_is_in_whole_nodes_and_below_it_the_fleet_still_shrinks() -> None:
    """The policy's figure, 100 GPUs at once, is 13 whole 8-GPU nodes = 104: a 144-GPU
    fleet at +20 % would deliver the same GPU-hours with 144 × 0.8 / 0.96 = 120 > 104."""
    base = _tco(144)
    inputs = SensitivityInputs("on-prem", _gang_demand(), {}, _owned(144, held=100))
    u = _rows(sensitivity(inputs))["utilization"]
    assert float(u["high_usd"]) == pytest.approx(base * 120 / 144)
    # 130 at once is 17 whole nodes, 136 GPUs, above the 120: the floor binds
    inputs = SensitivityInputs("on-prem", _gang_demand(), {}, _owned(144, held=130))
    u = _rows(sensitivity(inputs))["utilization"]
    assert float(u["high_usd"]) == pytest.approx(base * math.ceil(130 / 8) * 8 / 144)
    assert "130 GPUs its work holds at once, 136 in whole nodes" in str(u["note"])


# the wizard answers ex2.yaml of the review, as the spec it wrote
SHARED: dict[str, Any] = {
    "kind": "plan",
    "name": "shared-cluster",
    "deployment": "on-prem",
    "expected_utilization": 0.8,
    "on_prem": {"rack_power_kw": 60, "electricity_usd_per_kwh": 0.1},
    "accelerators": [H100],
    "workloads": [
        {
            "name": "pretrain-8b",
            "kind": "training",
            "team": "research",
            "model": {"preset": "llama-3-8b"},
            "training": {"seq_len": 8192, "global_batch": 512, "tokens": "2T"},
            "constraints": {"deadline": "30d"},
        },
        {
            "name": "chat",
            "kind": "inference",
            "team": "product",
            "model": {"preset": "llama-3-70b"},
            "serving": {
                "precision": "fp8",
                "engine": "vllm",
                "input_tokens": {"mean": 1024, "p99": 3000},
                "output_tokens": 256,
                "request_rate": 50,
                "slo": {"ttft_p99_ms": 1000},
            },
        },
    ],
}


@pytest.fixture(scope="module")
def shared() -> Plan:
    return plan(validate(PlanSpec, SHARED, "inline"))


def test_the_shared_cluster_prices_no_fleet_below_its_gang(shared: Plan) -> None:
    design, curve, summary = shared.design, shared.demand_curve, shared.summary
    assert design is not None
    assert curve is not None
    assert summary is not None
    gpus = {c.workload: c.gpus for c in shared.recommendation.workloads}
    assert gpus["pretrain-8b"] == 128
    # own the peak: the run and the service together, in whole 8-GPU nodes
    assert design.gpus == math.ceil((gpus["pretrain-8b"] + gpus["chat"]) / 8) * 8 == 144
    base = shared.cost.tco["total"]
    prefs = OnPremPreferences(rack_power_kw=60)

    def tco(**kw: Any) -> float:
        p = prefs.model_copy(update=kw.pop("prefs", {}))
        return on_prem_tco(
            H100,
            design.gpus,
            design.nodes,
            design.power_kw["it"],
            design.power_kw["facility"],
            p,
            3.0,
            0.8,
            Assumptions(),
            system=design.system,
            **kw,
        )["total"]

    assert tco() == pytest.approx(base)
    rows = _rows(shared.cost.sensitivity)
    u = rows["utilization"]
    assert float(u["high_usd"]) == pytest.approx(base)  # was $5,747,347 = base / 1.2
    assert float(u["low_usd"]) == pytest.approx(base * 0.8 / 0.64)
    # the likely range by hand: below the base only the cheap GPU price and cheap power
    # (utilization, MFU and failure rate cannot shrink the 144 GPUs); above it every row
    gpu_low, gpu_high = tco(gpu_price_scale=0.7), tco(gpu_price_scale=1.3)
    power_low = tco(prefs={"electricity_usd_per_kwh": 0.05})
    power_high = tco(prefs={"electricity_usd_per_kwh": 0.15})
    for factor in ("mfu", "failure_rate"):
        assert min(float(rows[factor]["low_usd"]), float(rows[factor]["high_usd"])) >= base - 1e-6
    low = base - math.hypot(base - gpu_low, base - power_low)
    up = [gpu_high - base, base * 0.25, power_high - base]
    up += [
        max(float(rows[f]["low_usd"]), float(rows[f]["high_usd"])) - base
        for f in ("mfu", "failure_rate")
    ]
    assert summary.cost_low_usd == pytest.approx(low)
    assert summary.cost_high_usd == pytest.approx(base + math.sqrt(sum(x * x for x in up)))
    drivers = {d.factor: d for d in summary.drivers}
    assert drivers["utilization"].high_label == "+20 %: 144 GPUs (no fewer: in use at once)"


def test_the_default_70b_plans_owning_tornado_keeps_its_256_gpu_run() -> None:
    """The wizard's default 70B plan rents; its owning tornado priced +20 % as
    $12,207,560 / 1.2, about 213 GPUs, for a run on 256."""
    spec = validate(
        PlanSpec,
        {
            "kind": "plan",
            "name": "train-llama-3-70b",
            "deployment": "both",
            "accelerators": [H100],
            "expected_utilization": 0.7,
            "workloads": [
                {
                    "name": "train-llama-3-70b",
                    "kind": "training",
                    "model": {"preset": "llama-3-70b"},
                    "training": {"seq_len": 8192, "global_batch": 512, "tokens": "1.4T"},
                }
            ],
        },
        "inline",
    )
    result = plan(spec)
    assert result.design is not None
    run = result.recommendation.workloads[0].gpus
    assert result.design.gpus == math.ceil(run / 8) * 8
    owning = (
        result.cost.sensitivity
        if result.recommendation.deployment == "on-prem"
        else result.cost.sensitivity_alternative
    )
    u = _rows(owning)["utilization"]
    assert float(u["high_usd"]) == pytest.approx(result.cost.tco["total"])
    assert float(u["low_usd"]) == pytest.approx(result.cost.tco["total"] / 0.8)
