"""Issue 28 (items 1-2): what a framework overlaps, at what cost, and which efficiency rows
an accelerator's figures rest on (borrowed ones said out loud)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpufleet.catalog.models import get_model_preset
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for, family_values, framework_profile
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.training import Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_comm import overlap_exposed
from gpufleet.estimate.training_estimate import estimate_training
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

K = 0.3


def _a(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def test_communication_inside_the_window_costs_only_interference() -> None:
    exposed = overlap_exposed(_a(1.0), _a(4.0), K)
    assert exposed == pytest.approx([K * 1.0])  # hidden, but the compute slows while it runs


def test_communication_longer_than_the_window_is_exposed_beyond_it() -> None:
    exposed = overlap_exposed(_a(5.0), _a(2.0), K)
    assert exposed == pytest.approx([5.0 - 2.0 + K * 2.0])


def test_no_window_exposes_everything_and_zero_communication_costs_nothing() -> None:
    assert overlap_exposed(_a(3.0, 0.0), _a(0.0, 2.0), K) == pytest.approx([3.0, 0.0])


def _case(
    framework: str, precision: str = "bf16", accelerator: str = "h100-sxm5-80gb"
) -> TrainingCase:
    hw = resolve_hardware(accelerator, precision, Assumptions())  # type: ignore[arg-type]
    eff, _ = efficiency_for(hw.accelerator)
    return TrainingCase(
        arch=get_model_preset("llama-3-70b").arch(),
        seq_len=8192,
        global_batch=512,
        precision=precision,  # type: ignore[arg-type]
        dropout=False,
        hw=hw,
        eff=eff,
        profile=framework_profile(framework),
    )


LAYOUT = Layouts.single(tp=8, pp=2, dp=64, mb=1, vs=4, zero=1, recompute="selective")


def test_a_profile_with_overlap_off_exposes_all_its_data_parallel_traffic() -> None:
    case = _case("megatron-core")
    off = replace(case.profile, dp_overlap=False, param_gather_overlap=False, tp_overlap=False)
    on_ev = evaluate(case, LAYOUT)
    off_ev = evaluate(replace(case, profile=off), LAYOUT)
    assert off_ev.dp_exposed_s == pytest.approx(off_ev.dp_comm_s)
    assert on_ev.dp_comm_s == pytest.approx(off_ev.dp_comm_s)  # same traffic either way
    # The reduce-scatter hides under a backward, the all-gather under a forward: at least
    # the interference share stays exposed, never more than the traffic itself.
    k = case.eff.overlap_interference
    assert k * on_ev.dp_comm_s <= on_ev.dp_exposed_s < off_ev.dp_exposed_s
    assert on_ev.step_time_s < off_ev.step_time_s
    assert on_ev.exposed_comm_s < off_ev.exposed_comm_s


def test_the_gradient_all_gather_cannot_hide_under_the_backward() -> None:
    """Without param-gather overlap, the distributed optimizer's all-gather is exposed in
    full: the weights it carries exist only after the optimizer step."""
    case = _case("megatron-core")
    grads_only = replace(case.profile, param_gather_overlap=False)
    both = evaluate(case, LAYOUT)
    one = evaluate(replace(case, profile=grads_only), LAYOUT)
    assert one.dp_exposed_s > both.dp_exposed_s


def test_attention_stays_in_bf16_in_fp8_training() -> None:
    """FP8 speeds up the GEMMs; the attention core keeps its bf16 time."""
    long = Layouts.single(tp=1, pp=1, dp=8, mb=1, zero=1, recompute="none", sp=False)
    bf16 = evaluate(_case("megatron-core", "bf16"), long)
    fp8 = evaluate(_case("megatron-core", "fp8"), long)
    hopper = family_values("hopper")
    gemm_ratio = 2 * hopper["fp8_gemm_peak_fraction"] / hopper["gemm_peak_fraction"]
    speedup = float(bf16.step_time_s[0] / fp8.step_time_s[0])
    assert 1.0 < speedup < gemm_ratio  # attention, casts and HBM work do not speed up


def _estimate(accelerator: str, **training: Any) -> Any:
    spec = {
        "kind": "training",
        "model": "llama-3-8b",
        "training": {"seq_len": 8192, "global_batch": 64, "precision": "bf16", **training},
        "hardware": {"accelerator": accelerator, "count": 8},
    }
    return estimate_training(validate(TrainingSpec, spec, "inline"))


def test_default_framework_is_megatron_core_with_its_overlaps_stated() -> None:
    est = _estimate("h100-sxm5-80gb")
    notes = {a.name: a for a in est.assumptions}
    framework = notes["framework[megatron-core]"]
    assert "DP grad reduce with backward" in framework.value
    assert "TP comm with GEMMs" in framework.value
    assert (
        "hopper family, fitted on training_modern.csv" in notes["efficiency[h100-sxm5-80gb]"].source
    )


def test_an_accelerator_without_rows_borrows_with_a_penalty_and_says_so() -> None:
    eff, cal = efficiency_for("h100-pcie-80gb")
    hopper, _ = efficiency_for("h100-sxm5-80gb")
    assert not cal.calibrated
    assert cal.borrowed_from == "hopper"
    assert cal.penalty < 1
    assert eff.gemm_peak_fraction == pytest.approx(hopper.gemm_peak_fraction * cal.penalty)
    source = {a.name: a.source for a in _estimate("h100-pcie-80gb").assumptions}
    assert "borrowed from the hopper family" in source["efficiency[h100-pcie-80gb]"]


def test_a_family_without_bf16_rows_says_which_value_it_takes() -> None:
    _, cal = efficiency_for("b200-sxm-192gb")
    assert cal.calibrated
    assert any("Hopper's fitted value" in note for note in cal.borrowed_parameters)
