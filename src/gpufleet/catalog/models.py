"""Model presets: published architectures, one row per model, read from their configs.

Architecture columns are named exactly as the `ModelArch` fields so that a row
becomes an architecture without a mapping table to keep in sync. They count
things (layers, heads, widths) rather than measure them, so they carry no unit
suffix; `dimensionless_columns` lists them for the column-naming check. Cells
a published config leaves out (most configs have no `head_dim`) stay empty and
take `ModelArch`'s derivation (`hidden // heads`), which is what the reference
implementations do too.

`published_params_count` is the total the publisher states, kept so a test can
hold the parameter counter to it; `published_active_params_count` the same for
the parameters an MoE model activates per token.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from pydantic import ValidationError, model_validator

from gpufleet.catalog.architecture import (
    Attention,
    Bias,
    FfnType,
    ModelArch,
    Norm,
    PositionEmbedding,
)
from gpufleet.catalog.lookup import NameIndex
from gpufleet.catalog.table import CatalogRow, load_rows

# Every ModelArch field except `name`, which a preset holds as its canonical name.
ARCH_COLUMNS: frozenset[str] = frozenset(ModelArch.model_fields) - {"name"}


class ModelPreset(CatalogRow):
    list_columns: ClassVar[frozenset[str]] = frozenset({"aliases"})
    # Architecture columns are counts, flags and choices, not physical quantities: exempt from
    # the unit-suffix rule, and the two flags keep ModelArch's names (no is_/has_ prefix).
    dimensionless_columns: ClassVar[frozenset[str]] = ARCH_COLUMNS
    table_columns: ClassVar[tuple[str, ...]] = (
        "name",
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "ffn_hidden",
        "experts",
        "vocab",
        "max_seq_len",
        "published_params_count",
    )

    name: str
    display_name: str
    aliases: tuple[str, ...] = ()
    layers: int
    hidden: int
    heads: int
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn_hidden: int
    ffn_type: FfnType
    vocab: int
    tied_embeddings: bool
    norm: Norm
    bias: Bias
    position_embedding: PositionEmbedding
    attention: Attention
    experts: int
    experts_per_token: int
    shared_experts: int
    moe_ffn_hidden: int | None = None
    first_dense_layers: int
    router_bias: bool
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    max_seq_len: int | None = None
    published_params_count: float
    published_active_params_count: float | None = None

    @model_validator(mode="after")
    def _valid_arch(self) -> ModelPreset:
        """A preset that is not a valid architecture is a data bug; report it at load."""
        try:
            self.arch()
        except ValidationError as exc:
            problems = "; ".join(str(e["msg"]) for e in exc.errors())
            raise ValueError(f"{self.name}: {problems}") from None
        return self

    def arch_fields(self) -> dict[str, Any]:
        """The architecture fields this row states, empty cells left out.

        Expand a preset with overrides from these rather than from `arch().model_dump()`:
        a dump also carries derived values (`head_dim = hidden // heads`) that an
        override of `hidden` or `heads` would leave stale.
        """
        stated = {c: getattr(self, c) for c in sorted(ARCH_COLUMNS) if getattr(self, c) is not None}
        return {"name": self.name, **stated}

    def arch(self) -> ModelArch:
        """The architecture; empty cells take ModelArch's defaults."""
        return ModelArch.model_validate(self.arch_fields())


@cache
def load_model_presets() -> tuple[ModelPreset, ...]:
    return load_rows("models.csv", ModelPreset)


@cache
def model_preset_index() -> NameIndex[ModelPreset]:
    return NameIndex("model", load_model_presets())


def get_model_preset(name: str) -> ModelPreset:
    """Look up a preset by canonical name or alias (hub repo id, short form), any case."""
    return model_preset_index().get(name)
