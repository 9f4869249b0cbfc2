"""ModelArch validation and defaults, and the model preset catalog that builds on it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.columns import unit_of
from gpufleet.catalog.models import (
    ARCH_COLUMNS,
    ModelPreset,
    get_model_preset,
    load_model_presets,
)
from gpufleet.catalog.table import read_header
from gpufleet.errors import UnknownNameError

LLAMA_2_7B: dict[str, Any] = {
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "ffn_hidden": 11008,
    "ffn_type": "swiglu",
    "vocab": 32000,
}
MIXTRAL: dict[str, Any] = {
    **LLAMA_2_7B,
    "kv_heads": 8,
    "ffn_hidden": 14336,
    "experts": 8,
    "experts_per_token": 2,
}
DEEPSEEK_V3: dict[str, Any] = {
    "layers": 61,
    "hidden": 7168,
    "heads": 128,
    "ffn_hidden": 18432,
    "ffn_type": "swiglu",
    "vocab": 129280,
    "experts": 256,
    "experts_per_token": 8,
    "shared_experts": 1,
    "moe_ffn_hidden": 2048,
    "first_dense_layers": 3,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
}


def messages(exc: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return [str(e["msg"]) for e in exc.value.errors()]


# --- defaults -----------------------------------------------------------------------------


def test_dense_defaults_follow_the_reference_implementations() -> None:
    arch = ModelArch(**LLAMA_2_7B)
    assert (arch.kv_heads, arch.head_dim, arch.attention) == (32, 128, "mha")
    assert (arch.experts, arch.experts_per_token, arch.moe_ffn_hidden) == (1, 1, None)
    assert (arch.is_moe, arch.moe_layers, arch.dense_layers) == (False, 0, 32)
    assert (arch.norm, arch.bias, arch.position_embedding) == ("rmsnorm", "none", "rope")
    assert arch.tied_embeddings is False


@pytest.mark.parametrize(
    ("kv_heads", "attention"),
    [
        pytest.param(32, "mha", id="mha"),
        pytest.param(8, "gqa", id="gqa"),
        pytest.param(1, "gqa", id="mqa-is-gqa-with-one-kv-head"),
    ],
)
def test_attention_is_derived_from_kv_heads(kv_heads: int, attention: str) -> None:
    assert ModelArch(**{**LLAMA_2_7B, "kv_heads": kv_heads}).attention == attention


def test_mla_is_derived_from_kv_lora_rank() -> None:
    arch = ModelArch(**DEEPSEEK_V3)
    assert arch.attention == "mla"
    assert arch.kv_heads == 128
    assert arch.head_dim == 128 + 64  # one query-key dot product: nope + rope
    assert (arch.moe_layers, arch.dense_layers) == (58, 3)


def test_moe_ffn_hidden_defaults_to_ffn_hidden() -> None:
    arch = ModelArch(**MIXTRAL)
    assert arch.moe_ffn_hidden == 14336
    assert (arch.moe_layers, arch.dense_layers) == (32, 0)


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    arch = ModelArch(**{**LLAMA_2_7B, "hidden": 4100, "head_dim": 128})
    assert arch.head_dim == 128


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(LLAMA_2_7B, id="dense"),
        pytest.param(MIXTRAL, id="moe"),
        pytest.param(DEEPSEEK_V3, id="mla-moe"),
    ],
)
def test_a_dump_validates_back_to_the_same_arch(fields: dict[str, Any]) -> None:
    arch = ModelArch(**fields)
    assert ModelArch.model_validate(arch.model_dump()) == arch


def test_schema_does_not_require_derived_fields() -> None:
    schema = ModelArch.model_json_schema()
    assert schema["required"] == ["layers", "hidden", "heads", "ffn_hidden", "ffn_type", "vocab"]
    assert {"kv_heads", "head_dim", "attention"} <= set(schema["properties"])


def test_arch_is_frozen() -> None:
    arch = ModelArch(**LLAMA_2_7B)
    with pytest.raises(ValidationError):
        arch.layers = 2  # type: ignore[misc]


# --- validation messages ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "change", "expected"),
    [
        pytest.param(
            LLAMA_2_7B,
            {"heads": 64, "kv_heads": 6, "head_dim": 64},
            "heads (64) must be a multiple of kv_heads (6)",
            id="kv-heads-do-not-divide",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"hidden": 4100},
            "hidden (4100) is not a multiple of heads (32); set head_dim",
            id="head-dim-not-derivable",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"kv_heads": 8, "attention": "mha"},
            "attention 'mha' needs kv_heads equal to heads (32), got 8; use 'gqa'",
            id="mha-with-fewer-kv-heads",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"attention": "gqa"},
            "attention 'gqa' needs kv_heads below heads (32); use 'mha'",
            id="gqa-without-grouping",
        ),
        pytest.param(
            MIXTRAL,
            {"experts_per_token": 9},
            "experts_per_token (9) must not exceed experts (8)",
            id="more-experts-per-token-than-experts",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"experts_per_token": 2},
            "experts_per_token (2) must not exceed experts (1)",
            id="dense-with-experts-per-token",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"shared_experts": 1, "moe_ffn_hidden": 2048},
            "shared_experts, moe_ffn_hidden apply only when experts > 1",
            id="moe-fields-on-dense",
        ),
        pytest.param(
            MIXTRAL,
            {"first_dense_layers": 32},
            "first_dense_layers (32) must be less than layers (32)",
            id="no-moe-layer-left",
        ),
        pytest.param(
            {**DEEPSEEK_V3, "attention": "mla"},
            {"kv_lora_rank": None, "v_head_dim": None},
            "attention 'mla' requires kv_lora_rank, v_head_dim",
            id="mla-missing-widths",
        ),
        pytest.param(
            DEEPSEEK_V3,
            {"kv_heads": 8},
            "attention 'mla' needs kv_heads equal to heads (128), got 8",
            id="mla-with-kv-groups",
        ),
        pytest.param(
            DEEPSEEK_V3,
            {"bias": "qkv"},
            "attention 'mla' supports only bias 'none'",
            id="mla-with-bias",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"attention": "gqa", "kv_heads": 8, "q_lora_rank": 1536},
            "q_lora_rank applies only to attention 'mla'",
            id="mla-field-on-gqa",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"position_embedding": "learned"},
            "position_embedding 'learned' requires max_seq_len",
            id="learned-positions-without-length",
        ),
        pytest.param(
            LLAMA_2_7B,
            {"kv_heads": 8, "attention": "mha", "position_embedding": "learned"},
            "attention 'mha' needs kv_heads equal to heads (32), got 8; use 'gqa'; "
            "position_embedding 'learned' requires max_seq_len",
            id="all-problems-at-once",
        ),
    ],
)
def test_cross_field_errors_say_what_to_change(
    base: dict[str, Any], change: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        ModelArch(**{**base, **change})
    assert messages(exc) == [expected]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        pytest.param("layers", 0, "layers must be a positive integer (got 0)", id="layers"),
        pytest.param("heads", -4, "heads must be a positive integer (got -4)", id="heads"),
        pytest.param("kv_heads", 0, "kv_heads must be a positive integer (got 0)", id="kv-heads"),
        pytest.param("vocab", 0, "vocab must be a positive integer (got 0)", id="vocab"),
        pytest.param("experts", 0, "experts must be a positive integer (got 0)", id="experts"),
        pytest.param(
            "max_seq_len", 0, "max_seq_len must be a positive integer (got 0)", id="max-seq-len"
        ),
        pytest.param(
            "shared_experts", -1, "shared_experts must be 0 or more (got -1)", id="shared"
        ),
    ],
)
def test_counts_must_be_positive(field: str, value: int, expected: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ModelArch(**{**LLAMA_2_7B, field: value})
    assert expected in messages(exc)
    assert exc.value.errors()[0]["loc"] == (field,)


def test_fractional_and_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError) as exc:
        ModelArch(**{**LLAMA_2_7B, "layers": 32.5, "hiden": 1})
    assert {e["loc"] for e in exc.value.errors()} == {("layers",), ("hiden",)}


# --- presets ----------------------------------------------------------------------------------

PRESETS = load_model_presets()
REQUIRED = (
    "gpt-3-175b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-405b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen2.5-72b",
)


def test_every_required_preset_is_present() -> None:
    assert {p.name for p in PRESETS} >= set(REQUIRED)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_presets_carry_provenance_and_a_valid_arch(preset: ModelPreset) -> None:
    assert preset.source
    assert preset.retrieved == dt.date(2026, 11, 29)
    assert preset.published_params_count > 0
    assert preset.arch().name == preset.name


def test_arch_columns_are_named_as_the_arch_fields_and_declared_dimensionless() -> None:
    header = set(read_header("models.csv"))
    assert set(ModelArch.model_fields) - {"name"} == ARCH_COLUMNS
    assert header >= ARCH_COLUMNS
    assert ModelPreset.dimensionless_columns == ARCH_COLUMNS
    assert set(ModelPreset.model_fields) >= ARCH_COLUMNS


@pytest.mark.parametrize("column", ["published_params_count", "published_active_params_count"])
def test_published_counts_carry_the_count_unit(column: str) -> None:
    assert unit_of(column) == "count"


def test_spot_check_published_configs() -> None:
    llama = get_model_preset("llama-3-70b").arch()
    assert (llama.layers, llama.hidden, llama.heads, llama.kv_heads) == (80, 8192, 64, 8)
    assert (llama.ffn_hidden, llama.vocab, llama.max_seq_len) == (28672, 128256, 8192)
    gpt3 = get_model_preset("gpt-3-175b").arch()
    assert (gpt3.layers, gpt3.hidden, gpt3.heads, gpt3.head_dim) == (96, 12288, 96, 128)
    assert (gpt3.ffn_hidden, gpt3.vocab, gpt3.max_seq_len) == (4 * 12288, 50257, 2048)
    ds = get_model_preset("deepseek-v3").arch()
    assert (ds.experts, ds.experts_per_token, ds.shared_experts) == (256, 8, 1)
    assert (ds.moe_ffn_hidden, ds.ffn_hidden, ds.first_dense_layers) == (2048, 18432, 3)
    assert (ds.q_lora_rank, ds.kv_lora_rank, ds.qk_rope_head_dim) == (1536, 512, 64)
    assert (ds.qk_nope_head_dim, ds.v_head_dim, ds.vocab) == (128, 128, 129280)


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        pytest.param("Llama-3-70B", "llama-3-70b", id="display-case"),
        pytest.param("meta-llama/Meta-Llama-3-70B", "llama-3-70b", id="hub-repo"),
        pytest.param("llama3-70b", "llama-3-70b", id="short"),
        pytest.param("LLAMA_3_70B", "llama-3-70b", id="underscores"),
        pytest.param("llama 2 7b", "llama-2-7b", id="spaces"),
        pytest.param("meta-llama/Llama-2-70b-hf", "llama-2-70b", id="hf-suffix"),
        pytest.param("meta-llama/Llama-3.1-405B", "llama-3.1-405b", id="405b-repo"),
        pytest.param("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b", id="mixtral-repo"),
        pytest.param("Mixtral-8x22B-v0.1", "mixtral-8x22b", id="mixtral-22b"),
        pytest.param("deepseek-ai/DeepSeek-V3-Base", "deepseek-v3", id="deepseek-base"),
        pytest.param("Qwen/Qwen2.5-72B", "qwen2.5-72b", id="qwen-repo"),
        pytest.param("GPT-3", "gpt-3-175b", id="gpt3"),
    ],
)
def test_aliases_resolve(alias: str, name: str) -> None:
    assert get_model_preset(alias).name == name


def test_unknown_model_suggests_the_closest_presets() -> None:
    with pytest.raises(UnknownNameError) as exc:
        get_model_preset("llama-3-7b")
    # How many near-ties to offer is errors.suggest's policy; the best match comes first.
    assert str(exc.value).startswith("unknown model 'llama-3-7b'; did you mean 'llama-3-70b'")
    assert exc.value.kind == "model"


def test_overriding_a_stated_field_rederives_what_the_row_left_empty() -> None:
    fields = get_model_preset("llama-2-7b").arch_fields()
    assert "head_dim" not in fields  # the published config does not state it
    arch = ModelArch.model_validate({**fields, "hidden": 2048, "heads": 16, "kv_heads": 16})
    assert arch.head_dim == 128
    assert ModelArch.model_validate({**fields, "hidden": 8192}).head_dim == 256


def test_a_preset_row_with_a_bad_arch_is_rejected_at_load() -> None:
    row = get_model_preset("llama-2-70b").model_dump()
    with pytest.raises(ValidationError) as exc:
        ModelPreset.model_validate({**row, "kv_heads": 6})
    assert messages(exc) == [
        "Value error, llama-2-70b: heads (64) must be a multiple of kv_heads (6)"
    ]
