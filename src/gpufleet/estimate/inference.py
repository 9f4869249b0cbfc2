"""Inference model: memory, prefill and decode time, throughput, vectorised over layouts.

A decode step is composed of its parts, each bounded by what it really waits on:

- the linear layers read every local weight once per step (shared by the whole batch) and do
  2 FLOPs per weight per request: a roofline, max(weight read, GEMM), memory-bound at small
  batch and compute-bound past the ridge point;
- attention reads the KV cache of every request (batch × context tokens): memory-bound at
  any batch (a few FLOPs per cached byte), so it is added, not hidden under the GEMMs —
  attention kernels and GEMMs run one after the other in each layer;
- two tensor-parallel all-reduces per layer (latency-bound at decode sizes), a fixed cost
  per step (launches, scheduler) and a cost per sequence per step (sampling, bookkeeping).

Under continuous batching the prefill tokens of replacement requests ride in the same step
(chunked prefill): they add GEMM FLOPs and causal-attention FLOPs to the step but share its
weight read. Engines differ in how close they get to each bound; those fractions come from
`estimate/data/engines.yaml` (A100 fit) and `engine_generations.yaml` (per accelerator
generation, fitted on the modern TensorRT-LLM and vLLM rows).

Arrays: every function takes numpy arrays of tensor-parallel size and batch
(concurrency) of equal shape, so `gpufleet search inference` evaluates all
candidates of one accelerator and precision in one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.flops import qk_v_dims
from gpufleet.estimate.hardware import GpuHardware
from gpufleet.estimate.params import embedding_params, parameter_count

Array = npt.NDArray[np.float64]
WeightPrecision = Literal["bf16", "fp16", "fp8", "int8", "int4", "fp4"]
# What an engine's memory fraction is a fraction of: vLLM's gpu_memory_utilization and
# SGLang's mem_fraction_static cap the engine's whole footprint at a share of the device's
# memory; TensorRT-LLM's kv_cache_free_gpu_mem_fraction gives the KV cache a share of what
# is still free once the weights, the activation peak and the runtime are in memory.
MemoryBasis = Literal["total", "free"]
GiB = 2**30

# Bytes per weight. int4 (AWQ/GPTQ-style) carries one fp16 scale per group of 128 weights.
BYTES_PER_WEIGHT: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 2.0 / 128,
    # NVFP4 (Blackwell): 4-bit E2M1 values with one FP8 (E4M3) scale per block of 16
    # (NVIDIA, "Introducing NVFP4", 2025); the per-tensor FP32 scale is negligible.
    "fp4": 0.5 + 1.0 / 16,
}
# The precision the matrix units run at: weight-only int8/int4 kernels dequantise to 16-bit.
COMPUTE_PRECISION: dict[str, Literal["bf16", "fp8", "fp4"]] = {
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "int8": "bf16",
    "int4": "bf16",
    "fp4": "fp4",  # NVFP4 GEMMs run on Blackwell's FP4 tensor cores
}
# CUDA context, NCCL buffers, CUDA-graph pools: not in any formula (assumption).
ENGINE_RESERVE_BYTES = int(1.5 * GiB)


@dataclass(frozen=True)
class EngineEfficiency:
    name: str
    decode_bandwidth_fraction: float  # weight reads of the linear layers
    prefill_compute_fraction: float  # GEMMs (decode and prefill) and prefill attention
    step_overhead_s: float
    request_overhead_s: float
    allreduce_latency_s: float
    gpu_memory_utilization: float
    profile_tokens: int
    source: str
    kv_bandwidth_fraction: float = 0.0  # decode attention's KV reads; 0 = decode fraction
    sequence_overhead_s: float = 0.0  # per sequence per step: sampling, bookkeeping
    # gpu_memory_utilization is a share of the device's memory ("total") or of the memory
    # left free after weights, activation peak and runtime reserve ("free", TensorRT-LLM)
    memory_fraction_of: MemoryBasis = "total"

    @property
    def kv_fraction(self) -> float:
        return self.kv_bandwidth_fraction or self.decode_bandwidth_fraction


@dataclass(frozen=True)
class InferenceCase:
    arch: ModelArch
    precision: WeightPrecision
    kv_precision: WeightPrecision
    hw: GpuHardware  # peak_flops at COMPUTE_PRECISION[precision]
    engine: EngineEfficiency
    scaleup_link_fraction: float  # collective efficiency on the scale-up fabric (training fit)


def kv_bytes_per_token(arch: ModelArch, kv_precision: str) -> float:
    """KV-cache bytes one token occupies across all layers (GQA and MLA aware)."""
    per = BYTES_PER_WEIGHT[kv_precision] if kv_precision not in ("int4", "fp4") else 0.5
    if arch.attention == "mla":
        # MLA caches the compressed latent and the shared rotary key, not per-head K/V
        # (DeepSeek-V2 §2.1.2): (kv_lora_rank + qk_rope_head_dim) per layer.
        assert arch.kv_lora_rank is not None
        return float(arch.layers * (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * per)
    d_qk, d_v = qk_v_dims(arch)
    return float(arch.layers * arch.kv_heads * (d_qk + d_v) * per)


def kv_bytes_per_token_per_gpu(arch: ModelArch, kv_precision: str, tp: Array) -> Array:
    """TP splits KV heads; with fewer KV heads than ranks they are replicated, and MLA's
    latent is replicated on every rank."""
    total = kv_bytes_per_token(arch, kv_precision)
    if arch.attention == "mla":
        return np.full_like(tp, total)
    return total * np.maximum(1.0 / tp, 1.0 / arch.kv_heads)


def weight_bytes_per_gpu(arch: ModelArch, precision: str, tp: Array) -> Array:
    """Quantised layers at their precision; embedding tables stay 16-bit (as served)."""
    counts = parameter_count(arch)
    embed = embedding_params(arch)
    body = counts.total - embed
    return (body * BYTES_PER_WEIGHT[precision] + embed * 2.0) / tp


def weight_bytes_read_per_gpu(arch: ModelArch, precision: str, tp: Array, tokens: Array) -> Array:
    """Weight bytes a step of `tokens` tokens reads from HBM per GPU: every dense weight once,
    and of a mixture-of-experts layer only the experts its tokens are routed to. With each
    token picking k of E experts, T tokens touch E·(1 − (1 − k/E)^T) distinct experts per layer
    in expectation (uniform routing; real routers are less even, so this is an upper bound):
    Mixtral's batch-1 decode reads 2 of 8 experts (12.9B of 46.7B parameters), a large batch
    all of them. Memory holds every expert (`weight_bytes_per_gpu`)."""
    total = weight_bytes_per_gpu(arch, precision, tp)
    if not arch.is_moe or arch.experts <= arch.experts_per_token:
        return total
    routed = parameter_count(arch).routed_experts * BYTES_PER_WEIGHT[precision] / tp
    unused = 1.0 - arch.experts_per_token / arch.experts
    touched = 1.0 - np.power(unused, np.maximum(np.asarray(tokens, dtype=np.float64), 1.0))
    return np.asarray(total - routed * (1.0 - touched), dtype=np.float64)


@dataclass(frozen=True)
class StepTimes:
    """One step's time and its parts (seconds, arrays like the inputs).

    seconds = max(weights_s, gemm_s) + max(kv_s, attention_s) + comm_s + overhead_s.
    memory_s and compute_s are the totals of HBM traffic and of matrix work, for reports.
    """

    seconds: Array
    comm_s: Array
    weights_s: Array
    kv_s: Array
    gemm_s: Array
    attention_s: Array
    overhead_s: Array

    @property
    def memory_s(self) -> Array:
        return self.weights_s + self.kv_s

    @property
    def compute_s(self) -> Array:
        return self.gemm_s + self.attention_s


def _active_body_params(arch: ModelArch) -> float:
    counts = parameter_count(arch)
    return float(counts.active_per_token - embedding_params(arch))


def _allreduce(case: InferenceCase, tp: Array, tokens: Array) -> Array:
    """Two all-reduces per layer of tokens·h·2 bytes; latency-bound at decode sizes."""
    share = case.hw.scaleup_share(np.asarray(tp, dtype=np.int64))  # xGMI mesh: k - 1 links
    bw = case.hw.scaleup_bytes_per_s * case.scaleup_link_fraction * share
    volume = 2 * (tp - 1) / tp * tokens * case.arch.hidden * 2
    one = case.engine.allreduce_latency_s + volume / bw
    return np.where(tp > 1, 2 * case.arch.layers * one, 0.0)


def _attention_flops_per_token(arch: ModelArch, context: Array) -> Array:
    """QK^T and PV for one new token against `context` cached ones, all layers."""
    d_qk, d_v = qk_v_dims(arch)
    return np.asarray(2.0 * arch.heads * (d_qk + d_v) * arch.layers * context, dtype=np.float64)


def _step(
    case: InferenceCase,
    tp: Array,
    decode: Array,
    context: Array,
    *,
    prefill_tokens: Array,
    prompt: Array,
) -> StepTimes:
    """A step that decodes `decode` requests at `context` and prefills `prefill_tokens`
    prompt tokens (of prompts `prompt` long): one weight read, shared by all of them."""
    arch, hw, eng = case.arch, case.hw, case.engine
    bw = hw.memory_bytes_per_s
    weights = weight_bytes_read_per_gpu(arch, case.precision, tp, decode + prefill_tokens)
    weights_s = weights / (bw * eng.decode_bandwidth_fraction)
    kv = kv_bytes_per_token_per_gpu(arch, case.kv_precision, tp) * decode * context
    kv_s = kv / (bw * eng.kv_fraction)
    flops_s = hw.peak_flops * eng.prefill_compute_fraction
    body = 2 * _active_body_params(arch)
    logits = 2.0 * arch.hidden * arch.vocab
    # Decode tokens and prefill tokens go through the same GEMMs; logits only for the
    # decode tokens and the last position of each prompt (counted with the decode ones).
    gemm_s = ((decode + prefill_tokens) * body + decode * logits) / tp / flops_s
    decode_attn = decode * _attention_flops_per_token(arch, context) / tp
    # Causal prefill attention: half the square; tensor cores, so the compute fraction.
    prefill_attn = prefill_tokens * _attention_flops_per_token(arch, prompt) / 2 / tp
    attention_s = (decode_attn + prefill_attn) / flops_s
    comm = _allreduce(case, tp, decode + prefill_tokens)
    overhead = eng.step_overhead_s + eng.sequence_overhead_s * decode
    seconds = (
        np.maximum(weights_s, gemm_s)
        + np.maximum(kv_s, decode_attn / flops_s)
        + prefill_attn / flops_s
        + comm
        + overhead
    )
    return StepTimes(seconds, comm, weights_s, kv_s, gemm_s, attention_s, overhead)


def decode_step(case: InferenceCase, tp: Array, batch: Array, context: Array) -> StepTimes:
    """One decode step: every request in `batch` emits a token with `context` cached."""
    zero = np.zeros_like(batch)
    return _step(case, tp, batch, context, prefill_tokens=zero, prompt=zero)


def mixed_step(
    case: InferenceCase,
    tp: Array,
    batch: Array,
    context: Array,
    *,
    prefill_tokens: Array,
    prompt: Array,
) -> StepTimes:
    """A continuous-batching step: `batch` decodes plus `prefill_tokens` prompt tokens (of
    prompts `prompt` long) of the requests that replace finished ones, in one weight read."""
    return _step(case, tp, batch, context, prefill_tokens=prefill_tokens, prompt=prompt)


def prefill(case: InferenceCase, tp: Array, requests: Array, prompt: Array) -> StepTimes:
    """Process `requests` prompts of `prompt` tokens in one batch (causal attention)."""
    arch, hw, eng = case.arch, case.hw, case.engine
    tokens = requests * prompt
    body = 2 * _active_body_params(arch)
    attn = _attention_flops_per_token(arch, prompt) / 2  # causal: half the square
    logits = 2.0 * arch.hidden * arch.vocab * requests  # only the last position of each
    gemm = (tokens * body + logits) / tp
    flops_s = hw.peak_flops * eng.prefill_compute_fraction
    gemm_s = gemm / flops_s
    attention_s = tokens * attn / tp / flops_s
    weights = weight_bytes_read_per_gpu(arch, case.precision, tp, tokens)
    weights_s = weights / (hw.memory_bytes_per_s * eng.decode_bandwidth_fraction)
    comm = _allreduce(case, tp, tokens)
    overhead = np.full_like(tokens, eng.step_overhead_s)
    seconds = np.maximum(weights_s, gemm_s + attention_s) + comm + overhead
    return StepTimes(seconds, comm, weights_s, np.zeros_like(tokens), gemm_s, attention_s, overhead)


def chunked_mixed_s(
    case: InferenceCase, tp: Array, batch: Array, context: Array, *, prompt: float, output: float
) -> Array:
    """The mean step of continuous batching when prompts are scheduled a chunk at a time.

    An engine admits a prompt in pieces of up to its token budget per step (`profile_tokens`:
    TensorRT-LLM's and vLLM's max_num_tokens, 8192 by default), not spread evenly over the
    steps. When the replacements bring fewer prompt tokens per step (c·prompt/output) than one
    such piece, only that share of steps carries a piece and the others decode alone: a piece
    step is compute-bound, a decode-only one reads the weights for the batch alone, and their
    mean is slower than one step carrying the mean (the stall Sarathi-Serve measures, Agrawal
    et al., OSDI 2024). It is the small batch of a long-prompt load that meets this: an H100
    holding 32 requests of 22k tokens is slower beside an H200 holding 115 than the even
    spread says. A request's time per output token averages over many steps, so the mean is
    also what its TPOT reads."""
    per_step = batch * prompt / output  # each slot turns over once every `output` steps
    piece = float(min(prompt, case.engine.profile_tokens))
    share = np.minimum(1.0, per_step / piece) if piece > 0 else np.ones_like(batch)
    carried = np.divide(per_step, share, out=np.zeros_like(per_step), where=share > 0)
    prompts = np.full_like(batch, prompt)
    loaded = mixed_step(case, tp, batch, context, prefill_tokens=carried, prompt=prompts)
    if bool(np.all(share >= 1.0)):
        return loaded.seconds
    alone = decode_step(case, tp, batch, context).seconds
    return np.asarray(share * loaded.seconds + (1.0 - share) * alone, dtype=np.float64)


@dataclass(frozen=True)
class Memory:
    weights: Array
    kv_cache: Array
    activations: Array
    other: Array
    capacity: Array  # bytes the engine may use per GPU (`usable_bytes`)

    @property
    def total(self) -> Array:
        return self.weights + self.kv_cache + self.activations + self.other


def activation_bytes(case: InferenceCase, tp: Array, prefill_tokens: Array) -> Array:
    """Peak transient memory of a prefill chunk: the widest MLP intermediate (gate and up
    projections, 16-bit) plus four hidden-size buffers (residual, norm output, attention
    output, MLP output) per token."""
    arch = case.arch
    width = max(arch.ffn_hidden, (arch.moe_ffn_hidden or 0) * max(arch.experts_per_token, 1))
    mlp = prefill_tokens * (3 if arch.ffn_type == "swiglu" else 2) * width * 2 / tp
    hidden = prefill_tokens * arch.hidden * 2 * 4
    return np.asarray(mlp + hidden, dtype=np.float64)


def fixed_bytes(case: InferenceCase, tp: Array) -> Array:
    """Per-GPU memory an engine holds whatever the load: the weights, the activation peak of
    its largest prefill chunk (vLLM and TensorRT-LLM profile it at start) and the runtime
    reserve (CUDA context, NCCL buffers, CUDA-graph pools)."""
    weights = weight_bytes_per_gpu(case.arch, case.precision, tp)
    chunk = np.full_like(weights, float(case.engine.profile_tokens))
    act = activation_bytes(case, tp, chunk)
    return np.asarray(weights + act + ENGINE_RESERVE_BYTES, dtype=np.float64)


def kv_budget_bytes(case: InferenceCase, tp: Array) -> Array:
    """Per-GPU bytes the engine gives its KV cache, as its memory fraction is defined.

    vLLM-style ("total"): u × device memory − the fixed part. TensorRT-LLM ("free"):
    u × (device memory − the fixed part), what `kv_cache_free_gpu_mem_fraction` (0.9 by
    default) takes of the memory free after loading. Reading TensorRT-LLM's fraction as one of
    the whole device gave Llama-2-70B fp8 at tp 1 on an H100 about 4 GB of KV cache instead
    of 11.6 GB (20 requests of 1,280 tokens instead of 55)."""
    u = case.engine.gpu_memory_utilization
    device = float(case.hw.memory_bytes)
    fixed = fixed_bytes(case, tp)
    if case.engine.memory_fraction_of == "free":
        budget = u * np.maximum(device - fixed, 0.0)
    else:
        budget = u * device - fixed
    return np.asarray(np.maximum(budget, 0.0), dtype=np.float64)


def usable_bytes(case: InferenceCase, tp: Array) -> Array:
    """Per-GPU bytes the engine may fill (fixed part + KV budget): u × device memory for a
    "total" engine; device − (1 − u) × free for a "free" one, never above the device."""
    u = case.engine.gpu_memory_utilization
    device = float(case.hw.memory_bytes)
    if case.engine.memory_fraction_of == "free":
        free = np.maximum(device - fixed_bytes(case, tp), 0.0)
        return np.asarray(device - (1.0 - u) * free, dtype=np.float64)
    return np.full_like(np.asarray(tp, dtype=np.float64), u * device)


def device_bytes_needed(
    case: InferenceCase, tp: Array, sequences: Array, tokens_per_sequence: Array
) -> Array:
    """Smallest per-GPU device memory on which the engine's KV budget holds `sequences`
    requests of `tokens_per_sequence` tokens: the inverse of `kv_budget_bytes`, for sizing a
    slice or a fraction of a GPU. "total": (fixed + KV) / u; "free": fixed + KV / u (dividing
    the whole footprint by u would ask a TensorRT-LLM 70B fp8 job for 8 GB too many)."""
    u = case.engine.gpu_memory_utilization
    kv = kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, tp) * sequences
    kv = kv * tokens_per_sequence
    fixed = fixed_bytes(case, tp)
    if case.engine.memory_fraction_of == "free":
        return np.asarray(fixed + kv / u, dtype=np.float64)
    return np.asarray((fixed + kv) / u, dtype=np.float64)


def memory(case: InferenceCase, tp: Array, sequences: Array, tokens_per_sequence: Array) -> Memory:
    """Per-GPU memory holding `sequences` requests of `tokens_per_sequence` cached tokens."""
    weights = weight_bytes_per_gpu(case.arch, case.precision, tp)
    kv = kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, tp) * sequences
    kv = kv * tokens_per_sequence
    # Engines reserve the activation peak of their largest prefill chunk up front (vLLM
    # and TensorRT-LLM profile it at start), whatever the load: the same reserve as
    # `max_sequences`, so "fits" and "max_batch" always agree.
    chunk = np.full_like(weights, float(case.engine.profile_tokens))
    return Memory(
        weights=weights,
        kv_cache=kv,
        activations=activation_bytes(case, tp, chunk),
        other=np.full_like(weights, float(ENGINE_RESERVE_BYTES)),
        capacity=usable_bytes(case, tp),
    )


def max_sequences(case: InferenceCase, tp: Array, tokens_per_sequence: Array) -> Array:
    """Largest number of concurrent requests whose KV cache fits in the engine's KV budget
    (`kv_budget_bytes`) beside the weights."""
    per_seq = kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, tp) * tokens_per_sequence
    return np.maximum(np.floor(kv_budget_bytes(case, tp) / per_seq), 0.0)


@dataclass(frozen=True)
class Serving:
    """Latency and throughput of one replica (tp GPUs) at a batch or concurrency."""

    ttft_s: Array
    tpot_s: Array
    output_tokens_per_s: Array  # per replica
    request_time_s: Array  # a request's whole stay: TTFT + output × TPOT


def static_batch(
    case: InferenceCase, tp: Array, batch: Array, prompt: float, output: float
) -> Serving:
    """All `batch` requests prefilled together, then decoded in lock-step to the end."""
    pre = prefill(case, tp, batch, np.full_like(batch, prompt))
    mid = np.full_like(batch, prompt + output / 2)
    step = decode_step(case, tp, batch, mid)
    ttft = pre.seconds + case.engine.request_overhead_s
    total = ttft + max(output - 1, 0) * step.seconds
    return Serving(
        ttft_s=ttft,
        tpot_s=step.seconds,
        output_tokens_per_s=batch * output / total,
        request_time_s=total,
    )


def continuous(
    case: InferenceCase,
    tp: Array,
    concurrency: Array,
    prompt: float,
    output: float,
    *,
    ttft_prompt: float | None = None,
) -> Serving:
    """Steady state of in-flight batching: each step decodes `concurrency` requests, and the
    prompts of the requests that replace finished ones ride in the same steps a chunk at a
    time (`chunked_mixed_s`), so prefill and decode interfere inside a step rather than
    taking turns.

    The steady state is that of the mean `prompt`; `ttft_s` is the first token of a request
    whose prompt has `ttft_prompt` tokens (default `prompt`): a p99 TTFT SLO is met by the
    p99 prompt's prefill, not the mean's (3,500 tokens prefill in 3.4x the time of 1,024)."""
    mid = np.full_like(concurrency, prompt + output / 2)
    prompts = np.full_like(concurrency, prompt if ttft_prompt is None else ttft_prompt)
    mixed = chunked_mixed_s(case, tp, concurrency, mid, prompt=prompt, output=output)
    one = np.ones_like(concurrency)
    per_request = prefill(case, tp, one, prompts)
    ttft = per_request.seconds + mixed + case.engine.request_overhead_s
    return Serving(
        ttft_s=ttft,
        tpot_s=mixed,
        output_tokens_per_s=concurrency / mixed,
        request_time_s=ttft + max(output - 1, 0) * mixed,
    )


def stage_case(case: InferenceCase, pp: int) -> InferenceCase:
    """One pipeline stage: the same model with ceil(L/pp) layers. Embedding tables are
    counted on every stage (conservative by (pp-1) tables' worth of memory)."""
    from dataclasses import replace

    if pp <= 1:
        return case
    layers = -(-case.arch.layers // pp)
    first_dense = min(case.arch.first_dense_layers, layers)
    arch = case.arch.model_copy(update={"layers": layers, "first_dense_layers": first_dense})
    return replace(case, arch=arch)


def pipelined(stage: Serving, pp: int, hop_s: float | Array, request_overhead_s: float) -> Serving:
    """End-to-end serving of `pp` stages each serving a micro-batch (1/pp of the load):
    a token crosses every stage (pp stage steps and pp-1 hand-offs), while all stages work
    on different micro-batches at once, so the whole load advances once per token time.
    `hop_s` is one hand-off, or one per load when the stage figures are arrays of loads."""
    if pp <= 1:
        return stage
    hops = (pp - 1) * hop_s
    tpot = pp * stage.tpot_s + hops
    ttft = pp * (stage.ttft_s - request_overhead_s) + hops + request_overhead_s
    return Serving(
        ttft_s=ttft,
        tpot_s=tpot,
        output_tokens_per_s=stage.output_tokens_per_s * pp * stage.tpot_s / tpot,
        request_time_s=ttft + (stage.request_time_s - stage.ttft_s) / stage.tpot_s * tpot,
    )
