"""Parameter counts: exact per component, and within 1% of what each publisher states."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.models import get_model_preset, load_model_presets
from gpufleet.estimate.params import (
    ParamCount,
    attention_params_per_layer,
    mlp_params,
    parameter_count,
)

TOLERANCE = 0.01

# name: (published total, published active per token or None for dense), as the publishers
# state them. Held here as well as in models.csv so that editing the data to fit fails.
PUBLISHED: dict[str, tuple[float, float | None]] = {
    "gpt-3-175b": (175.0e9, None),
    "llama-2-7b": (6.74e9, None),
    "llama-2-13b": (13.0e9, None),
    "llama-2-70b": (68.98e9, None),
    "llama-3-8b": (8.03e9, None),
    "llama-3-70b": (70.6e9, None),
    "llama-3.1-405b": (405.9e9, None),
    "mixtral-8x7b": (46.7e9, 12.9e9),
    "mixtral-8x22b": (141e9, 39e9),
    "deepseek-v3": (671e9, 37e9),
    "qwen2.5-72b": (72.7e9, None),
}

# Exact counts, worked by hand from the published configs (see the module docstring of
# gpufleet.estimate.params for the formulas): pins every term, not only the 1% band.
EXACT: dict[str, tuple[int, int]] = {
    "gpt-3-175b": (174_604_259_328, 174_604_259_328),
    "llama-2-7b": (6_738_415_616, 6_738_415_616),
    "llama-2-13b": (13_015_864_320, 13_015_864_320),
    "llama-2-70b": (68_976_648_192, 68_976_648_192),
    "llama-3-8b": (8_030_261_248, 8_030_261_248),
    "llama-3-70b": (70_553_706_496, 70_553_706_496),
    "llama-3.1-405b": (405_853_388_800, 405_853_388_800),
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "mixtral-8x22b": (140_630_071_296, 39_161_468_928),
    "deepseek-v3": (671_026_419_200, 37_552_297_472),
    "qwen2.5-72b": (72_706_203_648, 72_706_203_648),
}

DEEPSEEK_ACTIVE_GAP = (
    "DeepSeek-V3's 37B activated (report abstract) cannot be reproduced within 1%: the exact "
    "count from the published config is 37.55B with both embeddings, the convention DeepSeek's "
    "own README_WEIGHTS.md states (it gives 36.7B) and the one Mixtral's 12.9B matches; without "
    "the input embedding it is 36.63B, 1.01% under. The 671B total matches to 0.004%."
)


def _relative_error(computed: int, published: float) -> float:
    return abs(computed - published) / published


def test_the_tables_cover_every_preset() -> None:
    assert {p.name for p in load_model_presets()} == set(PUBLISHED) == set(EXACT)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_catalog_holds_the_published_counts(name: str) -> None:
    preset = get_model_preset(name)
    total, active = PUBLISHED[name]
    assert preset.published_params_count == total
    assert preset.published_active_params_count == active


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_is_within_one_percent_of_the_published_count(name: str) -> None:
    counted = parameter_count(get_model_preset(name).arch())
    assert _relative_error(counted.total, PUBLISHED[name][0]) <= TOLERANCE


@pytest.mark.parametrize(
    "name",
    [
        "mixtral-8x7b",
        "mixtral-8x22b",
        pytest.param(
            "deepseek-v3", marks=pytest.mark.xfail(strict=True, reason=DEEPSEEK_ACTIVE_GAP)
        ),
    ],
)
def test_active_is_within_one_percent_of_the_published_count(name: str) -> None:
    counted = parameter_count(get_model_preset(name).arch())
    active = PUBLISHED[name][1]
    assert active is not None
    assert _relative_error(counted.active_per_token, active) <= TOLERANCE


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_counts(name: str) -> None:
    counted = parameter_count(get_model_preset(name).arch())
    assert (counted.total, counted.active_per_token) == EXACT[name]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_dense_models_activate_every_parameter(name: str) -> None:
    arch = get_model_preset(name).arch()
    counted = parameter_count(arch)
    assert (counted.active_per_token == counted.total) is (not arch.is_moe)
    assert (counted.routed_experts == 0) is (not arch.is_moe)


# --- components -------------------------------------------------------------------------------


def test_llama_2_7b_by_component() -> None:
    counted = parameter_count(get_model_preset("llama-2-7b").arch())
    assert counted == ParamCount(
        embedding=2 * 32000 * 4096,
        attention=32 * 4 * 4096 * 4096,
        mlp=32 * 3 * 4096 * 11008,
        routed_experts=0,
        router=0,
        norm=(2 * 32 + 1) * 4096,
        active_per_token=6_738_415_616,
        total=6_738_415_616,
    )
    assert counted.non_embedding == 6_738_415_616 - 2 * 32000 * 4096


def test_gqa_shrinks_only_k_and_v() -> None:
    arch = get_model_preset("llama-3-70b").arch()
    q_and_o = 2 * 8192 * 64 * 128
    k_and_v = 2 * 8192 * 8 * 128
    assert attention_params_per_layer(arch) == q_and_o + k_and_v


def test_deepseek_v3_mla_follows_the_published_projection_shapes() -> None:
    arch = get_model_preset("deepseek-v3").arch()
    q = 7168 * 1536 + 1536 * 128 * (128 + 64)  # q_a_proj, q_b_proj
    kv = 7168 * (512 + 64) + 512 * 128 * (128 + 128)  # kv_a_proj_with_mqa, kv_b_proj
    o = 128 * 128 * 7168
    assert attention_params_per_layer(arch) == q + kv + o == 187_105_280
    counted = parameter_count(arch)
    expert = 3 * 7168 * 2048
    assert counted.routed_experts == 58 * 256 * expert
    assert counted.mlp == 3 * 3 * 7168 * 18432 + 58 * (256 + 1) * expert
    assert counted.router == 58 * (7168 * 256 + 256)
    assert counted.norm == (2 * 61 + 1) * 7168 + 61 * (1536 + 512)
    assert counted.total - counted.active_per_token == 58 * (256 - 8) * expert


def test_mla_without_q_compression_projects_q_directly() -> None:
    fields: dict[str, Any] = {**get_model_preset("deepseek-v3").arch().model_dump()}
    fields["q_lora_rank"] = None
    arch = ModelArch.model_validate(fields)
    q = 7168 * 128 * (128 + 64)
    kv = 7168 * (512 + 64) + 512 * 128 * (128 + 128)
    assert attention_params_per_layer(arch) == q + kv + 128 * 128 * 7168


def test_qwen_qkv_biases() -> None:
    arch = get_model_preset("qwen2.5-72b").arch()
    without = arch.model_copy(update={"bias": "none"})
    assert attention_params_per_layer(arch) - attention_params_per_layer(without) == (
        64 * 128 + 2 * 8 * 128
    )


@pytest.mark.parametrize(
    ("ffn_type", "bias", "expected"),
    [
        pytest.param("gelu", "none", 2 * 1024 * 4096, id="gelu"),
        pytest.param("gelu", "all", 2 * 1024 * 4096 + 4096 + 1024, id="gelu-bias"),
        pytest.param("swiglu", "none", 3 * 1024 * 4096, id="swiglu"),
        pytest.param("swiglu", "all", 3 * 1024 * 4096 + 2 * 4096 + 1024, id="swiglu-bias"),
    ],
)
def test_mlp_matrices(ffn_type: str, bias: str, expected: int) -> None:
    arch = ModelArch.model_validate(
        {
            "layers": 2,
            "hidden": 1024,
            "heads": 8,
            "ffn_hidden": 4096,
            "ffn_type": ffn_type,
            "vocab": 100,
            "bias": bias,
        }
    )
    assert mlp_params(arch, 4096) == expected


def test_tying_drops_the_output_head() -> None:
    arch = get_model_preset("llama-2-7b").arch()
    tied = arch.model_copy(update={"tied_embeddings": True})
    assert parameter_count(arch).total - parameter_count(tied).total == 32000 * 4096


def test_param_count_rejects_inconsistent_parts() -> None:
    counted = parameter_count(get_model_preset("llama-2-7b").arch())
    with pytest.raises(ValueError, match="must equal the sum of its parts"):
        replace(counted, total=counted.total + 1)


# --- GPT-style models against Megatron's closed form ------------------------------------------

# Narayanan et al. 2021 (SC21), Table 1: layers, hidden, heads and the stated parameter count in
# billions, vocab 51200 and sequence length 2048. The paper rounds to 0.1B.
MEGATRON_TABLE_1 = [
    (24, 2304, 24, 1.7),
    (30, 3072, 32, 3.6),
    (36, 4096, 32, 7.5),
    (40, 6144, 48, 18.4),
    (48, 8192, 64, 39.1),
    (60, 10240, 80, 76.1),
    (80, 12288, 96, 145.6),
    (96, 16384, 128, 310.1),
    (105, 20480, 128, 529.6),
    (128, 25600, 160, 1008.0),
]


@pytest.mark.parametrize(
    ("layers", "hidden", "heads", "billions"),
    MEGATRON_TABLE_1,
    ids=[f"{row[3]}b" for row in MEGATRON_TABLE_1],
)
def test_gpt_counts_match_megatron_closed_form(
    layers: int, hidden: int, heads: int, billions: float
) -> None:
    vocab, seq = 51200, 2048
    arch = ModelArch.model_validate(
        {
            "layers": layers,
            "hidden": hidden,
            "heads": heads,
            "ffn_hidden": 4 * hidden,
            "ffn_type": "gelu",
            "vocab": vocab,
            "tied_embeddings": True,
            "norm": "layernorm",
            "bias": "all",
            "position_embedding": "learned",
            "max_seq_len": seq,
        }
    )
    # P = 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h)), multiplied out to stay in integers;
    # the closed form leaves out the final LayerNorm's weight and bias (2 h).
    closed_form = 12 * layers * hidden**2 + 13 * layers * hidden + (vocab + seq) * hidden
    total = parameter_count(arch).total
    assert total == closed_form + 2 * hidden
    assert abs(total / 1e9 - billions) <= 0.05
