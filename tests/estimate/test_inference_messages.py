"""Inference spec and estimate messages say what is wrong in the spec's own fields and in
units a person reads (ms, GB with enough decimals), and nothing else.

Review findings: `request_rate: .inf` blamed "serving.slo: arrival_rate_per_s"; a rate of
1e12 blamed the SLO ("no replica count up to max_replicas=100000 meets ttft_p99_s=1.0 s");
input_tokens {mean: 2000, p99: 1000} added "serving.input_tokens.constrained-int: expected a
whole number, got a mapping"; 79.33 GB needed of 79.30 GB read "79.3 GB of 79.3 GB"; and
`precision: fp4` was refused though B200 and GB200 list FP4 throughput.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gpufleet.errors import SpecError, UserError
from gpufleet.estimate.inference_estimate import estimate_inference
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import validate

BASE: dict[str, Any] = {
    "kind": "inference",
    "name": "m",
    "model": {"preset": "llama-3-8b"},
    "serving": {
        "precision": "fp8",
        "engine": "vllm",
        "input_tokens": 1024,
        "output_tokens": 256,
        "request_rate": 5,
        "slo": {"ttft_p99_ms": 1000},
    },
    "hardware": {"accelerator": "h100-sxm5-80gb", "count": 8},
}


def _data(**serving: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["serving"].update(serving)
    return data


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        validate(InferenceSpec, data, "spec.yaml")
    return caught.value.problems


@pytest.mark.parametrize(
    "rate", [float("inf"), yaml.safe_load("request_rate: .inf")["request_rate"]]
)
def test_an_infinite_rate_is_refused_in_its_own_field(rate: float) -> None:
    assert _problems(_data(request_rate=rate)) == [
        "serving.request_rate: must be a finite number of requests per second, got inf"
    ]


def test_a_rate_beyond_any_fleet_says_the_rate_needs_too_many_replicas() -> None:
    spec = validate(InferenceSpec, _data(request_rate=1e12), "spec.yaml")
    with pytest.raises(UserError) as caught:
        estimate_inference(spec)
    message = str(caught.value)
    assert message.startswith("serving.request_rate: 1e+12 req/s needs more than 100,000 replicas")
    assert "ttft_p99_s" not in message


def test_an_unordered_length_reports_only_its_order() -> None:
    assert _problems(_data(input_tokens={"mean": 2000, "p99": 1000})) == [
        "serving.input_tokens: p99 (1000) must be at least mean (2000)"
    ]


def test_a_length_that_is_not_a_count_reports_only_that() -> None:
    assert _problems(_data(output_tokens="many")) == [
        "serving.output_tokens: expected a whole number, got 'many'"
    ]


def test_a_need_just_above_the_memory_reads_above() -> None:
    """The reviewer's c1134.yaml: 1,134 requests where 1,133 fit at tp 4."""
    data = _data(precision="fp8", engine="tensorrt-llm", concurrency=1134)
    del data["serving"]["request_rate"]
    data["model"] = {"preset": "llama-2-70b"}
    data["hardware"] = {"accelerator": "h100-sxm5-80gb", "count": 32}
    data["parallelism"] = {"tp": 4, "pp": 1}
    e = estimate_inference(validate(InferenceSpec, data, "spec.yaml"))
    assert e.fits is False
    assert e.reasons[0] == (
        "does not fit: 1134 requests of 1280 tokens need 79.33 GB per GPU of 79.30 GB "
        "usable; at most 1133 fit at tp 4"
    )


def test_gb_pair_adds_decimals_only_where_needed() -> None:
    from gpufleet.estimate.inference_load import gb_pair

    assert gb_pair(79.33e9, 79.30e9) == ("79.33 GB", "79.30 GB")
    assert gb_pair(143.2e9, 77.3e9) == ("143.2 GB", "77.3 GB")
    assert gb_pair(70e9, 77.3e9) == ("70.0 GB", "77.3 GB")


def test_fp4_weights_are_served_where_the_catalog_lists_fp4() -> None:
    data = _data(precision="fp4", concurrency=64)
    del data["serving"]["request_rate"]
    data["hardware"] = {"accelerator": "b200-sxm-192gb", "count": 8}
    e = estimate_inference(validate(InferenceSpec, data, "spec.yaml"))
    fp8 = copy.deepcopy(data)
    fp8["serving"]["precision"] = "fp8"
    f = estimate_inference(validate(InferenceSpec, fp8, "spec.yaml"))
    assert (e.precision, e.kv_precision, e.fits) == ("fp4", "fp8", True)
    assert e.memory_per_gpu_bytes.weights < f.memory_per_gpu_bytes.weights
    assert e.tpot_ms < f.tpot_ms


def test_fp4_is_refused_where_the_catalog_lists_none() -> None:
    assert _problems(_data(precision="fp4")) == [
        "serving.precision: fp4 is not supported by h100-sxm5-80gb (the catalog lists no "
        "FP4 throughput); use fp8 or bf16"
    ]
