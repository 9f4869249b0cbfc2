"""Slots against requests in flight: a request rate is sized on slots (the largest batch
within the SLOs), while the rate itself keeps fewer requests in flight (Little's law) at a
faster TPOT. `estimate inference` printed the slots as "509 in flight per replica" for
examples/inference-llama2-70b.yaml, whose 50 req/s over 3 replicas keep far fewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference import continuous
from gpufleet.estimate.inference_estimate import InferenceEstimate, case_for, estimate_inference
from gpufleet.estimate.inference_load import load_point
from gpufleet.plan.inference_search import search_inference
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import load, validate

EXAMPLE = Path(__file__).parents[2] / "examples" / "inference-llama2-70b.yaml"


@pytest.fixture(scope="module")
def example() -> InferenceSpec:
    return load(InferenceSpec, EXAMPLE)


@pytest.fixture(scope="module")
def estimate(example: InferenceSpec) -> InferenceEstimate:
    return estimate_inference(example)


def _spec(load_field: dict[str, Any], **parallelism: int) -> InferenceSpec:
    data: dict[str, Any] = {
        "kind": "inference",
        "model": {"preset": "llama-2-70b"},
        "serving": {
            "precision": "fp8",
            "engine": "tensorrt-llm",
            "input_tokens": 1024,
            "output_tokens": 256,
            "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 100},
            **load_field,
        },
        "hardware": {"accelerator": "h100-sxm5-80gb"},
    }
    if parallelism:
        data["parallelism"] = parallelism
    return validate(InferenceSpec, data, "inline")


def test_the_example_keeps_fewer_in_flight_than_its_slots(estimate: InferenceEstimate) -> None:
    e = estimate
    assert (e.mode, e.tp, e.replicas, e.slots_per_replica) == ("request_rate", 8, 3, 509)
    assert e.arrival_rate_per_replica_per_s == pytest.approx(50 / 3)
    assert e.in_flight_per_replica is not None
    assert e.tpot_at_load_ms is not None
    assert e.request_time_at_load_s is not None
    # Little's law, with the estimate's own figures at the load
    assert e.in_flight_per_replica == pytest.approx(50 / 3 * e.request_time_at_load_s)
    # Had each request decoded at the full-slot TPOT, 16.7 × (0.14 + 256 × 0.0925) ≈ 397
    # would be in flight: still not the 509 slots, and the smaller batch decodes faster.
    conservative = 50 / 3 * (e.ttft_ms + 256 * e.tpot_ms) / 1e3
    assert conservative == pytest.approx(397, abs=1)
    assert e.in_flight_per_replica < conservative < e.slots_per_replica
    assert e.tpot_at_load_ms < e.tpot_ms  # tpot_ms stays at full slots: the SLO check
    assert e.tpot_ms <= 100


def test_the_in_flight_count_is_the_fixed_point_of_its_own_tpot(
    example: InferenceSpec, estimate: InferenceEstimate
) -> None:
    """n = λ S(n): evaluated afresh at the reported n, the model gives back that n, the
    reported TPOT and time in system (the mean prompt's first token, then 255 tokens)."""
    n = estimate.in_flight_per_replica
    assert n is not None
    case = case_for(example, Assumptions())
    s = continuous(case, np.array([8.0]), np.array([n]), 1024.0, 256.0)
    assert float(s.tpot_s[0]) * 1e3 == pytest.approx(estimate.tpot_at_load_ms, rel=1e-3)
    assert float(s.request_time_s[0]) == pytest.approx(estimate.request_time_at_load_s, rel=1e-3)
    assert 50 / 3 * float(s.request_time_s[0]) == pytest.approx(n, rel=1e-3)


def test_a_heavier_rate_keeps_more_in_flight_at_a_slower_tpot(example: InferenceSpec) -> None:
    case = case_for(example, Assumptions())
    points = [
        load_point(case, 8, 1, arrival_rate_per_s=rate, slots=509, prompt=1024, out=256)
        for rate in (1.0, 5.0, 16.0, 19.0)
    ]
    flights = [p.in_flight for p in points]
    tpots = [p.tpot_s for p in points]
    assert flights == sorted(flights)
    assert tpots == sorted(tpots)
    for p in points:
        assert p.in_flight == pytest.approx(p.arrival_rate_per_s * p.request_time_s)
        assert p.in_flight < 509


def test_a_rate_the_slots_cannot_turn_over_reports_them_full(example: InferenceSpec) -> None:
    case = case_for(example, Assumptions())
    p = load_point(case, 8, 1, arrival_rate_per_s=1_000.0, slots=509, prompt=1024, out=256)
    assert p.in_flight == 509


@pytest.mark.parametrize(("field", "value"), [("batch", 16), ("concurrency", 32)])
def test_a_batch_or_concurrency_is_its_own_load(field: str, value: int) -> None:
    e = estimate_inference(_spec({field: value}, tp=4))
    assert e.slots_per_replica == e.batch == value
    assert e.in_flight_per_replica == value
    assert e.tpot_at_load_ms == e.tpot_ms
    assert e.arrival_rate_per_replica_per_s is None


def test_pipeline_stages_keep_littles_law() -> None:
    e = estimate_inference(_spec({"request_rate": 10}, tp=4, pp=2))
    assert e.pp == 2
    assert e.in_flight_per_replica is not None
    assert e.request_time_at_load_s is not None
    assert e.arrival_rate_per_replica_per_s == pytest.approx(10 / e.replicas)
    assert e.in_flight_per_replica == pytest.approx(10 / e.replicas * e.request_time_at_load_s)
    assert e.in_flight_per_replica <= e.slots_per_replica


def test_estimate_and_search_agree_on_the_load(
    example: InferenceSpec, estimate: InferenceEstimate
) -> None:
    found = search_inference(example, ["h100-sxm5-80gb"], precisions=["fp8"], top_k=10)
    tp8 = next(c for c in found.top if c.tp == 8)
    assert (tp8.slots, tp8.replicas) == (estimate.slots_per_replica, estimate.replicas)
    assert tp8.in_flight == pytest.approx(estimate.in_flight_per_replica)
    assert tp8.tpot_at_load_ms == pytest.approx(estimate.tpot_at_load_ms)
    assert tp8.concurrency == tp8.slots  # the name the planner reads


def test_a_plan_names_slots_and_the_load_apart(example: InferenceSpec) -> None:
    """What the planner reports for a service: slots as slots, TTFT and TPOT said to be at
    full slots, and the rate's in-flight requests and TPOT beside them (the plan said
    "Concurrency 187" for 187 slots where 50 req/s keep far fewer per replica)."""
    c = search_inference(example, ["h100-sxm5-80gb"], precisions=["fp8"], top_k=1).top[0]
    params = c.plan_parallelism("tensorrt-llm")
    metrics = c.plan_metrics()
    assert "concurrency" not in params
    assert params["slots_per_replica"] == c.slots
    assert metrics["tpot_at_full_slots_ms"] == c.tpot_ms
    assert metrics["ttft_at_full_slots_ms"] == c.ttft_ms
    assert metrics["in_flight_per_replica"] == c.in_flight
    assert metrics["tpot_at_load_ms"] == c.tpot_at_load_ms
    assert metrics["max_concurrency_per_replica"] == float(c.slots)  # the ranking reads it
    assert c.in_flight is not None
    assert c.in_flight < c.slots
