"""`estimate inference` honours hardware.count (issue 27: a 70B fp8 service on 8 H100 was
estimated at tp 1 on 43 GPUs and $21/M tokens, where tp 2 serves it on 4 at $2)."""

from __future__ import annotations

from typing import Any

import pytest

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


# The reviewer's cnt.yaml: llama-2-70b in bf16 (138 GB of weights) on a count of 1 H100 was
# put at tp 2 and printed "GPUs 1 × 2 = 2" and "load fits yes".
CNT: dict[str, Any] = {
    "kind": "inference",
    "name": "cnt",
    "model": {"preset": "llama-2-70b"},
    "serving": {"precision": "bf16", "engine": "vllm", "input_tokens": 1024, "output_tokens": 256},
    "hardware": {"accelerator": "h100-sxm5-80gb", "count": 1},
}


@pytest.mark.parametrize("load", [{"concurrency": 4}, {"batch": 4}])
def test_batch_and_concurrency_stay_within_the_count(load: dict[str, int]) -> None:
    spec = InferenceSpec.model_validate({**CNT, "serving": {**CNT["serving"], **load}})
    est = estimate_inference(spec)
    assert (est.tp, est.replicas, est.gpus) == (1, 1, 1)
    assert est.fits is False
    assert est.slo_met is False
    assert est.reasons[0].startswith("does not fit: 4 requests of 1280 tokens need ")
    assert est.reasons[-1] == (
        "hardware.count gives 1 GPU: tp 2 (2 GPUs) would hold the load; raise "
        "hardware.count to 2 or more, or see what else would help above"
    )
