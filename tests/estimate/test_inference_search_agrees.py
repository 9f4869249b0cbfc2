"""`estimate inference` and `search inference` give one answer for one spec.

Both pick the largest concurrency whose TPOT and unqueued TTFT meet the SLO from the same
levels (`slo_concurrency`); they used to try 64 and 48 levels, so the example spec got 502
requests in flight from `estimate` and 477 from `search` at fp8 tp 8 on an H100.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from gpufleet.estimate.inference_estimate import (
    CONCURRENCY_LEVELS,
    concurrency_levels,
    estimate_inference,
)
from gpufleet.plan.inference_search import search_inference
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import validate

EXAMPLE = Path(__file__).parents[2] / "examples" / "inference-llama2-70b.yaml"


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    return data


def _tight_slo() -> dict[str, Any]:
    data = _example()
    data["serving"]["slo"] = {"ttft_p99_ms": 500, "tpot_p99_ms": 40}
    return data


SPECS = [
    pytest.param(_example, id="example"),
    pytest.param(_tight_slo, id="tight-slo"),
]


def _pinned(data: dict[str, Any], accelerator: str, precision: str, tp: int) -> InferenceSpec:
    """The spec at one search candidate's accelerator, precision and tp (no GPU count, so
    the estimate sizes replicas for the rate as the search does)."""
    pinned = copy.deepcopy(data)
    pinned["hardware"] = {"accelerator": accelerator}
    pinned["serving"]["precision"] = precision
    pinned["parallelism"] = {"tp": tp, "pp": 1}
    return validate(InferenceSpec, pinned, "inline")


@pytest.mark.parametrize("make", SPECS)
def test_estimate_gives_every_search_candidate_its_concurrency(make: Any) -> None:
    data = make()
    spec = validate(InferenceSpec, data, "inline")
    found = search_inference(spec, ["h100-sxm5-80gb", "h200-sxm-141gb"], top_k=1000).top
    assert found
    for c in found:
        e = estimate_inference(_pinned(data, c.accelerator, c.precision, c.tp))
        where = f"{c.accelerator} {c.precision} tp{c.tp}"
        assert e.mode == "request_rate"
        assert e.batch == c.concurrency, where
        assert e.replica_capacity_output_tokens_per_s == pytest.approx(
            c.output_tokens_per_s_per_replica, rel=1e-12
        ), where
        assert e.tpot_ms == pytest.approx(c.tpot_ms, rel=1e-12), where
        assert e.replicas == c.replicas, where
        assert e.gpus == c.gpus, where


def test_the_example_gets_one_concurrency_from_both_commands() -> None:
    data = _example()
    spec = validate(InferenceSpec, data, "inline")
    top = search_inference(spec, ["h100-sxm5-80gb"], ["fp8"], top_k=1000).top
    tp8 = next(c for c in top if c.tp == 8)
    assert estimate_inference(spec).batch == tp8.concurrency


def test_levels_are_geometric_and_bounded() -> None:
    assert concurrency_levels(0).size == 0
    assert concurrency_levels(1).tolist() == [1.0]
    levels = concurrency_levels(2571)
    assert levels[0] == 1
    assert levels[-1] == 2571
    assert levels.size <= CONCURRENCY_LEVELS
    assert np.all(np.diff(levels) > 0)
