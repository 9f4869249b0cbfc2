"""`estimate inference` honours hardware.count (issue 27: a 70B fp8 service on 8 H100 was
estimated at tp 1 on 43 GPUs and $21/M tokens, where tp 2 serves it on 4 at $2)."""

from __future__ import annotations

from typing import Any

from gpufleet.estimate.inference_estimate import estimate_inference
from gpufleet.plan.inference_search import search_inference
from gpufleet.specs.inference import InferenceSpec

SPEC: dict[str, Any] = {
    "kind": "inference",
    "name": "chat-70b",
    "model": {"preset": "llama-3-70b"},
    "hardware": {"accelerator": "h100-sxm5-80gb", "count": 8},
    "serving": {
        "precision": "fp8",
        "engine": "vllm",
        "input_tokens": 1500,
        "output_tokens": 300,
        "request_rate": 10,
        "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 80},
    },
}


def test_the_estimate_serves_the_rate_on_the_fewest_gpus_within_the_count() -> None:
    spec = InferenceSpec.model_validate(SPEC)
    est = estimate_inference(spec)
    best = search_inference(spec, ["h100-sxm5-80gb"], precisions=["fp8"], top_k=1).top[0]
    assert est.gpus <= 8
    assert est.gpus == best.gpus  # the search's cheapest configuration uses as many
    assert est.slo_met
    assert any(a.name == "tp" for a in est.assumptions)


def test_a_count_too_small_for_the_rate_says_so() -> None:
    spec = InferenceSpec.model_validate(
        {
            **SPEC,
            "hardware": {"accelerator": "h100-sxm5-80gb", "count": 2},
            "serving": {**SPEC["serving"], "request_rate": 40},
        }
    )
    est = estimate_inference(spec)
    assert est.gpus > 2
    assert any("hardware.count gives 2" in r for r in est.reasons)
    assert est.fits is False  # the rate does not fit on the GPUs there are


def test_a_given_layout_is_kept() -> None:
    spec = InferenceSpec.model_validate({**SPEC, "parallelism": {"tp": 4}})
    assert estimate_inference(spec).tp == 4
