"""Why a service cannot be served, said so a person can act on it.

Llama-3.1-405B in bf16 on H100s read "cannot serve it: 4 × model and one request do not fit"
(the 4 counted the TP sizes rejected) beside "relax the serving SLOs", which cannot help: the
search tries TP 1 to 8 on one node and no pipeline parallelism, so no SLO makes 101.5 GB of
weights per GPU fit in 85.9 GB."""

from __future__ import annotations

from typing import Any

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet_services import size_service
from gpufleet.plan.inference_search import ONE_NODE_ONLY, search_inference
from gpufleet.specs.fleet import PlanInferenceEntry
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import validate


def _spec(
    model: str = "llama-3.1-405b",
    *,
    accelerator: str = "h100-sxm5-80gb",
    slo: dict[str, float] | None = None,
) -> InferenceSpec:
    serving: dict[str, Any] = {
        "precision": "bf16",
        "engine": "tensorrt-llm",
        "input_tokens": 1024,
        "output_tokens": 256,
        "request_rate": 10,
        "slo": slo or {"ttft_p99_ms": 2000, "tpot_p99_ms": 100},
    }
    return validate(
        InferenceSpec,
        {
            "kind": "inference",
            "model": {"preset": model},
            "serving": serving,
            "hardware": {"accelerator": accelerator},
        },
        "inline",
    )


def test_405b_in_bf16_on_h100_says_what_was_tried_why_and_what_would_help() -> None:
    result = search_inference(_spec(), ["h100-sxm5-80gb"], precisions=["bf16"])
    assert result.top == []
    why = result.why_none()
    # what was tried: TP 1..8 on one node, no pipeline parallelism
    assert why.startswith(
        f"llama-3.1-405b in bf16 does not fit on h100-sxm5-80gb at TP 1, 2, 4, or 8 "
        f"{ONE_NODE_ONLY}: "
    )
    # why, in per-GPU numbers: weights against what the engine may use, at each TP
    assert "at TP 8 the weights alone take 101.5 GB per GPU" in why
    assert "against 85.9 GB usable" in why
    assert "202.9 GB at TP 4, 405.9 GB at TP 2, 811.7 GB at TP 1" in why
    # what would help, each with its number, and honest about multi-node serving
    assert "What would help: fp8 or int4 weights (51.3 or 26.9 GB per GPU at TP 8)" in why
    assert "a GPU with at least 104.6 GB of memory at TP 8" in why
    assert "PP 2 × TP 8 = 16 GPUs would hold 51.3 GB of weights per GPU" in why
    assert "which gpufleet does not size" in why
    # no count of TP sizes read as a count of models, and no SLO advice
    assert " × model" not in why
    assert "SLO" not in why


def test_remedies_name_only_weights_the_accelerator_runs() -> None:
    """The A100 has no FP8 matrix units: int4 is offered, fp8 is not."""
    why = search_inference(_spec(accelerator="a100-sxm4-80gb"), ["a100-sxm4-80gb"], ["bf16"])
    text = why.why_none()
    assert "What would help: int4 weights (" in text
    assert "fp8" not in text


def test_a_larger_tp_that_fits_but_misses_the_slo_gets_no_memory_remedies() -> None:
    """Llama-2-70B in bf16 fits an H100 from TP 2; with an impossible TPOT nothing serves it,
    and memory is not why: TP 1's shortfall is stated, no remedy for it is."""
    result = search_inference(
        _spec("llama-2-70b", slo={"tpot_p99_ms": 0.001}), ["h100-sxm5-80gb"], ["bf16"]
    )
    why = result.why_none()
    assert why.startswith("llama-2-70b in bf16 does not fit on h100-sxm5-80gb at TP 1: ")
    assert "What would help" not in why
    assert ONE_NODE_ONLY not in why
    assert why.endswith("no concurrency meets the SLO on h100-sxm5-80gb in bf16 at TP 2, 4 and 8")


def test_a_search_that_finds_one_has_nothing_to_explain() -> None:
    result = search_inference(_spec(), ["h100-sxm5-80gb"], precisions=["fp8"])
    assert result.top
    assert result.why_none() == ""


def _service(**extra: object) -> PlanInferenceEntry:
    return PlanInferenceEntry.model_validate(
        {
            "kind": "inference",
            "name": "big",
            "model": {"preset": "llama-3.1-405b"},
            "precision": "bf16",
            "request_rate": 5.0,
            "slo": {"ttft_p99_ms": 2000},
            **extra,
        }
    )


def test_a_service_whose_weights_do_not_fit_is_not_blamed_on_the_slo() -> None:
    sized = size_service("t", _service(), "h100-sxm5-80gb", Assumptions())
    assert isinstance(sized, str)
    assert sized.startswith(
        "t/big on h100-sxm5-80gb: cannot serve it: llama-3.1-405b in bf16 does not fit"
    )
    assert "within the SLO" not in sized
    assert " × model" not in sized
    assert "101.5 GB per GPU" in sized


def test_a_service_that_misses_its_slo_still_says_so() -> None:
    entry = _service(model={"preset": "llama-3-8b"}, slo={"ttft_p99_ms": 0.01})
    sized = size_service("t", entry, "h100-sxm5-80gb", Assumptions())
    assert sized == (
        "t/big on h100-sxm5-80gb: cannot serve it within the SLO: no concurrency meets the "
        "SLO on h100-sxm5-80gb in bf16 at TP 1, 2, 4 and 8"
    )
