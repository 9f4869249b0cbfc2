"""Issue 28 (item 4): a layout near or over the HBM limit needs memory engineering, and the
estimate names the single changes that fit with headroom. The memory model's parts that
changed (FSDP's fp32 shard, JAX's remat policy, dp × cp sharding) are pinned here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpufleet.estimate.efficiency import framework_profile
from gpufleet.estimate.training import Layouts, evaluate
from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.estimate.training_memory import (
    MEMORY_ENGINEERING,
    NEAR_LIMIT_FRACTION,
    fitting_changes,
)
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec
from gpufleet.validation.training_modern import case_of, load_rows


def _estimate(parallelism: dict[str, Any], count: int = 64) -> TrainingEstimate:
    spec = {
        "kind": "training",
        "model": "llama-3-70b",
        "training": {
            "seq_len": 8192,
            "global_batch": 256,
            "precision": "bf16",
            "framework": "megatron-core",
        },
        "hardware": {"accelerator": "h100-sxm5-80gb", "count": count},
        "parallelism": parallelism,
    }
    return estimate_training(validate(TrainingSpec, spec, "inline"))


def _engineering(est: TrainingEstimate) -> list[str]:
    return [r for r in est.reasons if r.startswith(MEMORY_ENGINEERING)]


def test_a_layout_over_the_limit_names_the_layouts_that_fit() -> None:
    est = _estimate(
        {"tp": 4, "pp": 2, "dp": 8, "microbatch": 1, "recompute": "none", "zero_stage": 1}
    )
    assert not est.fits
    (finding,) = _engineering(est)
    assert "over the limit" in finding
    assert "layouts that fit with headroom" in finding
    assert "pp " in finding or "recompute full" in finding


def test_a_layout_with_headroom_has_no_finding() -> None:
    est = _estimate(
        {"tp": 8, "pp": 8, "dp": 1, "microbatch": 1, "recompute": "full", "zero_stage": 1}
    )
    assert est.fits
    total = est.memory_per_gpu_bytes.total
    assert total <= NEAR_LIMIT_FRACTION * est.memory_capacity_bytes
    assert _engineering(est) == []


def test_every_change_named_fits_with_headroom() -> None:
    row = next(r for r in load_rows() if r["id"] == "amd252-mi300x-llama-31-70b-bf16-s8192-b4")
    case = case_of(row)
    lay = Layouts.single(dp=8, mb=4, zero=3, recompute="none")
    limit = NEAR_LIMIT_FRACTION * case.hw.memory_bytes
    for label, total in fitting_changes(case, lay, limit):
        assert total <= limit, label


def _jax_case() -> Any:
    row = next(r for r in load_rows() if r["id"] == "maxtext-v5p-32b-1x128")
    return case_of(row)


def test_fsdp_keeps_no_bf16_shard_beside_the_fp32_one() -> None:
    """FSDP's sharded parameter is the fp32 master: 16 bytes per parameter in all (4 param
    + 4 grad + 8 Adam), where DeepSpeed's ZeRO-3 keeps a bf16 shard beside it (18)."""
    case = _jax_case()
    lay = Layouts.single(tp=4, dp=16, mb=1, zero=3, recompute="full")

    def state(ev: Any) -> float:
        return float(ev.weights_bytes[0] + ev.optimizer_bytes[0])

    fsdp = evaluate(case, lay)
    deepspeed = evaluate(replace(case, profile=framework_profile("deepspeed")), lay)
    assert state(fsdp) == pytest.approx(12 / 14 * state(deepspeed))


def test_jax_minimal_remat_keeps_less_than_megatron_selective() -> None:
    case = _jax_case()
    lay = Layouts.single(tp=4, dp=16, mb=8, zero=3, recompute="selective")
    jax_bytes = float(evaluate(case, lay).activations_bytes[0])
    megatron = replace(case, profile=framework_profile("megatron-core"))
    megatron_bytes = float(
        evaluate(megatron, replace(lay, zero=np.array([1]))).activations_bytes[0]
    )
    assert jax_bytes < 0.8 * megatron_bytes


def test_optimizer_state_is_sharded_over_dp_times_cp() -> None:
    case = replace(_jax_case(), profile=framework_profile("megatron-core"))
    one = evaluate(case, Layouts.single(tp=4, dp=8, cp=1, zero=1))
    two = evaluate(case, Layouts.single(tp=4, dp=4, cp=2, zero=1))
    assert np.isclose(float(one.optimizer_bytes[0]), float(two.optimizer_bytes[0]))
