"""Requests as placed: whole GPUs, MIG slices, fractions, and slices sized from a workload."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.catalog.mig import get_mig_profile
from gpufleet.sched.requests import FRACTION_STEPS, requests_for, workload_memory_bytes
from gpufleet.specs.jobs import JobSpec

ACCS = ["h100-sxm5-80gb", "a100-sxm4-80gb", "l4"]


def job(**kw: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "j", "team": "t", **kw})


def test_whole_gpus_on_every_accepted_type() -> None:
    reqs = requests_for(job(gpus=8, workers=4, accelerators=["h100"]), ACCS)
    assert [(r.accelerator, r.total_gpus) for r in reqs] == [("h100-sxm5-80gb", 32)]


def test_mig_profile_only_where_it_exists() -> None:
    reqs = requests_for(job(mig_profile="3g.40gb"), ACCS)
    assert {r.accelerator for r in reqs} == {"h100-sxm5-80gb", "a100-sxm4-80gb"}


@pytest.mark.parametrize(("fraction", "eighths"), [(0.25, 2), (0.3, 3), (0.125, 1), (0.9, 8)])
def test_fractions_round_up_to_eighths(fraction: float, eighths: int) -> None:
    (req, *_) = requests_for(job(gpu_fraction=fraction), ACCS)
    assert req.eighths == eighths


WORKLOAD = {
    "model": {"preset": "llama-3-8b"},
    "serving": {"precision": "fp8", "input_tokens": 1000, "output_tokens": 200, "concurrency": 4},
}


def test_workload_gets_the_smallest_mig_profile_that_holds_it() -> None:
    j = job(kind="inference", workload=WORKLOAD)
    reqs = {r.accelerator: r for r in requests_for(j, ACCS)}
    need = workload_memory_bytes(j, "h100-sxm5-80gb")
    chosen = reqs["h100-sxm5-80gb"]
    assert chosen.kind == "mig"
    assert chosen.mig_profile is not None
    assert get_mig_profile("h100-sxm5-80gb", chosen.mig_profile).memory_bytes >= need
    assert get_mig_profile("h100-sxm5-80gb", "1g.10gb").memory_bytes < need  # smaller fails
    # no FP8 units on A100: not an acceptable type for an fp8 workload
    assert "a100-sxm4-80gb" not in reqs
    # no MIG on L4: a fraction of the GPU in eighths, enough for the memory
    l4 = reqs["l4"]
    assert l4.kind == "fraction"
    assert l4.eighths / FRACTION_STEPS * 24e9 >= workload_memory_bytes(j, "l4")


def test_more_load_needs_a_bigger_slice() -> None:
    small = job(kind="inference", workload=WORKLOAD)
    big = job(
        kind="inference",
        workload={
            **WORKLOAD,
            "serving": {**WORKLOAD["serving"], "concurrency": 64, "input_tokens": 4000},
        },
    )
    s = requests_for(small, ["h100-sxm5-80gb"])[0]
    b = requests_for(big, ["h100-sxm5-80gb"])[0]
    assert s.mig_profile is not None
    assert b.mig_profile is not None
    assert (
        get_mig_profile("h100-sxm5-80gb", b.mig_profile).memory_bytes
        > get_mig_profile("h100-sxm5-80gb", s.mig_profile).memory_bytes
    )


@pytest.mark.parametrize("engine", ["vllm", "tensorrt-llm"])
def test_a_sized_slice_holds_the_load_under_the_engines_own_memory_rule(engine: str) -> None:
    """The memory asked is what the engine needs to hold the load by its own rule: vLLM's
    share of the device caps the whole footprint, TensorRT-LLM's is a share of what is free
    after the weights, so it asks fixed + KV / u (dividing all of it by u over-asked)."""
    import numpy as np

    from gpufleet.estimate.assumptions import Assumptions
    from gpufleet.estimate.inference import fixed_bytes, kv_bytes_per_token_per_gpu
    from gpufleet.estimate.inference_estimate import case_for
    from gpufleet.specs.inference import InferenceSpec

    serving = {**WORKLOAD["serving"], "engine": engine}
    j = job(kind="inference", workload={**WORKLOAD, "serving": serving})
    need = workload_memory_bytes(j, "h100-sxm5-80gb")
    spec = InferenceSpec.model_validate(
        {**WORKLOAD, "kind": "inference", "serving": serving, "hardware": {"accelerator": "h100"}}
    )
    case = case_for(spec, Assumptions())
    tp = np.array([1.0])
    fixed = float(fixed_bytes(case, tp)[0])
    kv = float(kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, tp)[0]) * 4 * 1200
    u = case.engine.gpu_memory_utilization
    if engine == "vllm":
        assert need == pytest.approx((fixed + kv) / u)
    else:
        assert need == pytest.approx(fixed + kv / u)
        assert need < (fixed + kv) / u
