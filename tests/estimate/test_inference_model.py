"""Inference model: KV cache, weights, roofline decode/prefill, memory, batching, the estimate.

Expected values are literal formulas in the model dimensions (from the published
configs: Llama 2/3 on Hugging Face, the DeepSeek-V3 report), not calls into the module
under test; where a value comes from the engine profile it is read from `engines.yaml`.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.catalog.models import get_model_preset
from gpufleet.catalog.pricing import cheapest_gpu_hour
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.engines import engine, engine_table
from gpufleet.estimate.inference import (
    ENGINE_RESERVE_BYTES,
    InferenceCase,
    Memory,
    Serving,
    StepTimes,
    continuous,
    decode_step,
    device_bytes_needed,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    memory,
    prefill,
    static_batch,
    weight_bytes_per_gpu,
)
from gpufleet.estimate.inference_estimate import (
    DEFAULT_SERVICE_CV,
    MAX_UTILISATION,
    InferenceEstimate,
    case_for,
    estimate_inference,
)
from gpufleet.estimate.queueing import mgc_wait
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import load, validate

H100 = "h100-sxm5-80gb"
H100_BANDWIDTH = 3.35e12  # H100 SXM5 datasheet: 3.35 TB/s HBM3
# The profile H100 cases get: TensorRT-LLM fitted on Hopper rows (engine_generations.yaml).
TRTLLM = engine("tensorrt-llm", "NVIDIA", H100)
EXAMPLE = Path(__file__).parents[2] / "examples" / "inference-llama2-70b.yaml"

# Published sizes (Hugging Face safetensors counts; embeddings = 2 untied tables of V·h).
LLAMA2_7B_PARAMS = 6_738_415_616
LLAMA2_7B_EMBED = 2 * 32_000 * 4_096
LLAMA2_70B_PARAMS = 68_976_648_192
LLAMA2_70B_EMBED = 2 * 32_000 * 8_192


def make_spec(
    model: str,
    accelerator: str = H100,
    *,
    precision: str = "bf16",
    kv_precision: str | None = None,
    engine_name: str = "tensorrt-llm",
    input_tokens: int = 1024,
    output_tokens: int = 256,
    count: int | None = None,
    tp: int | None = None,
    slo: dict[str, float] | None = None,
    **load_: float,
) -> InferenceSpec:
    serving: dict[str, Any] = {
        "precision": precision,
        "engine": engine_name,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        **load_,
    }
    if kv_precision is not None:
        serving["kv_precision"] = kv_precision
    if slo is not None:
        serving["slo"] = slo
    hardware: dict[str, Any] = {"accelerator": accelerator}
    if count is not None:
        hardware["count"] = count
    data: dict[str, Any] = {
        "kind": "inference",
        "model": {"preset": model},
        "serving": serving,
        "hardware": hardware,
    }
    if tp is not None:
        data["parallelism"] = {"tp": tp}
    return validate(InferenceSpec, data, "inline")


def make_case(
    model: str,
    accelerator: str = H100,
    *,
    precision: str = "bf16",
    kv_precision: str | None = None,
    engine_name: str = "tensorrt-llm",
) -> InferenceCase:
    spec = make_spec(
        model,
        accelerator,
        precision=precision,
        kv_precision=kv_precision,
        engine_name=engine_name,
    )
    return case_for(spec, Assumptions())


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def arch(name: str) -> Any:
    return get_model_preset(name).arch()


# --- KV cache ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "kv_precision", "expected"),
    [
        # layers · 2 (K and V) · kv_heads · head_dim · bytes
        pytest.param("llama-2-70b", "bf16", 80 * 2 * 8 * 128 * 2, id="llama2-70b-gqa-bf16"),
        pytest.param("llama-2-70b", "fp8", 80 * 2 * 8 * 128 * 1, id="llama2-70b-gqa-fp8"),
        pytest.param("llama-2-70b", "int4", 80 * 2 * 8 * 128 * 0.5, id="llama2-70b-gqa-int4"),
        pytest.param("llama-2-7b", "bf16", 32 * 2 * 32 * 128 * 2, id="llama2-7b-mha-bf16"),
        pytest.param("llama-3-8b", "bf16", 32 * 2 * 8 * 128 * 2, id="llama3-8b-gqa-bf16"),
        pytest.param("llama-3.1-405b", "bf16", 126 * 2 * 8 * 128 * 2, id="llama31-405b-bf16"),
        # MLA caches the latent (kv_lora_rank 512) and the rotary key (64) per layer.
        pytest.param("deepseek-v3", "bf16", 61 * (512 + 64) * 2, id="deepseek-v3-mla-bf16"),
        pytest.param("deepseek-v3", "fp8", 61 * (512 + 64) * 1, id="deepseek-v3-mla-fp8"),
    ],
)
def test_kv_bytes_per_token(model: str, kv_precision: str, expected: float) -> None:
    assert kv_bytes_per_token(arch(model), kv_precision) == expected


def test_known_kv_sizes_as_literals() -> None:
    assert kv_bytes_per_token(arch("llama-2-70b"), "bf16") == 327_680
    assert kv_bytes_per_token(arch("llama-2-70b"), "fp8") == 327_680 / 2
    assert kv_bytes_per_token(arch("llama-2-7b"), "bf16") == 524_288
    assert kv_bytes_per_token(arch("deepseek-v3"), "bf16") == 70_272


TPS = (1, 2, 4, 8, 16, 32, 64)


@pytest.mark.parametrize(
    ("model", "kv_heads"),
    [
        pytest.param("llama-2-70b", 8, id="gqa-8"),
        pytest.param("llama-2-7b", 32, id="mha-32"),
        pytest.param("llama-3.1-405b", 8, id="gqa-8-405b"),
    ],
)
def test_kv_per_gpu_splits_heads_until_they_run_out(model: str, kv_heads: int) -> None:
    a = arch(model)
    total = kv_bytes_per_token(a, "bf16")
    got = kv_bytes_per_token_per_gpu(a, "bf16", arr(*TPS))
    expected = [total / tp if tp <= kv_heads else total / kv_heads for tp in TPS]
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    # Past kv_heads ranks each rank holds one whole head: replication, not a split.
    assert got[-1] == total / kv_heads


def test_mla_latent_is_replicated_on_every_rank() -> None:
    a = arch("deepseek-v3")
    got = kv_bytes_per_token_per_gpu(a, "fp8", arr(*TPS))
    assert got.tolist() == [61 * 576.0] * len(TPS)


# --- weights -----------------------------------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize(
    ("model", "params", "embed"),
    [
        pytest.param("llama-2-7b", LLAMA2_7B_PARAMS, LLAMA2_7B_EMBED, id="llama2-7b"),
        pytest.param("llama-2-70b", LLAMA2_70B_PARAMS, LLAMA2_70B_EMBED, id="llama2-70b"),
    ],
)
@pytest.mark.parametrize(
    ("precision", "body_bytes"),
    [
        pytest.param("bf16", 2.0, id="bf16"),
        pytest.param("fp16", 2.0, id="fp16"),
        pytest.param("fp8", 1.0, id="fp8"),
        pytest.param("int8", 1.0, id="int8"),
        # AWQ/GPTQ: 4 bits plus one fp16 scale per group of 128 weights.
        pytest.param("int4", 0.5 + 2 / 128, id="int4"),
    ],
)
def test_weight_bytes_per_gpu(
    *, model: str, params: int, embed: int, precision: str, body_bytes: float, tp: int
) -> None:
    got = float(weight_bytes_per_gpu(arch(model), precision, arr(tp))[0])
    # Embedding tables stay 16-bit whatever the body is quantised to.
    expected = (body_bytes * (params - embed) + 2.0 * embed) / tp
    assert got == pytest.approx(expected, rel=1e-12)
    if precision == "bf16":
        assert got == pytest.approx(2 * params / tp, rel=1e-12)


# --- decode roofline ----------------------------------------------------------------------


def one(times: StepTimes | Serving | Memory, name: str) -> float:
    return float(getattr(times, name)[0])


def test_batch_1_decode_is_a_weight_read_at_the_engine_bandwidth() -> None:
    case = make_case("llama-2-7b")
    assert case.hw.memory_bytes_per_s == H100_BANDWIDTH
    assert case.engine == TRTLLM
    step = decode_step(case, arr(1), arr(1), arr(128))
    weights_s = 2 * LLAMA2_7B_PARAMS / (H100_BANDWIDTH * TRTLLM.decode_bandwidth_fraction)
    assert one(step, "memory_s") > 50 * one(step, "compute_s")  # bandwidth-bound
    assert one(step, "comm_s") == 0.0
    # 128 cached tokens add 67 MB to 13.5 GB of weights: within a few percent.
    assert 1.0 < (one(step, "seconds") - one(step, "overhead_s")) / weights_s < 1.03
    kv_s = 524_288 * 128 / (H100_BANDWIDTH * TRTLLM.kv_fraction)
    overhead = TRTLLM.step_overhead_s + TRTLLM.sequence_overhead_s
    assert one(step, "seconds") == pytest.approx(weights_s + kv_s + overhead, rel=1e-12)


def test_decode_compute_is_two_flops_per_active_weight_plus_logits_and_attention() -> None:
    case = make_case("llama-2-7b")
    tp, batch, context = 2, 64, 2048
    step = decode_step(case, arr(tp), arr(batch), arr(context))
    body = LLAMA2_7B_PARAMS - LLAMA2_7B_EMBED
    per_token = 2 * body + 2 * 4096 * 32_000 + 2 * 32 * (128 + 128) * 32 * context
    expected = batch * per_token / tp / (case.hw.peak_flops * TRTLLM.prefill_compute_fraction)
    assert one(step, "compute_s") == pytest.approx(expected, rel=1e-12)


def test_decode_step_grows_with_batch_and_context() -> None:
    case = make_case("llama-3-8b")
    batches = arr(1, 2, 8, 32, 128, 512, 2048)
    by_batch = decode_step(case, np.ones_like(batches), batches, np.full_like(batches, 2048))
    assert np.all(np.diff(by_batch.seconds) > 0)
    contexts = arr(1, 128, 1024, 4096, 8192)
    by_context = decode_step(case, np.ones_like(contexts), np.full_like(contexts, 32), contexts)
    assert np.all(np.diff(by_context.seconds) > 0)
    assert np.all(np.diff(by_context.memory_s) > 0)


def test_past_the_ridge_point_compute_dominates() -> None:
    case = make_case("llama-2-7b")
    small = decode_step(case, arr(1), arr(1), arr(1))
    huge = decode_step(case, arr(1), arr(8192), arr(1))
    assert one(small, "memory_s") > one(small, "compute_s")
    assert one(huge, "compute_s") > one(huge, "memory_s")
    # Past the ridge the GEMMs hide the weight read; the KV read and the per-step costs
    # are still added (attention runs between the GEMMs of a layer).
    expected = one(huge, "gemm_s") + one(huge, "kv_s") + one(huge, "overhead_s")
    assert one(huge, "gemm_s") > one(huge, "weights_s")
    assert one(huge, "seconds") == pytest.approx(expected, rel=1e-12)


def test_tp_2_halves_the_memory_term_and_adds_all_reduces() -> None:
    case = make_case("llama-2-70b")
    steps = decode_step(case, arr(1, 2), arr(16, 16), arr(2048, 2048))
    assert steps.memory_s[1] / steps.memory_s[0] == pytest.approx(0.5, rel=1e-12)
    assert steps.compute_s[1] / steps.compute_s[0] == pytest.approx(0.5, rel=1e-12)
    assert steps.comm_s[0] == 0.0
    # Two all-reduces per layer, latency-bound at decode sizes.
    assert steps.comm_s[1] >= 2 * 80 * TRTLLM.allreduce_latency_s
    assert steps.seconds[1] > 0.5 * steps.seconds[0]
    assert steps.seconds[1] - steps.comm_s[1] < 0.55 * steps.seconds[0]


def test_mla_does_not_halve_its_kv_reads_with_tp() -> None:
    case = make_case("deepseek-v3", "h200-sxm-141gb", precision="fp8")
    steps = decode_step(case, arr(1, 2), arr(256, 256), arr(8192, 8192))
    assert steps.memory_s[1] / steps.memory_s[0] > 0.5


# --- prefill ------------------------------------------------------------------------------


def test_prefill_compute_is_body_plus_causal_attention_plus_last_logits() -> None:
    case = make_case("llama-2-7b")
    tp, requests, prompt = 2, 4, 3000
    pre = prefill(case, arr(tp), arr(requests), arr(prompt))
    body = LLAMA2_7B_PARAMS - LLAMA2_7B_EMBED
    attention = 32 * (128 + 128) * 32 * prompt  # 2·a·(d_qk + d_v)·L·s / 2 (causal)
    flops = requests * prompt * (2 * body + attention) + 2 * 4096 * 32_000 * requests
    expected = flops / tp / (case.hw.peak_flops * TRTLLM.prefill_compute_fraction)
    assert one(pre, "compute_s") == pytest.approx(expected, rel=1e-12)


def test_prefill_time_is_about_linear_in_long_prompts() -> None:
    case = make_case("llama-3-8b")
    prompts = arr(2048, 4096, 8192)
    pre = prefill(case, np.ones_like(prompts), np.ones_like(prompts), prompts)
    assert np.all(pre.compute_s > pre.memory_s)  # compute-bound
    ratios = pre.seconds[1:] / pre.seconds[:-1]
    # Slightly above 2: causal attention adds a term quadratic in the prompt.
    assert np.all(ratios > 2.0)
    assert np.all(ratios < 2.2)


def test_short_prompts_cost_a_weight_read() -> None:
    case = make_case("llama-3-8b")
    prompts = arr(1, 2, 8)
    pre = prefill(case, np.ones_like(prompts), np.ones_like(prompts), prompts)
    assert np.all(pre.memory_s > pre.compute_s)
    assert pre.seconds[-1] / pre.seconds[0] < 1.01


# --- memory and max_sequences ------------------------------------------------------------


BOUNDARY_CASES = [
    pytest.param("llama-2-7b", H100, "bf16", 1, 1280, id="llama2-7b-h100-tp1"),
    pytest.param("llama-2-70b", H100, "fp8", 4, 4096, id="llama2-70b-h100-fp8-tp4"),
    pytest.param("llama-3-8b", "l4", "bf16", 1, 2048, id="llama3-8b-l4"),
    pytest.param("mixtral-8x7b", "a100-sxm4-80gb", "bf16", 2, 2048, id="mixtral-a100-tp2"),
    pytest.param("deepseek-v3", "h200-sxm-141gb", "fp8", 8, 4096, id="deepseek-v3-h200-tp8"),
]


@pytest.mark.parametrize(("model", "accelerator", "precision", "tp", "tokens"), BOUNDARY_CASES)
def test_max_sequences_is_the_memory_boundary(
    model: str, accelerator: str, precision: str, tp: int, tokens: int
) -> None:
    case = make_case(model, accelerator, precision=precision)
    t, k = arr(tp), arr(tokens)
    n = float(max_sequences(case, t, k)[0])
    assert n >= 1
    at = memory(case, t, arr(n), k)
    over = memory(case, t, arr(n + 1), k)
    # TensorRT-LLM: 0.9 of the memory free beside weights, activation peak and reserve
    device, u = case.hw.memory_bytes, TRTLLM.gpu_memory_utilization
    fixed = one(at, "weights") + one(at, "activations") + one(at, "other")
    assert one(at, "capacity") == pytest.approx(device - (1 - u) * (device - fixed), rel=1e-12)
    assert one(at, "total") <= one(at, "capacity")
    assert one(over, "total") > one(over, "capacity")


def test_max_sequences_is_the_memory_boundary_for_short_requests() -> None:
    case = make_case("llama-2-13b", "l4", precision="int8")
    t, k = arr(1), arr(128)
    n = float(max_sequences(case, t, k)[0])
    assert n >= 1
    at = memory(case, t, arr(n), k)
    assert one(at, "total") <= one(at, "capacity")
    over = memory(case, t, arr(n + 1), k)
    assert one(over, "total") > one(over, "capacity")


def test_memory_parts() -> None:
    case = make_case("llama-2-70b", precision="fp8")
    mem = memory(case, arr(4), arr(10), arr(3000))
    assert one(mem, "kv_cache") == pytest.approx(80 * 2 * 8 * 128 * 1 / 4 * 10 * 3000, rel=1e-12)
    assert one(mem, "weights") == pytest.approx(
        ((LLAMA2_70B_PARAMS - LLAMA2_70B_EMBED) + 2 * LLAMA2_70B_EMBED) / 4, rel=1e-12
    )
    assert one(mem, "other") == ENGINE_RESERVE_BYTES == 1.5 * 2**30
    assert one(mem, "activations") > 0
    parts = sum(one(mem, n) for n in ("weights", "kv_cache", "activations", "other"))
    assert one(mem, "total") == pytest.approx(parts, rel=1e-15)


# Llama-2-70B fp8 weights and KV, tp 1 on an H100 (80 GiB as the driver reports it), requests
# of 1,024 + 256 tokens: the fixed part every engine holds, from the published shapes.
H100_BYTES = 80 * 2**30
L70B_FP8_WEIGHTS = (LLAMA2_70B_PARAMS - LLAMA2_70B_EMBED) * 1 + LLAMA2_70B_EMBED * 2
L70B_CHUNK_ACTIVATIONS = 8192 * (3 * 28_672 * 2 + 8_192 * 2 * 4)  # 8,192-token prefill peak
L70B_FIXED = L70B_FP8_WEIGHTS + L70B_CHUNK_ACTIVATIONS + 1.5 * 2**30
L70B_FP8_KV_PER_REQUEST = 80 * 2 * 8 * 128 * 1 * 1280


def test_tensorrt_llm_gives_its_kv_cache_a_share_of_the_free_memory() -> None:
    """kv_cache_free_gpu_mem_fraction (0.9) is a share of the memory free after loading,
    not of the device: 0.9 × (80 GiB − 73 GB) holds 55 requests, where 0.9 × 80 GiB − 73 GB
    held 20."""
    case = make_case("llama-2-70b", precision="fp8")
    assert case.engine.memory_fraction_of == "free"
    expected = math.floor(0.9 * (H100_BYTES - L70B_FIXED) / L70B_FP8_KV_PER_REQUEST)
    assert expected == 55
    assert max_sequences(case, arr(1), arr(1280))[0] == expected
    spec = make_spec("llama-2-70b", precision="fp8", tp=1, concurrency=1)
    assert estimate_inference(spec).max_batch == expected


def test_vllm_caps_its_whole_footprint_at_a_share_of_the_device() -> None:
    """vLLM's gpu_memory_utilization (0.9) is a share of the whole device: the same model
    keeps 0.9 × 80 GiB − the fixed part for its KV cache."""
    case = make_case("llama-2-70b", precision="fp8", kv_precision="fp8", engine_name="vllm")
    assert case.engine.memory_fraction_of == "total"
    expected = math.floor((0.9 * H100_BYTES - L70B_FIXED) / L70B_FP8_KV_PER_REQUEST)
    assert expected == 20
    assert max_sequences(case, arr(1), arr(1280))[0] == expected
    at = memory(case, arr(1), arr(expected), arr(1280))
    assert one(at, "capacity") == 0.9 * H100_BYTES


def test_every_engine_states_what_its_memory_fraction_is_of() -> None:
    """Not inherited through relative_to: vLLM and SGLang state theirs (the whole device)."""
    assert {name: engine(name).memory_fraction_of for name in engine_table()} == {
        "tensorrt-llm": "free",
        "vllm": "total",
        "sglang": "total",
        "generic": "total",
    }


def test_a_free_memory_engine_never_counts_more_than_the_device() -> None:
    """With weights beyond the device there is no free memory: usable is the device, and no
    request fits."""
    case = make_case("llama-3.1-405b", "l4", precision="fp8")
    at = memory(case, arr(1), arr(1), arr(1280))
    assert one(at, "capacity") == case.hw.memory_bytes
    assert one(at, "total") > one(at, "capacity")


@pytest.mark.parametrize("engine_name", ["tensorrt-llm", "vllm"])
def test_device_bytes_needed_inverts_the_kv_budget(engine_name: str) -> None:
    """On exactly the memory it names the engine holds the requests, and not one byte less:
    TensorRT-LLM needs fixed + KV / 0.9, vLLM (fixed + KV) / 0.9."""
    case = make_case("llama-2-70b", precision="fp8", kv_precision="fp8", engine_name=engine_name)
    kv = 30 * L70B_FP8_KV_PER_REQUEST
    need = float(device_bytes_needed(case, arr(1), arr(30), arr(1280))[0])
    expected = L70B_FIXED + kv / 0.9 if engine_name == "tensorrt-llm" else (L70B_FIXED + kv) / 0.9
    assert need == pytest.approx(expected, rel=1e-12)
    for size, holds in ((need * (1 + 1e-9), True), (need * (1 - 1e-6), False)):
        sized = replace(case, hw=replace(case.hw, memory_bytes=size))
        assert bool(max_sequences(sized, arr(1), arr(1280))[0] >= 30) is holds


def test_a_model_too_big_for_the_gpu_fits_zero_sequences() -> None:
    case = make_case("llama-3.1-405b", "l4")
    assert max_sequences(case, arr(1, 8), arr(1280, 1280)).tolist() == [0.0, 0.0]


# --- static and continuous batching --------------------------------------------------------


def test_continuous_throughput_rises_with_concurrency_while_tpot_rises() -> None:
    case = make_case("llama-3-8b")
    conc = arr(1, 2, 4, 8, 16, 32, 64, 128, 256)
    s = continuous(case, np.ones_like(conc), conc, 1024.0, 256.0)
    # Rising while the weight read is shared; flat once every part of the step scales with
    # the batch (GEMMs past the ridge, KV reads, per-sequence costs), never falling.
    assert np.all(np.diff(s.output_tokens_per_s[:6]) > 0)
    assert np.all(np.diff(s.output_tokens_per_s) >= -1e-9 * s.output_tokens_per_s[1:])
    assert np.all(np.diff(s.tpot_s) > 0)
    assert np.all(np.diff(s.ttft_s) > 0)


def test_static_batch_throughput_rises_with_batch() -> None:
    case = make_case("llama-2-7b", "a100-sxm4-80gb")
    batch = arr(1, 4, 16, 64, 256)
    s = static_batch(case, np.ones_like(batch), batch, 128.0, 128.0)
    assert np.all(np.diff(s.output_tokens_per_s) > 0)
    assert np.all(np.diff(s.tpot_s) > 0)
    assert np.all(np.diff(s.ttft_s) > 0)


def test_static_batch_accounts_for_every_token() -> None:
    case = make_case("llama-2-7b", "a100-sxm4-80gb")
    batch, prompt, out = 32.0, 512.0, 200.0
    s = static_batch(case, arr(1), arr(batch), prompt, out)
    pre = prefill(case, arr(1), arr(batch), arr(prompt))
    step = decode_step(case, arr(1), arr(batch), arr(prompt + out / 2))
    assert one(s, "ttft_s") == pytest.approx(
        one(pre, "seconds") + TRTLLM.request_overhead_s, rel=1e-12
    )
    assert one(s, "tpot_s") == one(step, "seconds")
    assert one(s, "request_time_s") == pytest.approx(
        one(s, "ttft_s") + (out - 1) * one(s, "tpot_s"), rel=1e-12
    )
    assert one(s, "output_tokens_per_s") * one(s, "request_time_s") == pytest.approx(batch * out)


# --- vectorised == scalar ------------------------------------------------------------------

# (tp, batch, context)
MIXED = [(1, 1, 1), (2, 7, 300), (4, 64, 4096), (8, 512, 1200), (1, 33, 8000), (8, 1, 16)]


def _columns(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp, batch, ctx = (np.array(c, dtype=np.float64) for c in zip(*rows, strict=True))
    return tp, batch, ctx


def _assert_same(many: Any, single: Any, i: int, what: str) -> None:
    for f in fields(many):
        vec, sca = getattr(many, f.name), getattr(single, f.name)
        if isinstance(vec, np.ndarray):
            assert vec.shape == (len(MIXED),), f"{what}.{f.name}"
            np.testing.assert_allclose(vec[i], sca[0], rtol=1e-12, err_msg=f"{what}.{f.name}[{i}]")
        else:
            assert vec == sca, f"{what}.{f.name}"


@pytest.mark.parametrize(
    ("model", "accelerator", "precision"),
    [
        pytest.param("llama-2-70b", H100, "fp8", id="gqa-fp8"),
        pytest.param("llama-2-7b", "a100-sxm4-80gb", "int4", id="mha-int4"),
        pytest.param("mixtral-8x7b", H100, "bf16", id="moe"),
        pytest.param("deepseek-v3", "h200-sxm-141gb", "fp8", id="mla"),
    ],
)
def test_vectorised_calls_equal_scalar_calls(model: str, accelerator: str, precision: str) -> None:
    case = make_case(model, accelerator, precision=precision)
    tp, batch, ctx = _columns(MIXED)
    vec = {
        "decode_step": decode_step(case, tp, batch, ctx),
        "prefill": prefill(case, tp, batch, ctx),
        "memory": memory(case, tp, batch, ctx),
        "static_batch": static_batch(case, tp, batch, 700.0, 90.0),
        "continuous": continuous(case, tp, batch, 700.0, 90.0),
    }
    caps = max_sequences(case, tp, ctx)
    kv = kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, tp)
    weights = weight_bytes_per_gpu(case.arch, case.precision, tp)
    for i, (t, b, c) in enumerate(MIXED):
        t1, b1, c1 = arr(t), arr(b), arr(c)
        single = {
            "decode_step": decode_step(case, t1, b1, c1),
            "prefill": prefill(case, t1, b1, c1),
            "memory": memory(case, t1, b1, c1),
            "static_batch": static_batch(case, t1, b1, 700.0, 90.0),
            "continuous": continuous(case, t1, b1, 700.0, 90.0),
        }
        for name, many in vec.items():
            _assert_same(many, single[name], i, name)
        assert caps[i] == max_sequences(case, t1, c1)[0]
        assert kv[i] == kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, t1)[0]
        assert weights[i] == weight_bytes_per_gpu(case.arch, case.precision, t1)[0]


# --- properties ----------------------------------------------------------------------------

PROPERTY_CASES = {
    "llama-3-8b": make_case("llama-3-8b", engine_name="vllm"),
    "llama-2-70b": make_case("llama-2-70b", precision="fp8"),
    "mixtral-8x7b": make_case("mixtral-8x7b", "a100-sxm4-80gb", precision="int4"),
    "deepseek-v3": make_case("deepseek-v3", "h200-sxm-141gb", precision="fp8"),
}


@settings(max_examples=80, deadline=None)
@given(
    name=st.sampled_from(sorted(PROPERTY_CASES)),
    tp=st.sampled_from([1, 2, 4, 8]),
    batch=st.integers(1, 4096),
    context=st.integers(1, 32_768),
    more=st.integers(1, 512),
)
def test_roofline_invariants(name: str, tp: int, batch: int, context: int, more: int) -> None:
    case = PROPERTY_CASES[name]
    t = arr(tp, tp, tp)
    b = arr(batch, batch + more, batch)
    c = arr(context, context, context + more)
    step = decode_step(case, t, b, c)
    for f in ("seconds", "memory_s", "compute_s", "comm_s"):
        assert np.all(np.isfinite(getattr(step, f))), f
        assert np.all(getattr(step, f) >= 0), f
    composed = (
        np.maximum(step.weights_s, step.gemm_s)
        + np.maximum(step.kv_s, step.attention_s)
        + step.comm_s
        + step.overhead_s
    )
    assert np.allclose(step.seconds, composed, rtol=1e-12)
    assert np.allclose(step.memory_s, step.weights_s + step.kv_s, rtol=1e-12)
    assert step.seconds[1] > step.seconds[0]  # more requests, longer step
    assert step.seconds[2] > step.seconds[0]  # longer context, longer step
    assert (step.comm_s == 0).all() == (tp == 1)
    pre = prefill(case, t, b, c)
    # Short prompts are a weight read whatever their length: prefill time never falls.
    assert pre.seconds[1] >= pre.seconds[0]
    assert pre.seconds[2] >= pre.seconds[0]
    assert pre.compute_s[1] > pre.compute_s[0]
    assert pre.compute_s[2] > pre.compute_s[0]
    mem = memory(case, t, b, c)
    assert np.allclose(mem.total, mem.weights + mem.kv_cache + mem.activations + mem.other)
    assert mem.kv_cache[1] > mem.kv_cache[0]
    cont = continuous(case, t[:1], b[:1], float(context), 200.0)
    assert one(cont, "output_tokens_per_s") == pytest.approx(batch / one(cont, "tpot_s"))
    assert one(cont, "request_time_s") == pytest.approx(
        one(cont, "ttft_s") + 199 * one(cont, "tpot_s")
    )
    assert one(cont, "ttft_s") > one(cont, "tpot_s")


# --- the estimate ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> InferenceEstimate:
    """The example's service on the 24 GPUs its rate needs (its hardware.count is 8)."""
    spec = load(InferenceSpec, EXAMPLE)
    return estimate_inference(
        spec.model_copy(update={"hardware": spec.hardware.model_copy(update={"count": 24})})
    )


def test_example_request_rate_is_served_within_slo(example: InferenceEstimate) -> None:
    e = example
    assert (e.mode, e.accelerator, e.precision, e.kv_precision) == (
        "request_rate",
        H100,
        "fp8",
        "fp8",
    )
    assert (e.tp, e.pp) == (8, 1)
    assert e.replicas * e.tp == e.gpus
    assert e.replicas >= 1
    assert e.fits is True
    assert e.slo_met is True
    assert e.reasons == []
    assert e.tpot_ms <= 100
    assert e.ttft_ms <= 1000
    assert 1 <= e.batch <= e.max_batch
    assert e.output_tokens_per_s == 50 * 256  # the demand it is sized for
    assert e.output_tokens_per_s_per_gpu == pytest.approx(50 * 256 / e.gpus, rel=1e-12)
    assert e.kv_cache_bytes_per_token == 80 * 2 * 8 * 128 * 1
    m = e.memory_per_gpu_bytes
    assert abs(m.total - (m.weights + m.kv_cache + m.activations + m.other)) <= 3
    assert m.total <= e.memory_capacity_bytes
    price = cheapest_gpu_hour(H100)
    assert price is not None
    assert e.cost_per_million_output_tokens_usd is not None
    assert e.cost_per_million_output_tokens_usd > 0
    assert e.cost_per_million_output_tokens_usd == pytest.approx(
        e.gpus * price.usd_per_gpu_hour / (50 * 256 * 3600) * 1e6, rel=1e-12
    )
    # The replicas' combined capacity covers the demand.
    assert e.replica_capacity_output_tokens_per_s * e.replicas >= e.output_tokens_per_s


def test_example_latencies_are_continuous_batching_at_the_chosen_concurrency(
    example: InferenceEstimate,
) -> None:
    case = case_for(load(InferenceSpec, EXAMPLE), Assumptions())
    s = continuous(case, arr(8), arr(example.batch), 1024.0, 256.0)
    assert example.tpot_ms == pytest.approx(one(s, "tpot_s") * 1e3, rel=1e-12)
    assert example.ttft_ms >= one(s, "ttft_s") * 1e3  # plus the p99 queueing wait
    assert example.replica_capacity_output_tokens_per_s == pytest.approx(
        one(s, "output_tokens_per_s"), rel=1e-12
    )


@pytest.mark.parametrize(("ttft_slo_ms", "replicas"), [(300, 1), (60, 2)])
def test_ttft_is_prefill_plus_the_p99_queueing_wait(ttft_slo_ms: float, replicas: int) -> None:
    # A TPOT SLO just above batch-1 decode leaves a few slots per replica, so requests
    # queue; a tighter TTFT SLO buys replicas to shorten the wait.
    case = make_case("llama-3-8b")
    tpot = continuous(case, arr(1, 1), arr(7, 8), 1024.0, 256.0).tpot_s
    slo = {"tpot_p99_ms": float(tpot.mean()) * 1e3, "ttft_p99_ms": ttft_slo_ms}  # 7 slots
    spec = make_spec("llama-3-8b", request_rate=1, tp=1, slo=slo)
    e = estimate_inference(spec)
    assert e.replicas == replicas
    assert e.slo_met is True
    s = continuous(case_for(spec, Assumptions()), arr(1), arr(e.batch), 1024.0, 256.0)
    q = mgc_wait(1.0, one(s, "request_time_s"), DEFAULT_SERVICE_CV, e.replicas * e.batch)
    assert q.utilisation <= MAX_UTILISATION
    assert e.ttft_ms == pytest.approx((one(s, "ttft_s") + q.p99_wait_s) * 1e3, rel=1e-12)
    assert e.ttft_ms <= ttft_slo_ms
    if replicas == 1:
        assert q.p99_wait_s > 0.3 * e.ttft_ms / 1e3  # the wait is a large part of the TTFT


def test_batch_spec_is_one_static_batch_per_replica() -> None:
    spec = make_spec("llama-3-8b", count=8, tp=1, batch=32, input_tokens=512, output_tokens=128)
    e = estimate_inference(spec)
    assert (e.mode, e.batch, e.tp, e.replicas, e.gpus) == ("batch", 32, 1, 8, 8)
    assert e.fits is True
    assert e.slo_met is True
    case = case_for(spec, Assumptions())
    s = static_batch(case, arr(1), arr(32), 512.0, 128.0)
    assert e.ttft_ms == pytest.approx(one(s, "ttft_s") * 1e3, rel=1e-12)
    assert e.tpot_ms == pytest.approx(one(s, "tpot_s") * 1e3, rel=1e-12)
    assert e.output_tokens_per_s_per_gpu == pytest.approx(one(s, "output_tokens_per_s"))
    assert e.output_tokens_per_s == pytest.approx(8 * one(s, "output_tokens_per_s"))
    assert e.memory_per_gpu_bytes.kv_cache == 32 * 2 * 8 * 128 * 2 * 32 * 640
    assert e.kv_cache_bytes == 32 * 2 * 8 * 128 * 2 * 32 * 640


def test_concurrency_spec_is_continuous_batching_per_replica() -> None:
    spec = make_spec("llama-3-8b", count=8, tp=2, concurrency=64)
    e = estimate_inference(spec)
    assert (e.mode, e.batch, e.tp, e.replicas, e.gpus) == ("concurrency", 64, 2, 4, 8)
    assert e.fits is True
    case = case_for(spec, Assumptions())
    s = continuous(case, arr(2), arr(64), 1024.0, 256.0)
    assert e.tpot_ms == pytest.approx(one(s, "tpot_s") * 1e3, rel=1e-12)
    assert e.ttft_ms == pytest.approx(one(s, "ttft_s") * 1e3, rel=1e-12)
    assert e.output_tokens_per_s == pytest.approx(4 * one(s, "output_tokens_per_s"))
    assert e.output_tokens_per_s_per_gpu == pytest.approx(one(s, "output_tokens_per_s") / 2)
    price = cheapest_gpu_hour(H100)
    assert price is not None
    assert e.cost_per_million_output_tokens_usd == pytest.approx(
        8 * price.usd_per_gpu_hour / (e.output_tokens_per_s * 3600) * 1e6
    )


def test_without_parallelism_the_smallest_tp_holding_the_load_is_chosen() -> None:
    spec = make_spec("llama-2-70b", concurrency=64, input_tokens=2048, output_tokens=2048)
    e = estimate_inference(spec)
    case = case_for(spec, Assumptions())
    caps = max_sequences(case, arr(1, 2, 4, 8), np.full(4, 4096.0))
    chosen = [1, 2, 4, 8].index(e.tp)
    assert caps[chosen] >= 64
    assert all(c < 64 for c in caps[:chosen])
    assert e.tp > 1  # 138 GB of bf16 weights do not fit one H100
    assert e.fits is True


def test_no_load_means_batch_1_and_says_so() -> None:
    e = estimate_inference(make_spec("llama-3-8b"))
    assert (e.mode, e.batch) == ("batch", 1)
    assert any(a.name == "load" and a.value == "batch 1" for a in e.assumptions)


def test_a_load_that_cannot_fit_says_why() -> None:
    e = estimate_inference(make_spec("llama-3.1-405b", "l4", engine_name="vllm", batch=8))
    assert e.fits is False
    assert e.slo_met is False
    assert e.max_batch == 0
    m = e.memory_per_gpu_bytes
    assert m.total > e.memory_capacity_bytes
    assert e.reasons[0] == (
        f"does not fit: 8 requests of 1280 tokens need {m.total / 1e9:.1f} GB per GPU of "
        f"{e.memory_capacity_bytes / 1e9:.1f} GB usable; at most 0 fit at tp {e.tp}"
    )
    # not one request fits: why in per-GPU numbers, and what would help (an L4 stops TP at 1)
    assert e.reasons[1] == (
        "no request fits: at TP 1 the weights alone take 811.7 GB per GPU, with 5.3 GB of "
        "activation and runtime reserve and 0.7 GB of KV cache for one request: 817.7 GB "
        f"against {e.memory_capacity_bytes / 1e9:.1f} GB usable; tp 1 is the largest on one "
        "node. What would help: an accelerator whose scale-up domain spans TP 8 (101.5 GB of "
        "weights per GPU there) or serving across nodes with pipeline stages, which "
        "parallelism.pp estimates (the search and plans do not size it)"
    )
    assert len(e.reasons) == 2


def test_a_tpot_slo_no_concurrency_meets_says_why() -> None:
    spec = make_spec("llama-3-8b", request_rate=5, slo={"tpot_p99_ms": 0.001})
    e = estimate_inference(spec)
    assert e.batch == 0
    assert e.fits is False
    assert e.slo_met is False
    assert len(e.reasons) == 1
    assert e.reasons[0].startswith("no concurrency meets the time-per-output-token SLO (")
    # bf16 at tp 1 on an H100: a larger tp and fp8 weights would both change something
    assert e.reasons[0].endswith(
        " ms > 0.001 ms) at one request in flight; try a larger tp (up to 8 in one node's "
        "scale-up domain), fp8 weights, a faster accelerator, or a looser SLO"
    )


def test_a_batch_that_fits_is_no_larger_than_max_batch() -> None:
    spec = make_spec(
        "llama-2-70b",
        "a100-sxm4-40gb",
        precision="int4",
        engine_name="vllm",
        tp=1,
        batch=1,
        input_tokens=100,
        output_tokens=28,
    )
    e = estimate_inference(spec)
    assert not e.fits or e.batch <= e.max_batch


# --- MIG ------------------------------------------------------------------------------------

# The last value: requests the smallest slice (1g.10gb) holds. int8: 8B parameters at 1 byte
# leave no room in 10 GB. int4: 5.7 GB of weights, 1.0 GB of prefill peak and 1.6 GB of
# reserve leave 1.7 GB free, of which TensorRT-LLM's 0.9 holds one 7,168-token request
# (0.94 GB of bf16 KV cache); 0.9 of the whole slice held none.
MIG_SPECS = [
    pytest.param("int8", 1024, 256, 0, id="int8"),
    pytest.param("int4", 6144, 1024, 1, id="int4-long-context"),
]


@pytest.mark.parametrize(("precision", "input_tokens", "output_tokens", "smallest"), MIG_SPECS)
def test_mig_profiles_that_hold_the_model(
    precision: str, input_tokens: int, output_tokens: int, smallest: int
) -> None:
    spec = make_spec(
        "llama-3-8b",
        "a100-sxm4-80gb",
        precision=precision,
        concurrency=4,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )
    e = estimate_inference(spec)
    slices = {"1g.10gb": 1, "1g.20gb": 1, "2g.20gb": 2, "3g.40gb": 3, "4g.40gb": 4, "7g.80gb": 7}
    memory_gb = {"1g.10gb": 10, "1g.20gb": 20, "2g.20gb": 20, "3g.40gb": 40, "4g.40gb": 40}
    memory_gb["7g.80gb"] = 80
    instances = {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1}
    instances["7g.80gb"] = 1
    by = {m.profile: m for m in e.mig_fit}
    assert list(by) == list(slices)  # media-extension profiles are left out
    assert by["1g.10gb"].max_batch == smallest
    assert (by["1g.10gb"].output_tokens_per_s == 0.0) == (smallest == 0)
    fitting = [m for m in e.mig_fit if m.fits]
    larger = ["1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert [m.profile for m in fitting] == ["1g.10gb"] * (smallest > 0) + larger
    for m in e.mig_fit:
        assert m.fits == (m.max_batch >= 1)
        assert m.output_tokens_per_s_per_gpu == pytest.approx(
            m.output_tokens_per_s * instances[m.profile], rel=1e-12
        )
    # More compute slices, more tokens/s among the profiles that hold the model.
    rates = [m.output_tokens_per_s for m in fitting]
    assert all(r > 0 for r in rates)
    assert rates == sorted(rates)
    assert len(set(rates)) == len(rates)
    # And no profile at least as large in both compute and memory is slower.
    for a in fitting:
        for b in fitting:
            bigger = slices[a.profile] >= slices[b.profile]
            if bigger and memory_gb[a.profile] >= memory_gb[b.profile]:
                assert a.output_tokens_per_s >= b.output_tokens_per_s
                assert a.max_batch >= b.max_batch


def test_the_whole_gpu_profile_serves_like_the_whole_gpu() -> None:
    spec = make_spec("llama-3-8b", "a100-sxm4-80gb", precision="int8", concurrency=4, tp=1)
    e = estimate_inference(spec)
    whole = next(m for m in e.mig_fit if m.profile == "7g.80gb")
    assert whole.output_tokens_per_s == pytest.approx(e.output_tokens_per_s_per_gpu, rel=1e-12)


def test_a_gpu_without_mig_has_no_profiles() -> None:
    assert estimate_inference(make_spec("llama-3-8b", "l4", concurrency=4)).mig_fit == []


def test_pipeline_parallel_serving_composes_stage_times() -> None:
    """pp stages: a token crosses every stage; all stages work on different micro-batches."""
    from gpufleet.estimate.inference import pipelined, stage_case
    from gpufleet.estimate.inference_estimate import estimate_inference
    from gpufleet.specs.inference import InferenceSpec
    from gpufleet.specs.load import validate

    spec = validate(
        InferenceSpec,
        {
            "kind": "inference",
            "model": "llama-3.1-405b",
            "serving": {
                "precision": "fp8",
                "engine": "tensorrt-llm",
                "input_tokens": 2048,
                "output_tokens": 512,
                "concurrency": 64,
            },
            "hardware": {"accelerator": "h100", "count": 16},
            "parallelism": {"tp": 8, "pp": 2},
        },
        "inline",
    )
    est = estimate_inference(spec)
    assert est.pp == 2
    assert est.gpus == est.replicas * 16
    from gpufleet.estimate.assumptions import Assumptions
    from gpufleet.estimate.inference import continuous
    from gpufleet.estimate.inference_estimate import _hop_s, case_for

    case = stage_case(case_for(spec, Assumptions()), 2)
    assert case.arch.layers == 63
    stage = continuous(case, np.array([8.0]), np.array([32.0]), 2048.0, 512.0)
    hop = _hop_s(case, 32)
    e2e = pipelined(stage, 2, hop, case.engine.request_overhead_s)
    assert e2e.tpot_s[0] == pytest.approx(2 * stage.tpot_s[0] + hop)
    assert e2e.output_tokens_per_s[0] == pytest.approx(64 / e2e.tpot_s[0])
    assert est.tpot_ms == pytest.approx(e2e.tpot_s[0] * 1e3)
