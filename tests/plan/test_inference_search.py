"""`search_inference`: every candidate meets its SLO, costs rank, rejections account exactly."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.catalog.pricing import cheapest_gpu_hour
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference import continuous, max_sequences
from gpufleet.estimate.inference_estimate import MAX_UTILISATION, case_for
from gpufleet.plan.inference_search import (
    DEFAULT_ACCELERATORS,
    PRECISIONS,
    TP_CHOICES,
    ServingSearch,
    search_inference,
)
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import load, validate

EXAMPLE = Path(__file__).parents[2] / "examples" / "inference-llama2-70b.yaml"
ALL = 10_000  # a top_k that keeps every candidate


def make_spec(
    model: str = "llama-3-8b",
    *,
    engine: str = "vllm",
    input_tokens: int = 1024,
    output_tokens: int = 256,
    slo: dict[str, float] | None = None,
    request_rate: float | None = None,
    accelerator: str = "h100-sxm5-80gb",
) -> InferenceSpec:
    serving: dict[str, Any] = {
        "precision": "bf16",
        "engine": engine,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "slo": slo or {},
    }
    if request_rate is not None:
        serving["request_rate"] = request_rate
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


def cheapest(result: ServingSearch) -> float:
    costs = [
        c.cost_per_million_output_tokens_usd
        for c in result.top
        if c.cost_per_million_output_tokens_usd is not None
    ]
    return min(costs, default=math.inf)


@pytest.fixture(scope="module")
def example() -> InferenceSpec:
    return load(InferenceSpec, EXAMPLE)


SLO_SPECS = [
    pytest.param(None, id="example"),
    pytest.param(
        make_spec(slo={"tpot_p99_ms": 30, "ttft_p99_ms": 300}, request_rate=20),
        id="8b-rate",
    ),
    pytest.param(make_spec(slo={"tpot_p99_ms": 20}), id="8b-tpot-only"),
    pytest.param(make_spec("llama-2-70b", slo={"ttft_p99_ms": 250}), id="70b-ttft-only"),
    pytest.param(
        make_spec("mixtral-8x7b", slo={"tpot_p99_ms": 50, "ttft_p99_ms": 2000}, request_rate=3),
        id="moe-rate",
    ),
]


@pytest.mark.parametrize("given_spec", SLO_SPECS)
def test_every_candidate_meets_the_slo_it_reports(
    given_spec: InferenceSpec | None, example: InferenceSpec
) -> None:
    spec = given_spec or example
    result = search_inference(spec, top_k=ALL)
    slo = spec.serving.slo
    assert result.top
    for c in result.top:
        assert c.slo_met is True
        if slo.tpot_p99_ms is not None:
            assert c.tpot_ms <= slo.tpot_p99_ms
        if slo.ttft_p99_ms is not None:
            assert c.ttft_ms <= slo.ttft_p99_ms
        assert c.replicas >= 1
        assert c.replicas * c.tp == c.gpus
        assert c.concurrency >= 1
        assert c.tp in TP_CHOICES
        assert spec.model.heads % c.tp == 0


@pytest.mark.parametrize("given_spec", SLO_SPECS[:3])
def test_candidates_are_the_model_at_their_concurrency(
    given_spec: InferenceSpec | None, example: InferenceSpec
) -> None:
    spec = given_spec or example
    sv = spec.serving
    prompt, out = float(sv.mean_tokens("input")), float(sv.mean_tokens("output"))
    result = search_inference(spec, top_k=ALL)
    for c in result.top:
        case = case_for(spec, Assumptions(), accelerator=c.accelerator, precision=c.precision)
        t = np.array([float(c.tp)])
        cap = max_sequences(case, t, np.array([prompt + out]))[0]
        assert c.concurrency <= cap
        s = continuous(case, t, np.array([float(c.concurrency)]), prompt, out)
        assert c.tpot_ms == pytest.approx(float(s.tpot_s[0]) * 1e3, rel=1e-12)
        assert c.ttft_ms >= float(s.ttft_s[0]) * 1e3 * (1 - 1e-12)
        assert c.output_tokens_per_s_per_replica == pytest.approx(
            float(s.output_tokens_per_s[0]), rel=1e-12
        )
        price = cheapest_gpu_hour(c.accelerator)
        if price is None:
            assert c.cost_per_million_output_tokens_usd is None
            continue
        served = sv.request_rate * out if sv.request_rate else c.output_tokens_per_s_per_replica
        # With a request rate the replicas together carry it, with routing headroom.
        if sv.request_rate:
            assert c.replicas * c.output_tokens_per_s_per_replica >= served
            busy = sv.request_rate * float(s.request_time_s[0]) / (c.replicas * c.concurrency)
            assert busy <= MAX_UTILISATION
        assert c.cost_per_million_output_tokens_usd == pytest.approx(
            c.gpus * price.usd_per_gpu_hour / (served * 3600) * 1e6, rel=1e-12
        )


def test_example_top_3_is_sorted_by_cost(example: InferenceSpec) -> None:
    result = search_inference(example, top_k=3)
    assert 1 <= len(result.top) <= 3
    costs = [c.cost_per_million_output_tokens_usd or math.inf for c in result.top]
    assert all(math.isfinite(c) for c in costs)
    assert costs == sorted(costs)
    everything = search_inference(example, top_k=ALL)
    assert costs[0] == cheapest(everything)
    assert [c.accelerator for c in result.top] == [c.accelerator for c in everything.top[:3]]


def test_unpriced_candidates_rank_after_priced_ones() -> None:
    spec = make_spec(slo={"tpot_p99_ms": 50})
    top = search_inference(spec, ["mi300x", "h100-sxm5-80gb"], top_k=ALL).top
    priced = [c.cost_per_million_output_tokens_usd is not None for c in top]
    assert any(priced)
    assert not all(priced)  # MI300X has no list price in the catalog
    assert priced == sorted(priced, reverse=True)


def test_rejections_account_for_every_configuration(example: InferenceSpec) -> None:
    result = search_inference(example, top_k=ALL)
    total = len(DEFAULT_ACCELERATORS) * len(PRECISIONS) * len(TP_CHOICES)
    assert sum(result.rejected.values()) + len(result.top) == total
    # tensorrt-llm is NVIDIA-only: both AMD parts, every precision and tp.
    assert result.rejected["engine does not run on this vendor"] == 2 * len(PRECISIONS) * 4
    # fp8 needs FP8 matrix units: the two A100s lack them.
    assert result.rejected["precision not supported by the accelerator"] == 2 * len(TP_CHOICES)
    # l4 and l40s are PCIe cards without a scale-up domain.
    assert result.rejected["tp beyond the scale-up domain"] > 0


def test_an_engine_on_the_wrong_vendor_rejects_everything(example: InferenceSpec) -> None:
    result = search_inference(example, ["mi300x"], top_k=ALL)
    assert result.top == []
    assert dict(result.rejected) == {"engine does not run on this vendor": len(PRECISIONS) * 4}
    assert result.candidates_evaluated == 0


def test_an_impossible_slo_leaves_nothing() -> None:
    spec = make_spec(slo={"tpot_p99_ms": 0.001})
    result = search_inference(spec, top_k=ALL)
    assert result.top == []
    other = {"tp beyond the scale-up domain", "tp does not divide the heads"}
    no_memory = result.rejected["model and one request do not fit in memory"]
    reached = result.candidates_evaluated - sum(result.rejected[r] for r in other) - no_memory
    assert reached > 0
    assert result.rejected["no concurrency meets the SLO"] == reached


def test_top_k_limits_the_list(example: InferenceSpec) -> None:
    everything = search_inference(example, top_k=ALL)
    assert len(everything.top) > 5
    assert len(search_inference(example, top_k=5).top) == 5
    assert len(search_inference(example, top_k=1).top) == 1


# --- widening the TPOT SLO never costs more --------------------------------------------------

WIDENING = [
    pytest.param("llama-2-70b", rate, ttft, id=f"70b-rate{rate}-ttft{ttft}")
    for rate in (None, 0.5, 5, 50)
    for ttft in (200, 2000)
] + [
    pytest.param("llama-3-8b", rate, ttft, id=f"8b-rate{rate}-ttft{ttft}")
    for rate in (None, 0.5, 50)
    for ttft in (200, 2000)
]
TPOTS = (10, 15, 20, 30, 40, 60, 100, 200, 1000)
ACCELERATORS = ("h100-sxm5-80gb", "a100-sxm4-80gb", "l40s")


@pytest.mark.parametrize(("model", "rate", "ttft"), WIDENING)
def test_widening_the_tpot_slo_never_raises_the_cheapest_cost(
    model: str, rate: float | None, ttft: float
) -> None:
    costs = [
        cheapest(
            search_inference(
                make_spec(model, slo={"tpot_p99_ms": tpot, "ttft_p99_ms": ttft}, request_rate=rate),
                ACCELERATORS,
                top_k=ALL,
            )
        )
        for tpot in TPOTS
    ]
    assert costs == sorted(costs, reverse=True)
    assert math.isfinite(costs[-1])


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "llama-2-70b"]),
    accelerators=st.lists(
        st.sampled_from(["h100-sxm5-80gb", "a100-sxm4-80gb", "l4", "l40s", "h200-sxm-141gb"]),
        min_size=1,
        max_size=2,
        unique=True,
    ),
    rate=st.sampled_from([None, 0.2, 2.0, 20.0, 200.0]),
    ttft=st.sampled_from([150, 300, 1000, 5000]),
    tpot=st.floats(5, 200),
    factor=st.floats(1.01, 4),
    lengths=st.sampled_from([(128, 64), (1024, 256), (2048, 512)]),
)
def test_widening_the_tpot_slo_never_raises_the_cheapest_cost_property(
    *,
    model: str,
    accelerators: list[str],
    rate: float | None,
    ttft: float,
    tpot: float,
    factor: float,
    lengths: tuple[int, int],
) -> None:
    def cost(limit: float) -> float:
        spec = make_spec(
            model,
            slo={"tpot_p99_ms": limit, "ttft_p99_ms": ttft},
            request_rate=rate,
            input_tokens=lengths[0],
            output_tokens=lengths[1],
        )
        return cheapest(search_inference(spec, accelerators, ("bf16", "int8"), top_k=ALL))

    assert cost(tpot * factor) <= cost(tpot) * (1 + 1e-12)
