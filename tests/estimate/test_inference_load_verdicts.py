"""Request-rate verdicts: what the estimate reports when the load is not served, per-GPU
throughput that adds up to the system figure, and a `hardware.count` too small for the rate.

Review findings: an SLO no concurrency meets reported the demand as throughput (12,800 tok/s
on 8 GPUs at $0.93/M, 100,000,000 tok/s at $0.00/M) and blamed the TPOT SLO when only a TTFT
SLO was set; per-GPU throughput was one replica's capacity (694, where 12,800 / 24 = 533); and
a count of 8 for a rate that needs 24 GPUs passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.catalog.pricing import cheapest_gpu_hour
from gpufleet.estimate.inference_estimate import InferenceEstimate, estimate_inference
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import validate

H100 = "h100-sxm5-80gb"
EXAMPLES = Path(__file__).parents[2] / "examples"
DEMAND = 50 * 256  # request_rate × output tokens of the 70B example


def spec(
    *,
    count: int | None = 24,
    tp: int | None = 8,
    engine: str = "tensorrt-llm",
    slo: dict[str, float] | None = None,
    rate: float = 50,
    model: str = "llama-2-70b",
    precision: str = "fp8",
) -> InferenceSpec:
    """The 70B example (examples/inference-llama2-70b.yaml) with the fields under test."""
    hardware: dict[str, Any] = {"accelerator": H100}
    if count is not None:
        hardware["count"] = count
    data: dict[str, Any] = {
        "kind": "inference",
        "model": {"preset": model},
        "serving": {
            "precision": precision,
            "engine": engine,
            "input_tokens": 1024,
            "output_tokens": 256,
            "request_rate": rate,
            "slo": slo if slo is not None else {"ttft_p99_ms": 1000, "tpot_p99_ms": 100},
        },
        "hardware": hardware,
    }
    if tp is not None:
        data["parallelism"] = {"tp": tp}
    return validate(InferenceSpec, data, "inline")


def assert_adds_up(e: InferenceEstimate) -> None:
    """System throughput, per-GPU throughput and cost describe the same fleet."""
    assert e.output_tokens_per_s_per_gpu * e.gpus == pytest.approx(e.output_tokens_per_s)
    price = cheapest_gpu_hour(e.accelerator)
    assert price is not None
    assert e.cost_per_million_output_tokens_usd == pytest.approx(
        e.gpus * price.usd_per_gpu_hour / (e.output_tokens_per_s * 3600) * 1e6
    )


def assert_serves_nothing(e: InferenceEstimate) -> None:
    """No slots within the SLO: nothing is served, so no throughput and no cost per token
    (b7: "0 slots" printed the demand, 1,280 tok/s, at $9.35/M)."""
    assert e.slots_per_replica == 0
    assert e.output_tokens_per_s == 0.0
    assert e.output_tokens_per_s_per_gpu == 0.0
    assert e.replica_capacity_output_tokens_per_s == 0.0
    assert e.cost_per_million_output_tokens_usd is None


def test_an_unmet_tpot_slo_serves_nothing() -> None:
    e = estimate_inference(spec(count=8, slo={"ttft_p99_ms": 1000, "tpot_p99_ms": 5}))
    assert (e.batch, e.fits, e.slo_met, e.gpus) == (0, False, False, 8)
    assert_serves_nothing(e)
    assert len(e.reasons) == 1
    assert e.reasons[0].startswith("no concurrency meets the time-per-output-token SLO (")
    assert "time-to-first-token" not in e.reasons[0]
    # fp8 at tp 8, the largest in an H100's scale-up domain: neither is offered again
    assert e.reasons[0].endswith("; try a faster accelerator or a looser SLO")


def test_an_unmet_ttft_slo_is_named_and_the_demand_is_not_reported() -> None:
    e = estimate_inference(
        spec(
            count=8,
            tp=None,
            engine="vllm",
            precision="bf16",
            rate=1e6,
            model="llama-3-70b",
            slo={"ttft_p99_ms": 1},
        )
    )
    assert (e.fits, e.slo_met, e.gpus) == (False, False, 8)
    assert_serves_nothing(e)
    assert e.reasons[0].startswith("no concurrency meets the time-to-first-token SLO (")
    assert "time-per-output-token" not in e.reasons[0]


@pytest.mark.parametrize(("engine", "tp"), [("tensorrt-llm", 8), ("vllm", None)])
def test_per_gpu_throughput_is_the_served_rate_over_every_gpu(engine: str, tp: int | None) -> None:
    e = estimate_inference(spec(count=64, tp=tp, engine=engine))
    assert (e.fits, e.slo_met, e.reasons) == (True, True, [])
    assert e.output_tokens_per_s == DEMAND
    assert e.output_tokens_per_s_per_gpu == pytest.approx(DEMAND / e.gpus)
    assert_adds_up(e)
    # The capacity is one replica's full rate: the fleet has headroom over the demand.
    assert e.replica_capacity_output_tokens_per_s * e.replicas >= DEMAND
    gpus_per_replica = e.tp * e.pp
    assert e.replica_capacity_output_tokens_per_s / gpus_per_replica > (
        e.output_tokens_per_s_per_gpu
    )


@pytest.mark.parametrize(("engine", "tp"), [("tensorrt-llm", 8), ("vllm", None)])
def test_a_count_too_small_for_the_rate_does_not_fit(engine: str, tp: int | None) -> None:
    e = estimate_inference(spec(count=8, tp=tp, engine=engine))
    assert e.gpus > 8
    assert e.fits is False
    assert e.slo_met is True  # the fleet it is sized to would meet them
    assert e.reasons == [
        f"the request rate needs {e.gpus} GPUs ({e.replicas} replicas at tp {e.tp}); "
        "hardware.count gives 8"
    ]
    assert e.output_tokens_per_s == DEMAND  # the sized fleet's figures, which add up
    assert_adds_up(e)


def test_a_count_that_covers_the_rate_fits() -> None:
    e = estimate_inference(spec(count=24))
    assert (e.gpus, e.fits, e.slo_met, e.reasons) == (24, True, True, [])


def test_batch_and_concurrency_fill_the_count_unchanged() -> None:
    base = spec(count=8, tp=4).model_dump()
    for load in ({"batch": 16}, {"concurrency": 32}):
        serving = {k: v for k, v in base["serving"].items() if k != "request_rate"} | load
        s = validate(InferenceSpec, {**base, "serving": serving}, "inline")
        e = estimate_inference(s)
        assert (e.gpus, e.fits) == (8, True)
        assert e.output_tokens_per_s == pytest.approx(e.replica_capacity_output_tokens_per_s * 2)
        assert_adds_up(e)


def test_an_unmet_slo_offers_only_remedies_that_change_something() -> None:
    """The reviewer's b7.yaml: llama-3-8b already in fp8 on 8 H100s with a 1 ms TTFT SLO was
    told to try fp8 weights, and its throughput (1,280 tok/s) and cost ($9.35/M) printed."""
    s = spec(count=8, tp=None, engine="vllm", rate=5, model="llama-3-8b", slo={"ttft_p99_ms": 1})
    e = estimate_inference(s)
    assert (e.fits, e.slo_met) == (False, False)
    assert_serves_nothing(e)
    assert "fp8 weights" not in e.reasons[0]
    assert e.tp == 8  # the largest tp the count allows: a larger one is not offered either
    assert e.reasons[0].endswith("; try a faster accelerator or a looser SLO")
    given = estimate_inference(
        spec(count=8, tp=1, engine="vllm", rate=5, model="llama-3-8b", slo={"ttft_p99_ms": 1})
    )
    assert given.reasons[0].endswith(
        "; try a larger tp (up to 8 in one node's scale-up domain), a faster accelerator, "
        "or a looser SLO"
    )
