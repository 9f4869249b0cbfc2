"""Decode at large batch (issue 28 item 5): the step is composed of a weight read shared by
the batch, KV reads per request and GEMMs, so memory-bound attention stays visible when the
linear layers are compute-bound; chunked prefill shares the step; HBM size bounds the batch.

Datasheet figures (accelerators.csv): H100 SXM5 3.35 TB/s and 80 GB, H200 4.8 TB/s and
141 GB, the same 989 / 1979 TFLOP/s dense bf16 / fp8; B200 9 PFLOP/s dense FP4.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.engines import engine
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.inference import (
    BYTES_PER_WEIGHT,
    InferenceCase,
    chunked_mixed_s,
    continuous,
    decode_step,
    max_sequences,
    mixed_step,
    prefill,
    weight_bytes_per_gpu,
)
from gpufleet.estimate.params import embedding_params, parameter_count

from .test_inference_model import arch, arr, make_case

H100, H200 = "h100-sxm5-80gb", "h200-sxm-141gb"


def test_kv_reads_grow_the_step_when_compute_dominates_the_linear_layers() -> None:
    case = make_case("llama-3-8b", precision="fp8")
    contexts = arr(1024, 2048, 4096)
    step = decode_step(case, np.ones(3), np.full(3, 512.0), contexts)
    # 512 requests: the GEMMs take longer than the weight read (past the ridge) ...
    assert np.all(step.gemm_s > 1.5 * step.weights_s)
    # ... yet the step still grows with batch × context by exactly the KV read time.
    assert np.all(np.diff(step.seconds) > 0)
    assert np.allclose(np.diff(step.seconds), np.diff(step.kv_s), rtol=1e-9)
    # 8 KV heads × 128 dims × 2 (K, V) × 32 layers × 1 byte = 64 KiB per cached fp8 token.
    kv_bytes = 512 * 4096 * 32 * 8 * 128 * 2 * 1.0
    expected = kv_bytes / (case.hw.memory_bytes_per_s * case.engine.kv_fraction)
    assert step.kv_s[2] == pytest.approx(expected, rel=1e-12)
    assert step.kv_s[2] > 0.3 * step.seconds[2]  # a large share, not a rounding error


def test_a_pure_roofline_max_would_hide_the_kv_reads() -> None:
    """The old max(memory, compute) step: at this batch compute exceeds all memory traffic,
    so context would not matter; the composed step is longer by the KV read."""
    case = make_case("llama-3-8b", precision="fp8")
    step = decode_step(case, arr(1), arr(2048), arr(512))
    assert one(step.compute_s) > one(step.memory_s)
    assert one(step.seconds) > one(step.compute_s) + 0.9 * one(step.kv_s)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_h200_beats_h100_on_a_memory_heavy_step_by_the_bandwidth_ratio(precision: str) -> None:
    """Same Hopper profile on both; long contexts make HBM traffic most of the step."""
    h100 = make_case("llama-3-8b", H100, precision=precision)
    h200 = make_case("llama-3-8b", H200, precision=precision)
    assert h100.engine == h200.engine
    args = (arr(1), arr(64), arr(8192))
    ratio = one(decode_step(h100, *args).seconds) / one(decode_step(h200, *args).seconds)
    bandwidth = 4.8 / 3.35
    assert 0.88 * bandwidth < ratio <= bandwidth


def test_hbm_size_bounds_the_batch_and_h200_holds_more() -> None:
    """141 GB against 80 GB, minus the same weights: far more requests fit on the H200, and
    at the batch each one holds, H200 serves more tokens per second."""
    h100 = make_case("llama-3-70b", H100, precision="fp8")
    h200 = make_case("llama-3-70b", H200, precision="fp8")
    tp, length = arr(2), arr(4096)
    cap100 = one(max_sequences(h100, tp, length))
    cap200 = one(max_sequences(h200, tp, length))
    assert cap200 > 2 * cap100
    weights = one(weight_bytes_per_gpu(h100.arch, "fp8", tp))
    per_seq = 80 * 8 * 128 * 2 * 4096 / 2  # fp8 KV of one request, split over tp 2
    assert cap100 < (80e9 - weights) / per_seq
    rate100 = one(continuous(h100, tp, arr(cap100), 2048.0, 2048.0).output_tokens_per_s)
    rate200 = one(continuous(h200, tp, arr(cap200), 2048.0, 2048.0).output_tokens_per_s)
    assert rate200 > 1.2 * rate100


def test_chunked_prefill_shares_the_steps_weight_read() -> None:
    """A mixed step costs more than a pure decode step but less than decode plus separate
    prefills of the same prompts (each of which would read the weights again)."""
    case = make_case("llama-3-8b", precision="fp8")
    batch, prompt, output = arr(64), arr(512.0), 256.0
    decode = decode_step(case, arr(1), batch, arr(768.0))
    tokens = float(batch[0]) * 512 / output  # 128 prompt tokens ride in each step
    mixed = mixed_step(case, arr(1), batch, arr(768.0), prefill_tokens=arr(tokens), prompt=prompt)
    # GEMMs over decode and prompt tokens; logits (h × V) for the 64 decoding requests.
    gemm_flops = _body_flops(case) * (64 + tokens) + 2.0 * 4096 * 128_256 * 64
    assert one(mixed.gemm_s) == pytest.approx(gemm_flops / _flops(case), rel=1e-9)
    separate = one(decode.seconds) + one(prefill(case, arr(1), arr(tokens / 512), prompt).seconds)
    assert one(decode.seconds) < one(mixed.seconds) < separate


def test_prompts_ride_a_chunk_at_a_time_when_they_come_slower_than_a_chunk() -> None:
    """Continuous batching schedules a prompt in pieces of up to the engine's token budget
    (8192): when the replacements bring fewer prompt tokens per step than one piece, that
    share of steps carries a piece and the rest decode alone."""
    case = make_case("llama-3-70b", precision="fp8")
    tp, context = arr(2), arr(21_000.0)
    assert case.engine.profile_tokens == 8192
    # 32 requests of 20,000-token prompts and 2,000 outputs: 320 prompt tokens per step,
    # 320/8192 of the steps carry a piece of 8,192 tokens (a prompt is longer than a piece)
    batch = arr(32)
    share = 320 / 8192
    piece = mixed_step(case, tp, batch, context, prefill_tokens=arr(8192.0), prompt=arr(20e3))
    alone = decode_step(case, tp, batch, context)
    mean = one(chunked_mixed_s(case, tp, batch, context, prompt=20_000.0, output=2_000.0))
    assert mean == pytest.approx(share * one(piece.seconds) + (1 - share) * one(alone.seconds))
    # slower than the even spread (Jensen: a piece step is compute-bound, the others read the
    # weights for the decodes alone), faster than a step carrying a whole piece every time
    even = mixed_step(case, tp, batch, context, prefill_tokens=arr(320.0), prompt=arr(20e3))
    assert one(even.seconds) < mean < one(piece.seconds)
    # a prompt shorter than the budget is one piece: 128-token prompts, 64 per step at
    # batch 1,000 and 2,000 outputs, so half the steps carry 128 tokens
    half = one(chunked_mixed_s(case, tp, arr(1000), arr(1064.0), prompt=128.0, output=2000.0))
    full = mixed_step(case, tp, arr(1000), arr(1064.0), prefill_tokens=arr(128.0), prompt=arr(128))
    bare = decode_step(case, tp, arr(1000), arr(1064.0))
    assert half == pytest.approx((one(full.seconds) + one(bare.seconds)) / 2)
    # prompts arriving at least a piece per step spread over every step as before
    big = arr(4000)
    many = one(chunked_mixed_s(case, tp, big, arr(192.0), prompt=128.0, output=128.0))
    spread = mixed_step(case, tp, big, arr(192.0), prefill_tokens=big * 1.0, prompt=arr(128))
    assert many == pytest.approx(one(spread.seconds), rel=1e-12)


def test_nvfp4_weights_and_the_fp4_peak() -> None:
    """NVFP4: 4-bit values plus one 8-bit scale per 16, GEMMs at the FP4 tensor-core peak."""
    assert BYTES_PER_WEIGHT["fp4"] == 0.5 + 1 / 16
    hw = resolve_hardware("b200-sxm-192gb", "fp4", Assumptions())
    assert hw.peak_flops == 9000e12
    a = arch("llama-3-70b")
    counts = parameter_count(a)
    body = counts.total - embedding_params(a)
    expected = body * 0.5625 + embedding_params(a) * 2.0
    assert one(weight_bytes_per_gpu(a, "fp4", arr(1))) == pytest.approx(expected, rel=1e-12)
    eng = engine("tensorrt-llm", "NVIDIA", "b200-sxm-192gb")
    assert "blackwell" in eng.source
    case = InferenceCase(a, "fp4", "fp8", hw, eng, scaleup_link_fraction=0.8)
    step = decode_step(case, arr(1), arr(1024), arr(2048))
    assert one(step.seconds) > 0


def test_each_generation_has_its_own_fitted_profile() -> None:
    hopper = engine("tensorrt-llm", "NVIDIA", H100)
    a100 = engine("tensorrt-llm", "NVIDIA", "a100-sxm4-80gb")
    assert "fitted on hopper rows" in hopper.source
    # No generation fit for the A100: the engines.yaml profile, and its source says so.
    assert "no tensorrt-llm rows fitted on ampere" in a100.source
    assert replace(a100, source="") == replace(engine("tensorrt-llm"), source="")
    fitted = ("kv_fraction", "prefill_compute_fraction", "allreduce_latency_s")
    for key in fitted:
        assert getattr(hopper, key) != getattr(a100, key), key
    for value in (hopper.kv_fraction, hopper.decode_bandwidth_fraction):
        assert 0.5 <= value <= 0.95
    assert 0.3 <= hopper.prefill_compute_fraction <= 0.85


def one(values: Any) -> float:
    return float(np.asarray(values)[0])


def _body_flops(case: InferenceCase) -> float:
    counts = parameter_count(case.arch)
    return 2.0 * (counts.active_per_token - embedding_params(case.arch))


def _flops(case: InferenceCase) -> float:
    return case.hw.peak_flops * case.engine.prefill_compute_fraction


def test_the_decode_probe_prints_the_composed_step(capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.estimate.decode_probe import main

    main(["--batch", "1,64", "--context", "1024,4096"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[1].startswith("batch,context,step_ms")
    rows = [[float(x) for x in line.split(",")] for line in lines[2:]]
    assert len(rows) == 4
    for row in rows:  # step = max(weights, gemm) + max(kv, attn) + comm + overhead
        b, _, step, weights, kv, gemm, attn, comm, overhead, rate = row
        assert step == pytest.approx(max(weights, gemm) + max(kv, attn) + comm + overhead, abs=1e-3)
        assert rate == pytest.approx(b / step * 1e3, rel=1e-3)
    assert rows[3][4] == pytest.approx(4 * rows[2][4], rel=1e-3)  # KV read ∝ context
