"""FLOPs of a decoder-only transformer, per token, split the way the time model needs.

Counts are multiply-adds × 2 of the matrix products, forward pass, for the
whole model (before any parallel split). Attention-core FLOPs are given for
the full (non-causal) score matrix; kernels that skip masked blocks (flash
attention with a causal mask) do about half, which the time model applies.

Model FLOPs per token (the MFU numerator) = 3 × forward matrix FLOPs, with
attention counted over the full context as in Narayanan et al. 2021 and
Chowdhery et al. 2022 (PaLM, appendix B: 6N + 12·L·H·Q·T).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.catalog.architecture import ModelArch


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs per token of one layer (dense or MoE), by kernel class."""

    projections: float  # q/k/v and output projections (incl. MLA down/up projections)
    attention_core: float  # QK^T and A·V over a context of `seq_len` (full, non-causal)
    mlp: float  # dense FFN, or the experts a token uses plus shared experts
    router: float  # MoE gate
    gemm_count: int  # matrix-product kernels per layer forward (for launch/tail overhead)

    @property
    def total(self) -> float:
        return self.projections + self.attention_core + self.mlp + self.router


def qk_v_dims(arch: ModelArch) -> tuple[int, int]:
    """Per-head widths of the query-key product and of values."""
    if arch.attention == "mla":
        nope, rope, v = arch.qk_nope_head_dim, arch.qk_rope_head_dim, arch.v_head_dim
        if nope is None or rope is None or v is None:
            raise ValueError("MLA attention needs qk_nope_head_dim, qk_rope_head_dim, v_head_dim")
        return nope + rope, v
    return arch.head_dim, arch.head_dim


def projection_flops(arch: ModelArch) -> float:
    h, a, g, d = arch.hidden, arch.heads, arch.kv_heads, arch.head_dim
    if arch.attention != "mla":
        return 2.0 * h * (a + 2 * g) * d + 2.0 * a * d * h
    d_qk, d_v = qk_v_dims(arch)
    if arch.kv_lora_rank is None or arch.qk_rope_head_dim is None or arch.qk_nope_head_dim is None:
        raise ValueError("MLA attention needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim")
    if arch.q_lora_rank:
        q = 2.0 * h * arch.q_lora_rank + 2.0 * arch.q_lora_rank * a * d_qk
    else:
        q = 2.0 * h * a * d_qk
    kv_down = 2.0 * h * (arch.kv_lora_rank + arch.qk_rope_head_dim)
    kv_up = 2.0 * arch.kv_lora_rank * a * (arch.qk_nope_head_dim + d_v)
    return q + kv_down + kv_up + 2.0 * a * d_v * h


def attention_core_flops(arch: ModelArch, context: int) -> float:
    d_qk, d_v = qk_v_dims(arch)
    return 2.0 * arch.heads * context * (d_qk + d_v)


def mlp_flops(arch: ModelArch, width: int) -> float:
    matrices = 3 if arch.ffn_type == "swiglu" else 2
    return 2.0 * matrices * arch.hidden * width


def dense_layer(arch: ModelArch, context: int) -> LayerFlops:
    gemms = 4 + (3 if arch.ffn_type == "swiglu" else 2)
    return LayerFlops(
        projections=projection_flops(arch),
        attention_core=attention_core_flops(arch, context),
        mlp=mlp_flops(arch, arch.ffn_hidden),
        router=0.0,
        gemm_count=gemms,
    )


def moe_layer(arch: ModelArch, context: int) -> LayerFlops:
    width = arch.moe_ffn_hidden or arch.ffn_hidden
    used = arch.experts_per_token + arch.shared_experts
    per_expert_gemms = 3 if arch.ffn_type == "swiglu" else 2
    return LayerFlops(
        projections=projection_flops(arch),
        attention_core=attention_core_flops(arch, context),
        mlp=used * mlp_flops(arch, width),
        router=2.0 * arch.hidden * arch.experts,
        # Grouped GEMMs: one launch per matrix for all local experts, plus shared and router.
        gemm_count=4 + per_expert_gemms * (1 + min(1, arch.shared_experts)) + 1,
    )


def logits_flops(arch: ModelArch) -> float:
    return 2.0 * arch.hidden * arch.vocab


@dataclass(frozen=True)
class ModelFlops:
    """Forward FLOPs per token of the whole model."""

    dense_layers: int
    moe_layers: int
    dense: LayerFlops
    moe: LayerFlops
    logits: float

    @property
    def forward_per_token(self) -> float:
        return self.dense_layers * self.dense.total + self.moe_layers * self.moe.total + self.logits

    @property
    def model_flops_per_token(self) -> float:
        """Forward + backward (2×) with no recomputation: the MFU numerator."""
        return 3.0 * self.forward_per_token


def model_flops(arch: ModelArch, seq_len: int) -> ModelFlops:
    return ModelFlops(
        dense_layers=arch.dense_layers,
        moe_layers=arch.moe_layers,
        dense=dense_layer(arch, seq_len),
        moe=moe_layer(arch, seq_len),
        logits=logits_flops(arch),
    )


def megatron2021_flops_per_sequence(arch: ModelArch, seq_len: int) -> float:
    """Narayanan et al. 2021 eq. 3 per sequence: 96·s·l·h²·(1 + s/(6h) + V/(16·l·h)).

    It assumes a 4h GELU MLP and counts full activation recomputation; used only to
    compare with published figures quoted in that convention.
    """
    s, layers, h, v = seq_len, arch.layers, arch.hidden, arch.vocab
    return 96.0 * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
