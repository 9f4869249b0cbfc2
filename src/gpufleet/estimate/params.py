"""Exact parameter counts of a `ModelArch`.

Memory, FLOP and checkpoint estimates all start from the parameter count, so
it is counted exactly, weight matrix by weight matrix, rather than with the
`12 * layers * hidden^2` rule of thumb (which is 2% off for Llama-2-7B and
meaningless for GQA, MLA or MoE models). The presets' counts are tested
against the totals their publishers state.

For a GPT-style model (LayerNorm, biases everywhere, tied embeddings, learned
positions) the result equals Narayanan et al. 2021 §5.1,
    P = 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)),
plus the final LayerNorm's 2 h, which that closed form leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.catalog.architecture import ModelArch


@dataclass(frozen=True, slots=True)
class ParamCount:
    """Parameters by component; `total` is their sum.

    `mlp` holds every FFN weight: dense FFN layers, shared experts and routed
    experts; `routed_experts` is the routed-expert part of it. `norm` holds
    every normalisation weight, including MLA's two low-rank RMSNorms.
    `active_per_token` is what one token's forward pass touches: `total` less
    the routed experts the router does not pick. Like Mistral AI (Mixtral
    8x7B: 12.9B active) and DeepSeek (whose activated count "includes 0.9B for
    Embedding and 0.9B for the output Head"), it includes both embedding tables.
    """

    embedding: int
    attention: int
    mlp: int
    routed_experts: int
    router: int
    norm: int
    active_per_token: int
    total: int

    def __post_init__(self) -> None:
        parts = self.embedding + self.attention + self.mlp + self.router + self.norm
        if parts != self.total:
            raise ValueError(f"total ({self.total}) must equal the sum of its parts ({parts})")
        if self.routed_experts > self.mlp or self.active_per_token > self.total:
            raise ValueError("routed_experts must be part of mlp, active_per_token of total")

    @property
    def non_embedding(self) -> int:
        """Parameters outside the embedding tables (Kaplan et al. 2020's N)."""
        return self.total - self.embedding


def embedding_params(arch: ModelArch) -> int:
    """Input table `vocab * hidden`, output head `vocab * hidden` unless tied, and a
    learned `max_seq_len * hidden` position table when the model has one (GPT-3)."""
    tables = 1 if arch.tied_embeddings else 2
    count = tables * arch.vocab * arch.hidden
    if arch.position_embedding == "learned":
        assert arch.max_seq_len is not None  # ModelArch requires it for learned positions
        count += arch.max_seq_len * arch.hidden
    return count


def attention_params_per_layer(arch: ModelArch) -> int:
    """Projection weights (and biases) of one attention block; norms are counted separately.

    MHA/GQA (Vaswani et al. 2017; Ainslie et al. 2023): q and o are
    `hidden x heads*head_dim`, k and v are `hidden x kv_heads*head_dim` each.
    Bias "qkv" adds `(heads + 2 kv_heads) * head_dim`; "all" adds `hidden` more for o.

    MLA (DeepSeek-V2 report §2.1.2 eqs. 9-14; DeepSeek-V3 report §2.1.1), with
    `dq = qk_nope_head_dim + qk_rope_head_dim`:
        q:  hidden x q_lora_rank + q_lora_rank x heads*dq   (hidden x heads*dq without q_lora_rank)
        kv: hidden x (kv_lora_rank + qk_rope_head_dim)
            + kv_lora_rank x heads*(qk_nope_head_dim + v_head_dim)
        o:  heads*v_head_dim x hidden
    """
    if arch.attention == "mla":
        return _mla_params_per_layer(arch)
    q_width = arch.heads * arch.head_dim
    kv_width = arch.kv_heads * arch.head_dim
    count = 2 * arch.hidden * q_width + 2 * arch.hidden * kv_width
    if arch.bias in ("qkv", "all"):
        count += q_width + 2 * kv_width
    if arch.bias == "all":
        count += arch.hidden
    return count


def _mla_params_per_layer(arch: ModelArch) -> int:
    assert arch.kv_lora_rank is not None  # ModelArch requires the MLA widths for "mla"
    assert arch.qk_rope_head_dim is not None
    assert arch.qk_nope_head_dim is not None
    assert arch.v_head_dim is not None
    q_out = arch.heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
    if arch.q_lora_rank is None:
        q = arch.hidden * q_out
    else:
        q = arch.hidden * arch.q_lora_rank + arch.q_lora_rank * q_out
    kv_down = arch.hidden * (arch.kv_lora_rank + arch.qk_rope_head_dim)
    kv_up = arch.kv_lora_rank * arch.heads * (arch.qk_nope_head_dim + arch.v_head_dim)
    o = arch.heads * arch.v_head_dim * arch.hidden
    return q + kv_down + kv_up + o


def mlp_params(arch: ModelArch, width: int) -> int:
    """One FFN of inner width `width`.

    GELU: up `hidden x width` and down `width x hidden` (2 matrices; biases `width + hidden`).
    SwiGLU (Shazeer 2020): gate, up and down (3 matrices; biases `2 width + hidden`).
    """
    matrices = 3 if arch.ffn_type == "swiglu" else 2
    count = matrices * arch.hidden * width
    if arch.bias == "all":
        count += (matrices - 1) * width + arch.hidden
    return count


def router_params_per_layer(arch: ModelArch) -> int:
    """The gate `hidden x experts`, plus one score bias per expert where the model has one."""
    if not arch.is_moe:
        return 0
    return arch.hidden * arch.experts + (arch.experts if arch.router_bias else 0)


def norm_params(arch: ModelArch) -> int:
    """Two pre-norms per layer plus the final norm; MLA adds its q and kv low-rank RMSNorms.

    RMSNorm (Zhang & Sennrich 2019) has one weight per channel; LayerNorm (Ba et
    al. 2016) a weight and a bias.
    """
    per_norm = arch.hidden * (2 if arch.norm == "layernorm" else 1)
    count = (2 * arch.layers + 1) * per_norm
    if arch.attention == "mla":
        assert arch.kv_lora_rank is not None
        low_rank = arch.kv_lora_rank + (arch.q_lora_rank or 0)
        count += arch.layers * low_rank * (2 if arch.norm == "layernorm" else 1)
    return count


def parameter_count(arch: ModelArch) -> ParamCount:
    """Count every weight of `arch`; see the helpers above for each formula.

    MoE layers hold `experts` routed and `shared_experts` shared FFNs of width
    `moe_ffn_hidden` (DeepSeek-V3's shared expert has the routed width) and a
    router; the first `first_dense_layers` layers hold a dense FFN of width
    `ffn_hidden`. Multi-token-prediction modules are not part of `ModelArch`
    (DeepSeek-V3's 671B excludes them).
    """
    dense_mlp = arch.dense_layers * mlp_params(arch, arch.ffn_hidden)
    expert = mlp_params(arch, arch.moe_ffn_hidden) if arch.moe_ffn_hidden is not None else 0
    routed = arch.moe_layers * arch.experts * expert
    shared = arch.moe_layers * arch.shared_experts * expert
    embedding = embedding_params(arch)
    attention = arch.layers * attention_params_per_layer(arch)
    router = arch.moe_layers * router_params_per_layer(arch)
    norm = norm_params(arch)
    mlp = dense_mlp + shared + routed
    total = embedding + attention + mlp + router + norm
    idle_experts = arch.moe_layers * (arch.experts - arch.experts_per_token) * expert
    return ParamCount(
        embedding=embedding,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        router=router,
        norm=norm,
        active_per_token=total - idle_experts,
        total=total,
    )
