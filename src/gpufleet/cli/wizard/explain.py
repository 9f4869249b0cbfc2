"""Numbers for the explanations: what a choice means for the model the user picked.

A trade-off is easier to weigh with the user's own numbers than in the abstract,
so each note is computed for the chosen model: its parameters and weights, its
training state, a back-of-envelope compute and GPU count, and how many requests
its KV cache lets one GPU hold. They come from the estimators where those answer
the same question; the rough figures (6·N·D FLOPs at a fixed MFU, KV room without
the engine's activation reserve) are kept simple on purpose, since the planner
sizes the workload properly afterwards.
"""

from __future__ import annotations

import math

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import TRAINING_STATE_BYTES_PER_PARAM

# Reference points for the explanations: the two GPUs that differ only in HBM.
HBM_COMPARISON = ("h100-sxm5-80gb", "h200-sxm-141gb")
# A rough MFU for the back-of-envelope explanation only; the planner uses fitted profiles.
ROUGH_MFU = 0.4
REQUEST_TOKENS_EXAMPLE = 4096


def short_count(n: float) -> str:
    """15e12 -> '15T', 1.41e12 -> '1.4T': two significant digits, SI suffix."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = float(f"{n / scale:.2g}")
            return f"{value:g}{suffix}"
    return f"{n:g}"


def bytes_text(n_bytes: float) -> str:
    """Decimal MB below 1 GB, GB below 1 TB, then TB."""
    if n_bytes < 1e9:
        return f"{n_bytes / 1e6:,.0f} MB"
    return f"{n_bytes / 1e9:,.1f} GB" if n_bytes < 1e12 else f"{n_bytes / 1e12:,.2f} TB"


def billions(n: float) -> str:
    return f"{n / 1e9:,.1f} B"


def model_note(arch: ModelArch) -> str:
    # gpufleet.estimate.inference is imported here, not at the top: `gpufleet --help`
    # imports this module and need not pay for the inference estimator.
    from gpufleet.estimate.inference import weight_bytes_per_gpu

    counts = parameter_count(arch)
    bf16_bytes = float(weight_bytes_per_gpu(arch, "bf16", np.array([1.0]))[0])
    # as served, and as `hbm_note` counts them: the embedding tables stay at 16 bits, so
    # fp8 weights are a little more than one byte per parameter (one figure, not two)
    fp8_bytes = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    name = arch.name or "this model"
    moe = ""
    if arch.is_moe:
        moe = (
            f", {billions(counts.active_per_token)} active per token (memory follows the "
            "total, compute the active part)"
        )
    return (
        f"{name}: {billions(counts.total)} parameters, counted from its shape ({arch.layers} "
        f"layers, width {arch.hidden:,}, {arch.heads} heads / {arch.kv_heads} KV heads, "
        f"vocabulary {arch.vocab:,}){moe}. Its weights alone take {bytes_text(bf16_bytes)} in "
        f"bf16, {bytes_text(fp8_bytes)} in fp8 (embeddings kept at 16 bits)."
    )


def training_memory_note(arch: ModelArch) -> str:
    state_bytes = TRAINING_STATE_BYTES_PER_PARAM * parameter_count(arch).total
    fits = []
    for name in HBM_COMPARISON:
        device = get_accelerator(name)
        gpus = math.ceil(state_bytes / device.memory_bytes)
        fits.append(f"{gpus:,} × {bytes_text(device.memory_bytes)}")
    return (
        f"Training keeps about {TRAINING_STATE_BYTES_PER_PARAM} bytes per parameter "
        "(bf16 weights and "
        f"gradients, fp32 master weights and two Adam moments): {bytes_text(state_bytes)} before "
        f"activations, so at least {' or '.join(fits)} GPUs just to hold it, sharded "
        "(ZeRO/FSDP). More HBM per GPU means less splitting, so less communication per step."
    )


def _gpu_seconds(arch: ModelArch, tokens: float) -> tuple[float, float]:
    """6 · active parameters · tokens FLOPs (Kaplan et al. 2020) and H100-seconds at ROUGH_MFU.

    Not `estimate.flops.model_flops`: that counts attention over a sequence length and the
    logits, which this rule of thumb leaves out (it is what the note says it computes).
    """
    flops = 6.0 * parameter_count(arch).active_per_token * tokens
    peak_flops_per_s = get_accelerator(HBM_COMPARISON[0]).dense_flops("bf16")
    assert peak_flops_per_s is not None  # the catalog lists H100 bf16 throughput
    return flops, flops / (peak_flops_per_s * ROUGH_MFU)


def compute_note(arch: ModelArch, tokens: float) -> str:
    flops, seconds = _gpu_seconds(arch, tokens)
    return (
        f"6 × parameters × tokens ≈ {flops:.1e} FLOPs: about {seconds / 86_400:,.0f} H100-days "
        f"at {ROUGH_MFU:.0%} MFU (a rough figure; the planner sizes it properly)."
    )


def deadline_note(arch: ModelArch, tokens: float, deadline_s: float) -> str:
    _, seconds = _gpu_seconds(arch, tokens)
    gpus = math.ceil(seconds / deadline_s)
    return (
        f"To finish in {deadline_s / 86_400:,.3g} days that is at least ~{gpus:,} H100s running "
        f"at {ROUGH_MFU:.0%} MFU, before failures and restarts."
    )


def _requests_that_fit(arch: ModelArch, device_name: str, tokens: int) -> tuple[int, int, int]:
    """(GPUs, concurrent REQUEST_TOKENS_EXAMPLE-token requests, requests of `tokens`) on the
    smallest tensor-parallel group (1-8 GPUs) that holds fp8 weights; (0, 0, 0) if none.

    Not `estimate.inference.max_sequences`: that also takes off the engine's memory-utilisation
    cap and its prefill activation reserve, which this explanation leaves out.
    """
    from gpufleet.estimate.inference import (
        ENGINE_RESERVE_BYTES,
        kv_bytes_per_token_per_gpu,
        weight_bytes_per_gpu,
    )

    capacity_bytes = float(get_accelerator(device_name).memory_bytes)
    weight_bytes = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    for tp in (1, 2, 4, 8):
        free_bytes = tp * (capacity_bytes - ENGINE_RESERVE_BYTES) - weight_bytes
        kv_bytes = tp * float(kv_bytes_per_token_per_gpu(arch, "fp8", np.array([float(tp)]))[0])
        if free_bytes >= kv_bytes * REQUEST_TOKENS_EXAMPLE:
            return (
                tp,
                int(free_bytes // (kv_bytes * REQUEST_TOKENS_EXAMPLE)),
                int(free_bytes // (kv_bytes * tokens)),
            )
    return 0, 0, 0


def hbm_note(arch: ModelArch, request_tokens: int) -> str:
    from gpufleet.estimate.inference import kv_bytes_per_token, weight_bytes_per_gpu

    kv16_bytes = kv_bytes_per_token(arch, "bf16")
    kv8_bytes = kv_bytes_per_token(arch, "fp8")
    weight_bytes = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    parts = [
        f"Each token in flight keeps {kv16_bytes / 1024:,.0f} KiB of KV cache in bf16 "
        f"({kv8_bytes / 1024:,.0f} KiB in fp8); a {REQUEST_TOKENS_EXAMPLE:,}-token request holds "
        f"{bytes_text(kv8_bytes * REQUEST_TOKENS_EXAMPLE)} in fp8. After "
        f"{bytes_text(weight_bytes)} of fp8 weights:"
    ]
    for name in HBM_COMPARISON:
        device = get_accelerator(name)
        gpus, example, yours = _requests_that_fit(arch, name, request_tokens)
        where = f"{device.display_name} ({bytes_text(device.memory_bytes)})"
        if not gpus:
            parts.append(f"{where}: does not fit on 8 GPUs; it needs pipeline stages.")
            continue
        group = "one GPU holds" if gpus == 1 else f"{gpus} GPUs (tp {gpus}) hold"
        parts.append(
            f"{where}: {group} about {example:,} concurrent {REQUEST_TOKENS_EXAMPLE:,}-token "
            f"requests ({yours:,} of yours at {request_tokens:,} tokens)."
        )
    parts.append("More HBM buys more requests in flight per GPU, so fewer GPUs for the same rate.")
    return " ".join(parts)
