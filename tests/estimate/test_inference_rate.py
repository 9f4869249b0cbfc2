"""`replicas_within_slos`: the one rule that sizes a serving pool for a request rate, held
to every stated SLO (TTFT, TPOT, e2e), the p99 queue wait included."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.estimate.inference_rate import (
    RateMissError,
    ReplicaPoint,
    replicas_within_slos,
    wait_budget_s,
)
from gpufleet.estimate.queueing import mgc_wait
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import validate

POINT = ReplicaPoint(slots=1, prefill_s=0.07, tpot_s=0.0114, request_time_s=2.98)


def _spec(slo: dict[str, float], rate: float | None = 1.0) -> InferenceSpec:
    serving: dict[str, Any] = {"input_tokens": 1024, "output_tokens": 256, "slo": slo}
    serving.update({"request_rate": rate} if rate is not None else {"concurrency": 4})
    return validate(
        InferenceSpec,
        {
            "kind": "inference",
            "model": {"preset": "llama-2-70b"},
            "serving": serving,
            "hardware": {"accelerator": "h100-sxm5-80gb"},
        },
        "test",
    )


def test_the_wait_budget_is_the_tighter_of_ttft_and_e2e() -> None:
    assert wait_budget_s(_spec({"ttft_p99_ms": 2000}), POINT) == ("ttft_p99_ms", 2.0)
    field, budget = wait_budget_s(_spec({"ttft_p99_ms": 2000, "e2e_p99_ms": 3000}), POINT)
    assert field == "e2e_p99_ms"
    assert budget == pytest.approx(3.0 - 255 * 0.0114)
    assert wait_budget_s(_spec({}), POINT)[1] == float("inf")


def test_replicas_meet_the_e2e_slo_and_one_fewer_does_not() -> None:
    spec = _spec({"ttft_p99_ms": 2000, "e2e_p99_ms": 3000})
    replicas, q = replicas_within_slos(spec, POINT)
    ttft_only, _ = replicas_within_slos(_spec({"ttft_p99_ms": 2000}), POINT)
    assert replicas > ttft_only  # the e2e SLO binds here

    def e2e_ms(r: int) -> float:
        w = mgc_wait(1.0, POINT.request_time_s, 1.0, r * POINT.slots)
        return (POINT.prefill_s + w.p99_wait_s + 255 * POINT.tpot_s) * 1e3

    assert e2e_ms(replicas) <= 3000 < e2e_ms(replicas - 1)
    assert q.utilisation <= 0.85


@pytest.mark.parametrize(
    ("slo", "field"),
    [
        pytest.param({"tpot_p99_ms": 10}, "tpot_p99_ms", id="tpot"),
        pytest.param({"ttft_p99_ms": 50}, "ttft_p99_ms", id="ttft"),
        pytest.param({"e2e_p99_ms": 2900}, "e2e_p99_ms", id="e2e"),
    ],
)
def test_an_slo_missed_before_any_queueing_names_its_field(
    slo: dict[str, float], field: str
) -> None:
    with pytest.raises(RateMissError) as caught:
        replicas_within_slos(_spec(slo), POINT)
    assert (caught.value.field, caught.value.unqueued) == (field, True)


def test_a_cap_too_low_is_a_miss_of_the_binding_slo() -> None:
    with pytest.raises(RateMissError) as caught:
        replicas_within_slos(_spec({"e2e_p99_ms": 3000}), POINT, max_replicas=5)
    assert (caught.value.field, caught.value.unqueued) == ("e2e_p99_ms", False)


def test_a_spec_without_a_rate_is_refused() -> None:
    with pytest.raises(ValueError, match="request_rate"):
        replicas_within_slos(_spec({}, rate=None), POINT)
