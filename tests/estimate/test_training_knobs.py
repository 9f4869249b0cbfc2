"""Issue 28: knobs a spec leaves out are searched, not defaulted, and the layout it gives
stays fixed. A 405B run at pp 16 used to be estimated with one virtual stage and microbatch
1 (half its step in the pipeline bubble, and over memory), where a real run interleaves."""

from __future__ import annotations

from typing import Any

from gpufleet.estimate.efficiency import framework_profile
from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

LAYOUT = {"tp": 8, "pp": 16, "dp": 128}


def _estimate(parallelism: dict[str, Any], framework: str = "nemo") -> TrainingEstimate:
    spec = {
        "kind": "training",
        "model": "llama-3.1-405b",
        "training": {
            "seq_len": 8192,
            "global_batch": 2048,
            "precision": "bf16",
            "framework": framework,
        },
        "hardware": {"accelerator": "h100-sxm5-80gb", "count": 16384},
        "parallelism": parallelism,
    }
    return estimate_training(validate(TrainingSpec, spec, "inline"))


def test_left_out_knobs_are_searched_and_the_layout_stays() -> None:
    searched = _estimate(LAYOUT)
    defaults = _estimate(
        {**LAYOUT, "microbatch": 1, "virtual_stages": 1, "zero_stage": 1, "recompute": "selective"}
    )
    p = searched.parallelism
    assert (p.tp, p.pp, p.dp) == (8, 16, 128)  # what the spec gave
    assert "virtual stages" in p.chosen_by
    assert defaults.parallelism.chosen_by == "spec"
    assert p.virtual_stages > 1  # the interleaved schedule
    assert searched.fits
    assert not defaults.fits  # the old defaults did not even fit in memory
    assert searched.bubble_time_s < defaults.bubble_time_s / 2
    assert searched.step_time_s < defaults.step_time_s


def test_knobs_the_spec_gives_stay_as_given() -> None:
    est = _estimate({**LAYOUT, "microbatch": 2, "recompute": "full"})
    p = est.parallelism
    assert (p.microbatch, p.recompute) == (2, "full")
    assert "microbatch" not in p.chosen_by
    assert "virtual stages" in p.chosen_by


def test_a_stack_without_interleaving_is_never_given_it() -> None:
    """DeepSpeed's pipeline engine runs plain 1F1B: the search offers it no virtual stages."""
    assert framework_profile("deepspeed").virtual_stages == (1,)
    est = _estimate(LAYOUT, framework="deepspeed")
    assert est.parallelism.virtual_stages == 1
