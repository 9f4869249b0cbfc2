"""Training step model: memory, time and throughput of a parallel layout, vectorised.

One function, `evaluate`, maps a workload (`TrainingCase`) and any number of
parallel layouts (`Layouts`, numpy arrays of equal shape) to arrays of
memory, time components and throughput. `gpufleet estimate` calls it with
one layout, `gpufleet search` with the whole space at once: one model, no
second copy for the search.

The model, per microbatch and pipeline stage (references in docs/design/0003):
- compute: matrix products at a fitted fraction of the dense peak at the training
  precision (FP8 has its own fraction, and its casts cost HBM traffic) plus a fixed
  cost per kernel; attention core in bf16 at the flash-attention fraction (causal blocks
  skipped) or as full GEMMs plus memory-bound softmax (unfused); norms,
  activations and residuals as HBM traffic. Backward = 2× forward
  (flash attention backward 2.5×); recomputation adds a forward (full) or the
  attention core (selective).
- tensor parallel: 2 all-reduces (or all-gather + reduce-scatter with sequence
  parallelism, same volume) per layer per pass on the scale-up domain;
- pipeline: 1F1B with (pp-1)/v bubble, blocking point-to-point sends;
- data parallel: gradient all-reduce (ZeRO 0) or reduce-scatter + all-gather
  (ZeRO 1-2) once per step; ZeRO 3 gathers parameters every microbatch;
- context parallel: ring exchange of K/V, overlapped with attention;
- expert parallel: all-to-all dispatch and combine per MoE layer.
What overlaps is the framework profile's (docs/design/0016): communication c under a
compute window w is exposed for max(0, c − w) + interference × min(c, w): the part the
window cannot hide, plus the compute slowed while both share SMs and HBM.
Memory follows Korthikanti et al. 2022, generalised to GQA, SwiGLU and MoE; what selective
recompute keeps, whether FSDP's shard is the fp32 master, and the dp × cp sharding of state
are the framework's (docs/design/0003, "Memory, checked on the modern rows").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.efficiency import Efficiency, FrameworkProfile
from gpufleet.estimate.flops import (
    LayerFlops,
    logits_flops,
    megatron2021_flops_per_sequence,
    model_flops,
    qk_v_dims,
)
from gpufleet.estimate.hardware import GpuHardware
from gpufleet.estimate.params import (
    attention_params_per_layer,
    embedding_params,
    mlp_params,
    norm_params,
    router_params_per_layer,
)
from gpufleet.estimate.training_comm import (
    overlap_exposed,
    overlapped,
    ring_bandwidth,
    ring_time,
)
from gpufleet.estimate.training_offload import (
    CPU_OPTIMIZER_BYTES_PER_S,
    HOST_LINK_EFFICIENCY,
    host_link_bytes_per_s,
)
from gpufleet.estimate.training_traffic import Volumes, scaleout_bytes

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
RECOMPUTE_CODES: dict[str, int] = {"none": 0, "selective": 1, "full": 2}
GiB = 2**30
# CUDA context, NCCL buffers and allocator fragmentation: not in any formula, so a
# flat reserve per GPU (assumption; PyTorch's own context alone is ~0.5-1 GiB).
OTHER_RESERVE_BYTES = 2 * GiB
# Optimizer step traffic per local parameter: read fp32 grad, master, m, v (16 B),
# write master, m, v (12 B) and the bf16 weight copy (2 B).
OPTIMIZER_BYTES_PER_PARAM = 30
OPTIMIZER_STATE_BYTES = 12  # fp32 master weights + Adam m and v
MASTER_WEIGHT_BYTES = 4  # the fp32 master copy within OPTIMIZER_STATE_BYTES
WEIGHT_BYTES = 2  # bf16 (fp8 training keeps bf16 weights and casts per GEMM)
# Mixed-precision Adam's whole training state per parameter: bf16 weights and gradients
# (2 + 2) and the fp32 master weights with two moments (12); ZeRO (Rajbhandari et al. 2020,
# §3.1). Checkpoints are sized with it too, an upper bound: a checkpoint holds no gradients
# (14 bytes).
TRAINING_STATE_BYTES_PER_PARAM = 16


@dataclass(frozen=True)
class TrainingCase:
    """Everything about a training workload except its parallel layout."""

    arch: ModelArch
    seq_len: int
    global_batch: int
    precision: Literal["bf16", "fp8"]
    dropout: bool
    hw: GpuHardware
    eff: Efficiency
    profile: FrameworkProfile


@dataclass(frozen=True)
class Layouts:
    """Parallel layouts as equal-shape integer arrays (one element per candidate)."""

    tp: IntArray
    pp: IntArray
    dp: IntArray
    cp: IntArray
    ep: IntArray
    mb: IntArray
    vs: IntArray
    zero: IntArray
    recompute: IntArray  # 0 none, 1 selective, 2 full
    sp: IntArray  # sequence parallel 0/1
    # 0 none, 1 optimizer state in host memory (training_offload); None: none anywhere, so
    # the layouts built before the knob existed need no column.
    offload: IntArray | None = None

    @classmethod
    def single(
        cls,
        *,
        tp: int = 1,
        pp: int = 1,
        dp: int = 1,
        cp: int = 1,
        ep: int = 1,
        mb: int = 1,
        vs: int = 1,
        zero: int = 1,
        recompute: str = "selective",
        sp: bool = True,
    ) -> Layouts:
        def one(v: int) -> IntArray:
            return np.array([v], dtype=np.int64)

        return cls(
            tp=one(tp),
            pp=one(pp),
            dp=one(dp),
            cp=one(cp),
            ep=one(ep),
            mb=one(mb),
            vs=one(vs),
            zero=one(zero),
            recompute=one(RECOMPUTE_CODES[recompute]),
            sp=one(int(sp and tp > 1)),
        )

    @property
    def gpus(self) -> IntArray:
        return self.tp * self.pp * self.dp * self.cp

    def take(self, mask: npt.NDArray[np.bool_] | IntArray) -> Layouts:
        cols: dict[str, IntArray | None] = {}
        for f in fields(self):
            col: IntArray | None = getattr(self, f.name)
            cols[f.name] = None if col is None else col[mask]
        return Layouts(**cols)  # type: ignore[arg-type]

    @property
    def offloaded(self) -> IntArray:
        """The offload column, zeros when the layouts carry none."""
        return np.zeros_like(self.tp) if self.offload is None else self.offload


@dataclass(frozen=True)
class Evaluation:
    """Per-layout results (arrays). Times in seconds, memory in bytes per GPU."""

    microbatches: IntArray
    step_time_s: Array
    compute_s: Array  # pipeline compute on the critical stage, bubble excluded
    bubble_s: Array
    tp_comm_s: Array
    pp_comm_s: Array
    dp_comm_s: Array  # all data-parallel traffic per step (ZeRO-3 gathers included)
    dp_exposed_s: Array
    cp_comm_s: Array
    ep_comm_s: Array
    optimizer_s: Array
    exposed_comm_s: Array
    tokens_per_s: Array
    model_flops_per_token: float
    hardware_flops_per_token: Array
    tflops_per_gpu: Array  # model FLOPs
    mfu: Array
    hfu: Array
    megatron2021_tflops_per_gpu: Array
    weights_bytes: Array
    gradients_bytes: Array
    optimizer_bytes: Array
    activations_bytes: Array
    other_bytes: Array
    total_bytes: Array
    params_per_gpu: Array
    # Optimizer offload: state held in host memory per GPU, and the seconds per step its host
    # traffic and CPU optimizer step add (within optimizer_s and step_time_s).
    host_bytes: Array
    offload_s: Array
    # Bytes per GPU per step across the scale-out network, what a fabric must carry
    scaleout_tp_bytes: Array
    scaleout_cp_bytes: Array
    scaleout_ep_bytes: Array
    scaleout_pp_bytes: Array
    scaleout_dp_bytes: Array


@dataclass(frozen=True)
class _Params:
    embed_input: float
    embed_output: float  # 0 when tied
    dense_layer: float
    moe_layer_shared: float  # attention, shared experts, router, norms
    moe_layer_routed: float


def _param_split(arch: ModelArch) -> _Params:
    attn = attention_params_per_layer(arch)
    norms = norm_params(arch) / max(arch.layers, 1)
    dense = attn + mlp_params(arch, arch.ffn_hidden) + norms
    width = arch.moe_ffn_hidden or arch.ffn_hidden
    expert = mlp_params(arch, width)
    embed = embedding_params(arch)
    table = arch.vocab * arch.hidden
    return _Params(
        embed_input=float(embed - (0 if arch.tied_embeddings else table)),
        embed_output=0.0 if arch.tied_embeddings else float(table),
        dense_layer=float(dense),
        moe_layer_shared=float(
            attn + arch.shared_experts * expert + router_params_per_layer(arch) + norms
        ),
        moe_layer_routed=float(arch.experts * expert),
    )


def _layer_bytes_per_token(
    case: TrainingCase, lay: Layouts, *, moe: bool
) -> tuple[Array, Array, Array]:
    """(stored activations, elementwise traffic per forward, unfused softmax traffic per
    forward) in bytes per token of one layer on one GPU."""
    arch, flash = case.arch, case.profile.flash_attention
    h = float(arch.hidden)
    d_qk, d_v = qk_v_dims(arch)
    a, g = float(arch.heads), float(arch.kv_heads)
    tp = lay.tp.astype(np.float64)
    rep_div = np.where(lay.sp == 1, tp, 1.0)  # replicated regions shrink only with SP
    width = float(arch.moe_ffn_hidden or arch.ffn_hidden) if moe else float(arch.ffn_hidden)
    streams = float(arch.experts_per_token + arch.shared_experts) if moe else 1.0
    gated = arch.ffn_type == "swiglu"
    masks = 2 * h if case.dropout else 0.0  # two 1-byte dropout masks
    # FP8 training keeps what a GEMM needs for its weight gradient in FP8: Transformer
    # Engine's Linear / LayerNormLinear / LayerNormMLP save the FP8 cast of their input
    # (the QKV and fc1 inputs, the fc2 input), one byte per element instead of two. The
    # attention output is saved twice: in bf16 by the attention kernel (its backward needs
    # O) and in FP8 by the output projection.
    fp8 = case.precision == "fp8"
    gemm_in = 1.0 if fp8 else 2.0
    replicated = 4 * h + gemm_in * h + gemm_in * h + masks  # norm inputs, qkv in, fc1 in
    split = 2 * a * d_qk + 2 * g * d_qk + 2 * g * d_v + (2 + (1 if fp8 else 0)) * a * d_v
    fc2_in = (2.0 - gemm_in) * width  # bytes saved on the fc2 input per stream
    gated_bytes = 6 * width if case.profile.fused_mlp else 8 * width
    split += streams * ((gated_bytes if gated else 4 * width) - fc2_in)
    per_token = replicated / rep_div + split / tp
    context = float(case.seq_len)
    score_bytes = 2.0 + (3.0 if case.dropout else 0.0)
    scores = np.where((lay.recompute == 0) & (not flash), a * context * score_bytes / tp, 0.0)
    if case.profile.selective_keeps == "matmul_outputs":
        # JAX checkpoint_dots_with_no_batch_dims keeps the layer input, the Q/K/V and
        # attention-output projections and the MLP's first GEMM outputs (bf16); norms,
        # activation functions and the attention core are recomputed in the backward.
        dots = 2 * (a * d_qk + g * d_qk + g * d_v) + streams * 2 * width * (2 if gated else 1)
        selective = (2 * h + 2 * h) / rep_div + dots / tp
    else:
        selective = per_token + scores
    stored = np.where(
        lay.recompute == 2,
        2 * h / rep_div,
        np.where(lay.recompute == 1, selective, per_token + scores),
    )
    # elementwise traffic: norms (8h), residual adds (12h), activation function, dropout
    act = streams * (6 * width if gated else 4 * width)
    elementwise = (20 * h + masks) / rep_div + act / tp
    if moe:
        elementwise = elementwise + 4 * arch.experts_per_token * h * 2 / tp  # permute/unpermute
    softmax = 0.0 if flash else a * context * (4.0 + (5.0 if case.dropout else 0.0))
    return stored, elementwise, softmax / tp


def _fp8_cast_bytes_per_token(case: TrainingCase, lay: Layouts, *, moe: bool) -> Array:
    """HBM traffic of FP8 casts per token of one layer's forward: each GEMM input (QKV and
    fc1 inputs, attention output, MLP hidden) is read in bf16 and written in FP8 (3 bytes
    per element); the backward casts its gradients likewise (the 2x of elementwise work)."""
    if case.precision != "fp8":
        return np.zeros(lay.tp.shape)
    arch = case.arch
    h = float(arch.hidden)
    _, d_v = qk_v_dims(arch)
    width = float(arch.moe_ffn_hidden or arch.ffn_hidden) if moe else float(arch.ffn_hidden)
    streams = float(arch.experts_per_token + arch.shared_experts) if moe else 1.0
    rep_div = np.where(lay.sp == 1, lay.tp.astype(np.float64), 1.0)
    split = arch.heads * d_v + streams * width
    return np.asarray(3.0 * (2 * h / rep_div + split / lay.tp.astype(np.float64)))


@dataclass(frozen=True)
class _LayerTime:
    """One layer, one microbatch, one GPU: pass times (communication folded in) and the
    compute-only and raw communication parts they contain."""

    forward: Array
    backward: Array
    recompute: Array
    compute: Array  # compute-only seconds of forward + backward + recompute
    tp_comm: Array
    cp_comm: Array
    ep_comm: Array
    tp_bytes: Array  # sent per layer and microbatch in each group, over whichever link
    cp_bytes: Array
    ep_bytes: Array

    @property
    def total(self) -> Array:
        return self.forward + self.backward + self.recompute


def _layer_time(
    case: TrainingCase,
    lay: Layouts,
    lf: LayerFlops,
    *,
    moe: bool,
    tokens: Array,
    bw: dict[str, Array],
) -> _LayerTime:
    eff, hw, prof = case.eff, case.hw, case.profile
    tp = lay.tp.astype(np.float64)
    flash = prof.flash_attention
    gemm_rate = hw.peak_flops * eff.gemm_fraction(case.precision)
    # Attention runs in bf16 in FP8 training too (Transformer Engine's FP8 recipe covers
    # Linear layers), at the bf16 GEMM fraction times the attention kernel's own.
    bf16_rate = hw.bf16_peak_flops * eff.gemm_peak_fraction
    attn_rate = bf16_rate * eff.attention_fraction(prof.attention_kernel)
    mem_rate = hw.memory_bytes_per_s * eff.memory_bandwidth_fraction
    causal = 0.5 if flash else 1.0  # flash attention skips fully masked blocks
    overhead = lf.gemm_count * eff.kernel_overhead_s
    gemm_f = tokens * (lf.projections + lf.mlp + lf.router) / tp / gemm_rate + overhead
    core_f = tokens * lf.attention_core * causal / tp / attn_rate
    _, elem_bpt, softmax_bpt = _layer_bytes_per_token(case, lay, moe=moe)
    elem_f = tokens * (elem_bpt + _fp8_cast_bytes_per_token(case, lay, moe=moe)) / mem_rate
    soft_f = tokens * softmax_bpt / mem_rate
    h = float(case.arch.hidden)
    latency = np.where(
        lay.tp <= hw.scaleup_domain_gpus, eff.scaleup_latency_s, eff.scaleout_latency_s
    )
    # Tensor parallel: two collectives per layer and pass (all-reduce, or all-gather +
    # reduce-scatter with sequence parallelism: the same volume), 2(t-1)/t of T·h·2 bytes.
    tp_volume = 2 * (tp - 1) / tp * tokens * h * 2
    one = tp_volume / bw["tp"] + 2 * (tp - 1) * latency
    tp_pass = np.where(lay.tp > 1, 2 * one, 0.0)
    # Context parallel: K and V chunks travel around the ring, overlapped with attention.
    d_qk, d_v = qk_v_dims(case.arch)
    cp = lay.cp.astype(np.float64)
    kv_bytes = tokens * case.arch.kv_heads * (d_qk + d_v) * 2 / tp
    cp_f = np.where(lay.cp > 1, (cp - 1) * kv_bytes / bw["cp"], 0.0)
    # Expert parallel: all-to-all dispatch and combine of the routed token copies.
    ep = lay.ep.astype(np.float64)
    a2a = 2 * tokens * case.arch.experts_per_token * h * 2 * (ep - 1) / ep / tp
    ep_f = np.where((lay.ep > 1) & moe, a2a / bw["ep"], 0.0)
    k = eff.overlap_interference
    core_b_factor = 2.5 if flash else 2.0  # FlashAttention-2 backward: 5 GEMMs vs 2
    compute_f = gemm_f + elem_f
    compute_b = 2 * (gemm_f - overhead) + 2 * overhead + 2 * elem_f
    if prof.cp_overlap:
        attn_f = overlapped(core_f + soft_f, cp_f, k)
        attn_b = overlapped(core_f * core_b_factor + 2 * soft_f, 2 * cp_f, k)
    else:
        attn_f = core_f + soft_f + cp_f
        attn_b = core_f * core_b_factor + 2 * soft_f + 2 * cp_f
    if prof.tp_overlap:
        fwd = overlapped(compute_f, tp_pass, k) + attn_f + ep_f
        bwd = overlapped(compute_b, tp_pass, k) + attn_b + 2 * ep_f
    else:
        fwd = compute_f + tp_pass + attn_f + ep_f
        bwd = compute_b + tp_pass + attn_b + 2 * ep_f
    selective = np.zeros_like(core_f) if flash else core_f + soft_f
    if prof.selective_keeps == "matmul_outputs":  # the attention core and elementwise ops
        selective = core_f + soft_f + elem_f
    recompute = np.where(lay.recompute == 2, fwd, np.where(lay.recompute == 1, selective, 0.0))
    fwd_compute = compute_f + core_f + soft_f
    rec_compute = np.where(
        lay.recompute == 2, fwd_compute, np.where(lay.recompute == 1, selective, 0.0)
    )
    passes = np.where(lay.recompute == 2, 3.0, 2.0)
    return _LayerTime(
        forward=fwd,
        backward=bwd,
        recompute=recompute,
        compute=fwd_compute + compute_b + core_f * core_b_factor + 2 * soft_f + rec_compute,
        tp_comm=tp_pass * passes,
        cp_comm=cp_f * (passes + 1),
        ep_comm=ep_f * (passes + 1),
        tp_bytes=np.where(lay.tp > 1, 2 * tp_volume, 0.0) * passes,
        cp_bytes=np.where(lay.cp > 1, (cp - 1) * kv_bytes, 0.0) * (passes + 1),
        ep_bytes=np.where((lay.ep > 1) & moe, a2a, 0.0) * (passes + 1),
    )


def _bandwidths(case: TrainingCase, lay: Layouts) -> dict[str, Array]:
    """Effective per-GPU bandwidth of each parallel group (bytes/s)."""
    hw, eff = case.hw, case.eff
    up = hw.scaleup_bytes_per_s * eff.scaleup_link_fraction
    out = hw.scaleout_bytes_per_s * eff.scaleout_link_fraction
    domain, node = hw.scaleup_domain_gpus, hw.gpus_per_node

    # GPUs joined by the scale-up link: a board (node) or a rack-scale domain (NVL72).
    island = max(domain, node)

    def inside(span: IntArray, limit: int, ranks: IntArray) -> Array:
        # On a full mesh (xGMI) a group uses only the links to its own members.
        return np.where(span <= limit, up * hw.scaleup_share(ranks), out).astype(np.float64)

    dp_local = np.clip(island // np.maximum(lay.tp * lay.cp, 1), 1, lay.dp)
    return {
        "tp": inside(lay.tp, domain, lay.tp),
        "cp": inside(lay.tp * lay.cp, domain, lay.cp),
        "ep": inside(lay.tp * lay.ep, domain, lay.ep),
        "dp": ring_bandwidth(
            lay.tp * lay.cp,
            lay.dp,
            island,
            up * hw.scaleup_share(dp_local),
            out,
            rails=case.profile.dp_rails_aggregate,
        ),
        # Pipeline neighbours sit tp·cp·dp ranks apart (Megatron rank order): one peer.
        "pp": inside(lay.tp * lay.cp * lay.dp * 2, island, np.full_like(lay.pp, 2)),
    }


def _floats(a: IntArray) -> Array:
    return a.astype(np.float64)


@dataclass(frozen=True)
class _Stage:
    """The critical pipeline stage: its layers, their times and the parameters it holds."""

    dense: _LayerTime
    moe: _LayerTime
    n_dense: Array  # dense layers on the stage
    n_moe: Array
    logits_s: Array  # output layer + loss, forward and backward
    params_tp: Array  # parameters per GPU before data-parallel sharding
    tokens: Array  # tokens per microbatch on one GPU

    def sum(self, attr: str) -> Array:
        value: Array = self.n_dense * getattr(self.dense, attr) + self.n_moe * getattr(
            self.moe, attr
        )
        return value

    @property
    def time(self) -> Array:
        return self.sum("total") + self.logits_s

    @property
    def compute(self) -> Array:
        return self.sum("compute") + self.logits_s


def _stage(case: TrainingCase, lay: Layouts, bw: dict[str, Array]) -> _Stage:
    arch, eff, hw = case.arch, case.eff, case.hw
    tp, pp, ep = _floats(lay.tp), _floats(lay.pp), _floats(lay.ep)
    tokens = _floats(lay.mb) * case.seq_len / _floats(lay.cp)
    mflops = model_flops(arch, case.seq_len)
    # Uneven splits are allowed: the critical stage holds vs · ceil(L / (pp · vs)) layers.
    vs = _floats(lay.vs)
    share = vs * np.ceil(arch.layers / (pp * vs)) / max(arch.layers, 1)
    # The output layer stays in bf16 in FP8 recipes (not a Transformer Engine Linear).
    gemm_rate = hw.bf16_peak_flops * eff.gemm_peak_fraction
    mem_rate = hw.memory_bytes_per_s * eff.memory_bandwidth_fraction
    logits = 3 * (
        tokens * logits_flops(arch) / tp / gemm_rate + tokens * arch.vocab * 8 / tp / mem_rate
    )
    ps = _param_split(arch)
    layers = (arch.dense_layers * ps.dense_layer + arch.moe_layers * ps.moe_layer_shared) * share
    routed = arch.moe_layers * ps.moe_layer_routed * share / ep
    # The busiest stage holds an embedding table (both when there is one stage).
    embed = np.where(
        lay.pp == 1, ps.embed_input + ps.embed_output, max(ps.embed_input, ps.embed_output)
    )
    return _Stage(
        dense=_layer_time(case, lay, mflops.dense, moe=False, tokens=tokens, bw=bw),
        moe=_layer_time(case, lay, mflops.moe, moe=True, tokens=tokens, bw=bw),
        n_dense=arch.dense_layers * share,
        n_moe=arch.moe_layers * share,
        logits_s=logits,
        params_tp=(layers + embed) / tp + routed,
        tokens=tokens,
    )


@dataclass(frozen=True)
class _Memory:
    weights: Array
    grads: Array
    optimizer: Array
    activations: Array
    other: Array

    @property
    def total(self) -> Array:
        return self.weights + self.grads + self.optimizer + self.activations + self.other


def _memory(case: TrainingCase, lay: Layouts, st: _Stage, m: Array) -> _Memory:
    pp, vs, tp = _floats(lay.pp), _floats(lay.vs), _floats(lay.tp)
    # Sharded state spans the context-parallel ranks too: they hold the same weights, and
    # Megatron-Core's distributed optimizer and torchtitan's FSDP mesh shard over dp × cp
    # (parallel_state data-parallel group "with_context_parallel"; dp_shard_cp mesh).
    dp = _floats(lay.dp * lay.cp)
    zero, params = lay.zero, st.params_tp
    stored_d, _, _ = _layer_bytes_per_token(case, lay, moe=False)
    stored_m, _, _ = _layer_bytes_per_token(case, lay, moe=True)
    per_mb = st.tokens * (st.n_dense * stored_d + st.n_moe * stored_m)
    # 1F1B keeps min(m, pp) microbatches in flight on the first stage; interleaving adds
    # (pp-1)/(pp·v) (Korthikanti et al. 2022, §4.2.3).
    in_flight = np.minimum(m, pp) * np.where(lay.vs > 1, 1 + (pp - 1) / (pp * vs), 1.0)
    logits = st.tokens * case.arch.vocab * 8 / tp  # bf16 logits + fp32 copy and its gradient
    first, last = per_mb * in_flight, per_mb + logits
    activations = np.where(lay.pp == 1, first + logits, np.maximum(first, last))
    # ZeRO-3 holds the gathered current and prefetched layer in full.
    layer_params = params * pp / max(case.arch.layers, 1)
    gather = np.where(zero == 3, 2 * WEIGHT_BYTES * layer_params, 0.0)
    # FSDP-style full sharding keeps the fp32 parameter shard, which is the optimizer's
    # master copy (weights 4 B, Adam moments 8 B), and the gathered bf16 layers (`gather`);
    # ZeRO-3 proper keeps a bf16 shard beside an fp32 master (2 + 12 B).
    # Optimizer offload moves the whole fp32 state (master and moments) to host memory; the
    # GPU keeps bf16 weights (a bf16 shard under FSDP) and its gradients.
    off = lay.offloaded == 1
    fsdp = (zero >= 3) & case.profile.fp32_sharded_params & ~off
    master = MASTER_WEIGHT_BYTES
    state = np.where(fsdp, OPTIMIZER_STATE_BYTES - master, OPTIMIZER_STATE_BYTES)
    return _Memory(
        weights=np.where(fsdp, master, WEIGHT_BYTES) * params / np.where(zero >= 3, dp, 1.0),
        grads=case.profile.grad_bytes * params / np.where(zero >= 2, dp, 1.0),
        optimizer=np.where(off, 0.0, state) * params / np.where(zero >= 1, dp, 1.0),
        activations=activations,
        other=OTHER_RESERVE_BYTES + gather,
    )


def _optimizer(
    case: TrainingCase, lay: Layouts, shard_params: Array, mem_rate: float
) -> tuple[Array, Array, Array]:
    """(optimizer step seconds, of which offload seconds, host bytes per GPU).

    On the GPU the step streams OPTIMIZER_BYTES_PER_PARAM per local parameter through HBM.
    With optimizer offload (training_offload) the gradient shard goes to the host and the
    updated bf16 weights come back:
    shard × (grad_bytes + 2) bytes over the host link at HOST_LINK_EFFICIENCY; then the CPU
    streams the same 30 B/param the GPU's step would. Serialised after the backward and
    overlapped with nothing; the host holds the fp32 master and Adam moments (12 B/param).
    """
    off = lay.offloaded == 1
    link = host_link_bytes_per_s(case.hw) * HOST_LINK_EFFICIENCY
    traffic_s = shard_params * (case.profile.grad_bytes + WEIGHT_BYTES) / link
    cpu_s = shard_params * OPTIMIZER_BYTES_PER_PARAM / CPU_OPTIMIZER_BYTES_PER_S
    offload_s = np.where(off, traffic_s + cpu_s, 0.0)
    gpu_s = shard_params * OPTIMIZER_BYTES_PER_PARAM / mem_rate
    host_bytes = np.where(off, shard_params * OPTIMIZER_STATE_BYTES, 0.0)
    return np.where(off, offload_s, gpu_s), offload_s, host_bytes


def evaluate(case: TrainingCase, lay: Layouts) -> Evaluation:  # noqa: PLR0915 - one step model
    arch, eff, hw, prof = case.arch, case.eff, case.hw, case.profile
    pp, dp, vs = _floats(lay.pp), _floats(lay.dp), _floats(lay.vs)
    gpus = _floats(lay.gpus)
    microbatches = case.global_batch // (lay.dp * lay.mb)
    m = _floats(np.maximum(microbatches, 1))
    bw = _bandwidths(case, lay)
    st = _stage(case, lay, bw)
    k = eff.overlap_interference
    p2p_bytes = st.tokens * arch.hidden * 2 / _floats(lay.tp)  # scatter/gather over TP
    p2p = np.where(lay.pp > 1, 2 * (p2p_bytes / bw["pp"] + eff.scaleout_latency_s) * vs, 0.0)

    # ZeRO-3 gathers parameters every microbatch, once for the forward and once for the
    # backward, and reduce-scatters gradients; with prefetching this overlaps the stage's
    # compute. A recomputed forward adds no gather under FSDP: it runs inside the layer's
    # backward on the weights the pre-backward gather brought (FSDP wraps the checkpointed
    # block, so its pre-backward hook unshards before autograd replays the forward); a
    # profile that releases and fetches again around the recompute says so.
    regather = (lay.recompute == 2) & prof.recompute_regathers
    gathers = np.where(regather, 3.0, 2.0)
    z3_volume = st.params_tp * (gathers * WEIGHT_BYTES + prof.grad_reduce_bytes)
    z3 = np.where(
        lay.zero == 3, ring_time(z3_volume, lay.dp, bw["dp"], eff.scaleout_latency_s), 0.0
    )
    per_mb = st.time + p2p
    if prof.zero3_prefetch:
        t_mb = np.where(lay.zero == 3, overlapped(per_mb, z3, k), per_mb)
    else:
        t_mb = per_mb + z3
    bubble_mb = (pp - 1) / vs
    pipeline = (m + bubble_mb) * t_mb

    # Gradient sync once per step (ZeRO 0-2): all-reduce of gradients, or reduce-scatter
    # of gradients then all-gather of the updated bf16 weights (distributed optimizer).
    # The gradient part can hide under the last microbatch's backward (dp_overlap); the
    # weight all-gather only under the next step's first forward (param_gather_overlap),
    # since the weights it carries exist only after the optimizer step.
    grad_volume = np.where(
        lay.zero == 0,
        2 * st.params_tp * prof.grad_reduce_bytes,
        st.params_tp * prof.grad_reduce_bytes,
    )
    gather_volume = np.where(lay.zero == 0, 0.0, st.params_tp * WEIGHT_BYTES)
    reduce_s = ring_time(grad_volume, lay.dp, bw["dp"], eff.scaleout_latency_s)
    gather_s = ring_time(gather_volume, lay.dp, bw["dp"], eff.scaleout_latency_s)
    reduce_s = np.where(lay.zero == 3, 0.0, reduce_s)
    gather_s = np.where(lay.zero == 3, 0.0, gather_s)
    dp_sync = reduce_s + gather_s
    reduce_exposed = (
        overlap_exposed(reduce_s, st.sum("backward"), k) if prof.dp_overlap else reduce_s
    )
    gather_exposed = (
        overlap_exposed(gather_s, st.sum("forward"), k) if prof.param_gather_overlap else gather_s
    )
    dp_exposed = reduce_exposed + gather_exposed
    mem_rate = hw.memory_bytes_per_s * eff.memory_bandwidth_fraction
    shard = np.where(lay.zero >= 1, dp * _floats(lay.cp), 1.0)  # sharded over dp × cp
    optimizer, offload_s, host_bytes = _optimizer(case, lay, st.params_tp / shard, mem_rate)
    step = pipeline + dp_exposed + optimizer
    volumes = Volumes(p2p_bytes, grad_volume + gather_volume, z3_volume)
    out = scaleout_bytes(case, lay, st, m, volumes)  # what crosses nodes, of the above

    tokens_per_s = float(case.global_batch * case.seq_len) / step
    mflops = model_flops(arch, case.seq_len)
    mf = mflops.model_flops_per_token
    attn_core = (
        arch.dense_layers * mflops.dense.attention_core
        + arch.moe_layers * mflops.moe.attention_core
    )
    layer_fwd = mflops.forward_per_token - mflops.logits
    # Hardware FLOPs add what is computed twice: a whole forward with full recomputation,
    # the attention core with selective recomputation, and always with flash attention,
    # whose backward recomputes the scores (the time model's 2.5x backward holds it).
    flash = prof.flash_attention
    attn_again = np.where((lay.recompute == 1) | flash, attn_core, 0.0)
    hw_flops = mf + np.where(lay.recompute == 2, layer_fwd, 0.0) + attn_again
    tflops = mf * tokens_per_s / gpus / 1e12
    peak = hw.peak_flops
    meg = megatron2021_flops_per_sequence(arch, case.seq_len) * case.global_batch / step / gpus
    mem = _memory(case, lay, st, m)
    compute_mb = st.compute
    bubble = bubble_mb * t_mb
    exposed = m * (t_mb - compute_mb) + dp_exposed
    return Evaluation(
        microbatches=microbatches,
        step_time_s=step,
        compute_s=m * compute_mb,
        bubble_s=bubble,
        tp_comm_s=m * st.sum("tp_comm"),
        pp_comm_s=m * p2p,
        dp_comm_s=dp_sync + m * z3,
        dp_exposed_s=dp_exposed,
        cp_comm_s=m * st.sum("cp_comm"),
        ep_comm_s=m * st.sum("ep_comm"),
        optimizer_s=optimizer,
        exposed_comm_s=np.maximum(exposed, 0.0),
        tokens_per_s=tokens_per_s,
        model_flops_per_token=mf,
        hardware_flops_per_token=hw_flops,
        tflops_per_gpu=tflops,
        mfu=tflops * 1e12 / peak,
        hfu=hw_flops * tokens_per_s / gpus / peak,
        megatron2021_tflops_per_gpu=meg / 1e12,
        weights_bytes=mem.weights,
        gradients_bytes=mem.grads,
        optimizer_bytes=mem.optimizer,
        activations_bytes=mem.activations,
        other_bytes=mem.other,
        total_bytes=mem.total,
        params_per_gpu=st.params_tp / np.where(lay.zero >= 3, dp, 1.0),
        host_bytes=host_bytes,
        offload_s=offload_s,
        scaleout_tp_bytes=out.tp,
        scaleout_cp_bytes=out.cp,
        scaleout_ep_bytes=out.ep,
        scaleout_pp_bytes=out.pp,
        scaleout_dp_bytes=out.dp,
    )
