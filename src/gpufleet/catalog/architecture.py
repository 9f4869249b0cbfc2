"""A transformer architecture, as the planner needs it: shapes, not weights.

Fields follow the names of a Hugging Face `config.json` closely enough that a
published config can be copied field by field (`num_hidden_layers` ->
`layers`, `hidden_size` -> `hidden`, `intermediate_size` -> `ffn_hidden`, ...).

Defaults that the published configs leave implicit are filled in before
validation, so a validated `ModelArch` always carries concrete values and
round-trips through `model_dump()`:

- `kv_heads` defaults to `heads` (multi-head attention);
- `head_dim` defaults to `hidden // heads`, or for MLA to
  `qk_nope_head_dim + qk_rope_head_dim` (the width of one query-key dot product);
- `attention` defaults to "mla" when `kv_lora_rank` is given, else "mha" when
  `kv_heads == heads`, else "gqa" (multi-query attention is "gqa" with one KV head);
- `moe_ffn_hidden` defaults to `ffn_hidden` for MoE models, because a
  Mixtral-style config has no separate expert width: its `intermediate_size` is
  the expert width. Models whose dense and expert widths differ (DeepSeek-V3)
  must set both.

MoE layout: the first `first_dense_layers` layers use a dense FFN of width
`ffn_hidden` and every later layer is an MoE layer (DeepSeek's
`first_k_dense_replace`; Mixtral has 0). Interleaved layouts (MoE every other
layer) are not modelled; none of the presets needs them.

Cross-field problems are all reported at once, joined by "; ", each saying
what to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

FfnType = Literal["gelu", "swiglu"]
Attention = Literal["mha", "gqa", "mla"]
Norm = Literal["rmsnorm", "layernorm"]
Bias = Literal["none", "qkv", "all"]
PositionEmbedding = Literal["rope", "alibi", "learned"]

_POSITIVE = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden",
    "vocab",
    "experts",
    "experts_per_token",
    "moe_ffn_hidden",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "max_seq_len",
)
_NON_NEGATIVE = ("shared_experts", "first_dense_layers")
_MLA_REQUIRED = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MLA_FIELDS = ("q_lora_rank", *_MLA_REQUIRED)


def _as_int(value: Any) -> int | None:
    """An integer the defaults can be computed from; None leaves it to field validation."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _listed(fields: list[str]) -> str:
    """`a applies` / `a, b apply`: field names as the subject of a message."""
    return f"{', '.join(fields)} {'applies' if len(fields) == 1 else 'apply'}"


# Filled in by ModelArch._fill_defaults when omitted, so optional to write.
_DERIVED = frozenset({"kv_heads", "head_dim", "attention"})


def _derived_fields_optional(schema: JsonDict) -> None:
    """The printed schema must not call fields required that the user may leave out."""
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [f for f in required if f not in _DERIVED]


def _unset(data: Mapping[str, Any], key: str) -> bool:
    return data.get(key) is None


class ModelArch(BaseModel):
    """A decoder-only transformer: enough to count parameters, FLOPs and KV cache.

    Counts are plain integers (layers, heads, widths), never physical units.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_extra=_derived_fields_optional
    )
    # Filled from other fields; "missing" only matters when nothing else is wrong.
    derived_fields: ClassVar[frozenset[str]] = _DERIVED

    name: str | None = Field(default=None, description="Preset or display name; not used.")
    layers: int = Field(description="Transformer blocks (num_hidden_layers).")
    hidden: int = Field(description="Model width (hidden_size).")
    heads: int = Field(description="Query heads (num_attention_heads).")
    kv_heads: int = Field(description="Key/value heads (num_key_value_heads); default heads.")
    head_dim: int = Field(
        description="Width of one head; default hidden // heads, for MLA nope + rope."
    )
    ffn_hidden: int = Field(description="Dense FFN inner width (intermediate_size).")
    ffn_type: FfnType = Field(description="gelu: 2-matrix MLP; swiglu: gated 3-matrix MLP.")
    vocab: int = Field(description="Vocabulary size (vocab_size).")
    tied_embeddings: bool = Field(
        default=False, description="Output head shares the input table (tie_word_embeddings)."
    )
    norm: Norm = Field(
        default="rmsnorm", description="rmsnorm: a weight per channel; layernorm: weight + bias."
    )
    bias: Bias = Field(
        default="none",
        description="Linear biases: qkv only on q/k/v (Qwen2), all on every projection (GPT-3).",
    )
    position_embedding: PositionEmbedding = Field(
        default="rope",
        description="learned adds a max_seq_len x hidden table (GPT-3); rope/alibi add none.",
    )
    attention: Attention = Field(
        description="Default: mla if kv_lora_rank is set, else mha if kv_heads == heads, else gqa."
    )
    experts: int = Field(default=1, description="Routed experts per MoE layer; 1 = dense.")
    experts_per_token: int = Field(default=1, description="Routed experts each token uses.")
    shared_experts: int = Field(
        default=0, description="Experts every token uses, of width moe_ffn_hidden."
    )
    moe_ffn_hidden: int | None = Field(
        default=None, description="Expert inner width; default ffn_hidden when experts > 1."
    )
    first_dense_layers: int = Field(
        default=0, description="Leading layers with a dense FFN (first_k_dense_replace)."
    )
    router_bias: bool = Field(
        default=False, description="Learned per-expert router score bias (DeepSeek-V3)."
    )
    q_lora_rank: int | None = Field(
        default=None, description="MLA query compression rank; empty: q projected directly."
    )
    kv_lora_rank: int | None = Field(default=None, description="MLA key/value latent width.")
    qk_rope_head_dim: int | None = Field(default=None, description="MLA rotary part of q/k.")
    qk_nope_head_dim: int | None = Field(default=None, description="MLA non-rotary part of q/k.")
    v_head_dim: int | None = Field(default=None, description="MLA value head width.")
    max_seq_len: int | None = Field(
        default=None, description="Longest context (max_position_embeddings)."
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        """Make implicit config defaults explicit so every later step sees concrete values."""
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        heads = _as_int(out.get("heads"))
        if _unset(out, "kv_heads") and out.get("heads") is not None:
            out["kv_heads"] = out["heads"]
        if _unset(out, "attention"):
            kv_heads = _as_int(out.get("kv_heads"))
            if not _unset(out, "kv_lora_rank"):
                out["attention"] = "mla"
            elif heads is not None and kv_heads is not None:
                out["attention"] = "mha" if kv_heads == heads else "gqa"
        if _unset(out, "head_dim"):
            hidden = _as_int(out.get("hidden"))
            nope = _as_int(out.get("qk_nope_head_dim"))
            rope = _as_int(out.get("qk_rope_head_dim"))
            if out.get("attention") == "mla" and nope is not None and rope is not None:
                out["head_dim"] = nope + rope
            elif hidden is not None and heads is not None and heads > 0:
                if hidden % heads:
                    raise PydanticCustomError(
                        "arch",
                        f"hidden ({hidden}) is not a multiple of heads ({heads}); set head_dim",
                    )
                out["head_dim"] = hidden // heads
        experts = _as_int(out.get("experts"))
        if experts is not None and experts > 1 and _unset(out, "moe_ffn_hidden"):
            out["moe_ffn_hidden"] = out.get("ffn_hidden")
        return out

    @field_validator(*_POSITIVE)
    @classmethod
    def _positive(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 1:
            raise PydanticCustomError(
                "arch", f"{info.field_name} must be a positive integer (got {value})"
            )
        return value

    @field_validator(*_NON_NEGATIVE)
    @classmethod
    def _non_negative(cls, value: int, info: ValidationInfo) -> int:
        if value < 0:
            raise PydanticCustomError("arch", f"{info.field_name} must be 0 or more (got {value})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ModelArch:
        problems = [*self._attention_problems(), *self._moe_problems()]
        if self.position_embedding == "learned" and self.max_seq_len is None:
            problems.append("position_embedding 'learned' requires max_seq_len")
        if problems:
            raise PydanticCustomError("arch", "; ".join(problems))
        return self

    def _attention_problems(self) -> list[str]:
        problems: list[str] = []
        if self.attention == "mla":
            missing = [f for f in _MLA_REQUIRED if getattr(self, f) is None]
            if missing:
                problems.append(f"attention 'mla' requires {', '.join(missing)}")
            if self.kv_heads != self.heads:
                problems.append(
                    f"attention 'mla' needs kv_heads equal to heads ({self.heads}), "
                    f"got {self.kv_heads}"
                )
            if self.bias != "none":
                problems.append("attention 'mla' supports only bias 'none'")
            return problems
        extra = [f for f in _MLA_FIELDS if getattr(self, f) is not None]
        if extra:
            problems.append(f"{_listed(extra)} only to attention 'mla'")
        if self.heads % self.kv_heads:
            problems.append(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        elif self.attention == "mha" and self.kv_heads != self.heads:
            problems.append(
                f"attention 'mha' needs kv_heads equal to heads ({self.heads}), "
                f"got {self.kv_heads}; use 'gqa'"
            )
        elif self.attention == "gqa" and self.kv_heads == self.heads:
            problems.append(f"attention 'gqa' needs kv_heads below heads ({self.heads}); use 'mha'")
        return problems

    def _moe_problems(self) -> list[str]:
        problems: list[str] = []
        if self.experts_per_token > self.experts:
            problems.append(
                f"experts_per_token ({self.experts_per_token}) must not exceed "
                f"experts ({self.experts})"
            )
        if self.experts == 1:
            dense_only = {
                "shared_experts": self.shared_experts or None,
                "moe_ffn_hidden": self.moe_ffn_hidden,
                "first_dense_layers": self.first_dense_layers or None,
                "router_bias": self.router_bias or None,
            }
            extra = [k for k, v in dense_only.items() if v is not None]
            if extra:
                problems.append(f"{_listed(extra)} only when experts > 1")
        elif self.first_dense_layers >= self.layers:
            problems.append(
                f"first_dense_layers ({self.first_dense_layers}) must be less than "
                f"layers ({self.layers})"
            )
        return problems

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return self.layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers whose FFN is one dense MLP of width `ffn_hidden`."""
        return self.layers - self.moe_layers
