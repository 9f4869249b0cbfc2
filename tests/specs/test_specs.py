"""Valid specs load with defaults filled in, names canonical and quantities parsed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.errors import SpecError
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.kinds import load_spec
from gpufleet.specs.load import validate
from gpufleet.specs.teams import TeamsSpec
from gpufleet.specs.training import TrainingSpec

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_training_example_is_canonical_and_parsed() -> None:
    spec = load_spec(EXAMPLES / "training-llama3-405b.yaml")
    assert isinstance(spec, TrainingSpec)
    assert spec.hardware.accelerator == "h100-sxm5-80gb"
    assert spec.hardware.system == "dgx-h100"
    assert spec.hardware.scale_out == "ib-ndr-400"
    assert spec.training.tokens == 15_600_000_000_000
    assert spec.model.layers == 126
    assert spec.reliability is not None
    assert spec.reliability.checkpoint_storage == 200e9
    assert spec.data_parallel() == 128


def test_dp_is_derived_from_the_gpu_count() -> None:
    spec = validate(
        TrainingSpec,
        {
            "kind": "training",
            "model": "llama-3-8b",
            "training": {"seq_len": 8192, "global_batch": 512},
            "hardware": {"accelerator": "H100", "count": 64},
            "parallelism": {"tp": 4, "pp": 2},
        },
        "inline",
    )
    assert spec.data_parallel() == 8


def test_preset_override_recomputes_derived_fields() -> None:
    spec = validate(
        TrainingSpec,
        {
            "model": {"preset": "llama-3-8b", "hidden": 2048, "heads": 16},
            "training": {"seq_len": 2048, "global_batch": 64},
            "hardware": {"accelerator": "a100-sxm4-80gb", "count": 8},
        },
        "inline",
    )
    assert spec.model.head_dim == 128
    assert spec.model.layers == 32


def test_inference_example() -> None:
    spec = load_spec(EXAMPLES / "inference-llama2-70b.yaml")
    assert isinstance(spec, InferenceSpec)
    assert spec.serving.request_rate == 50
    assert spec.serving.mean_tokens("input") == 1024
    assert spec.serving.slo.ttft_p99_ms == 1000


def test_inference_token_distribution() -> None:
    spec = validate(
        InferenceSpec,
        {
            "model": {"preset": "llama-3-8b"},
            "serving": {"input_tokens": {"mean": 900, "p99": 4000}, "output_tokens": 300},
            "hardware": {"accelerator": "l4", "count": 1},
        },
        "inline",
    )
    assert spec.serving.mean_tokens("input") == 900
    assert spec.serving.max_tokens("input") == 4000


def test_cluster_example_resolves_mig_layout_names() -> None:
    spec = load_spec(EXAMPLES / "cluster.yaml")
    assert isinstance(spec, ClusterSpec)
    assert spec.total_gpus == 32 * 8 + 32 * 8 + 4 * 8 + 8 * 4
    a100 = next(g for g in spec.node_groups if g.name == "a100-inference")
    assert a100.mig_instances() == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_teams_example_defaults() -> None:
    spec = load_spec(EXAMPLES / "teams.yaml")
    assert isinstance(spec, TeamsSpec)
    research = next(t for t in spec.teams if t.name == "research")
    assert research.quotas[0].flavor == "h100-sxm5-80gb"
    assert research.default_priority == "opportunistic"


def test_specs_are_frozen() -> None:
    spec = load_spec(EXAMPLES / "teams.yaml")
    with pytest.raises(ValueError, match="frozen"):
        spec.kind = "cluster"  # type: ignore[misc]


@given(
    tp=st.sampled_from([1, 2, 4, 8, 16, 3, 5, 6]),
    pp=st.integers(min_value=1, max_value=40),
    count=st.integers(min_value=1, max_value=4096),
)
def test_layout_checks_agree_with_an_oracle(tp: int, pp: int, count: int) -> None:
    data: dict[str, Any] = {
        "model": "llama-2-70b",  # 64 heads, 80 layers
        "training": {"seq_len": 4096, "global_batch": 1024},
        "hardware": {"accelerator": "h100", "count": count},
        "parallelism": {"tp": tp, "pp": pp},
    }
    model_parallel = tp * pp
    dp = count // model_parallel
    runnable = (
        64 % tp == 0 and pp <= 80 and count % model_parallel == 0 and dp > 0 and 1024 % dp == 0
    )
    if not runnable:
        with pytest.raises(SpecError) as info:
            validate(TrainingSpec, data, "inline")
        assert info.value.problems
        assert all(
            p.startswith(("parallelism.", "hardware.", "training.")) for p in info.value.problems
        )
        return
    spec = validate(TrainingSpec, data, "inline")
    assert spec.data_parallel() == dp
