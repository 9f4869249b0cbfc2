"""The inference estimator on the modern rows: every row compared, the H100/H200 pairs
compared as ratios, and the accuracy the per-generation fit reaches (issue 28 item 5), so a
regression fails here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufleet.estimate.inference import static_batch
from gpufleet.validation.inference_modern import (
    LATENCY,
    ModernInferenceResult,
    PairRatio,
    case_of,
    load_rows,
    summarise_modern,
    validate_modern,
)
from gpufleet.validation.modern import ACCELERATORS, Skipped, SkipReason

Results = tuple[list[ModernInferenceResult], list[Skipped], list[PairRatio]]


@pytest.fixture(scope="module")
def validated() -> Results:
    return validate_modern()


def test_the_modern_file_loads_with_its_columns() -> None:
    rows = load_rows()
    assert len(rows) == 143
    assert len({r["id"] for r in rows}) == len(rows)
    assert {"scenario", "source_url", "precision", "engine"} <= set(rows[0])
    assert {r["gpu"] for r in rows} <= set(ACCELERATORS)


def test_every_row_is_compared_or_skipped_for_a_fixed_reason(validated: Results) -> None:
    results, skipped, _ = validated
    ids = [r["id"] for r in load_rows()]
    assert sorted([r.id for r in results] + [s.id for s in skipped]) == sorted(ids)
    assert all(math.isfinite(r.predicted) and r.predicted > 0 for r in results)
    # NVFP4 rows run at the catalog's FP4 peak: nothing is skipped any more.
    assert skipped == []
    fp4 = [r for r in results if r.precision == "fp4"]
    assert len(fp4) == 40
    assert {r.accelerator for r in fp4} == {"b200-sxm-192gb", "gb200"}


def test_pairs_are_h100_and_h200_at_the_same_settings(validated: Results) -> None:
    results, _, pairs = validated
    assert len(pairs) == 20  # Llama 3.1 8B TP1 and 405B TP8, 10 request shapes each
    assert {(p.model, p.tp) for p in pairs} == {("llama-3.1-8b", 1), ("llama-3.1-405b", 8)}
    by_id = {r.id: r for r in results}
    h200 = by_id["trt-h200-llama-31-8b-tp1-fp8-i128-o2048"]
    h100 = by_id["trt-h100-llama-31-8b-tp1-fp8-i128-o2048"]
    pair = next(
        p
        for p in pairs
        if p.model == "llama-3.1-8b" and p.output_tokens == 2048 and p.input_tokens == 128
    )
    assert pair.published == pytest.approx(26221 / 22714)
    assert pair.predicted == pytest.approx(h200.predicted / h100.predicted)


def test_a_latency_row_by_hand(validated: Results) -> None:
    """OCI's batch-1 405B row: prefill of 128 tokens then 128 decode steps on 8 MI300X."""
    row = next(r for r in load_rows() if r["id"] == "oci-mi300x-llama31-405b-fp8-b1-i128-o128")
    case = case_of(row)
    assert case.engine.name == "vllm"
    assert "cdna3" in case.engine.source  # the vLLM profile fitted on MI300X rows
    served = static_batch(case, np.array([8.0]), np.array([1.0]), 128.0, 128.0)
    expected = float(served.ttft_s[0] + 127 * served.tpot_s[0])
    result = next(r for r in validated[0] if r.id == row["id"])
    assert result.metric == LATENCY
    assert result.predicted == pytest.approx(expected)
    assert result.throughput_error == pytest.approx(3.530 / expected - 1)


def test_summary_counts(validated: Results) -> None:
    s = summarise_modern(*validated)
    assert s.validated + s.skipped == 143
    assert sum(g.rows for g in s.by_accelerator) == s.validated
    assert sum(g.rows for g in s.by_metric) == s.validated
    assert s.skipped_by_reason[SkipReason.precision_not_modelled.value] == 0
    assert math.isfinite(s.pairs_median_abs)
    assert abs(s.worst[0].throughput_error) == max(abs(r.throughput_error) for r in validated[0])


# --- the accuracy the fit reaches (issue 28 item 5; issue targets: median <= 12 %, every
# H100/H200 pair within 15 %). Thresholds are what the fit reaches, with a little slack.


def test_modern_median_error_meets_the_fitted_level(validated: Results) -> None:
    s = summarise_modern(*validated)
    assert s.validated == 143
    assert s.median_abs <= 0.06  # reached 5.0 % (4.4 % before TensorRT-LLM's KV fraction
    # was read as a share of free memory); issue target 12 %
    assert s.within_15 >= 128  # reached 133 of 143


def test_every_accelerator_is_within_ten_percent(validated: Results) -> None:
    s = summarise_modern(*validated)
    by = {g.key: g for g in s.by_accelerator}
    assert set(by) == {"h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-192gb", "gb200", "mi300x"}
    assert all(g.median_abs <= 0.10 for g in by.values()), by  # worst reached: mi300x 7.7 %


def test_h200_h100_pairs(validated: Results) -> None:
    """Every pair within the issue's 15 % (worst reached: 405B at 128 in / 4k out, -14.8 %,
    since TensorRT-LLM's KV fraction is a share of the free memory, which gives the H100 24 %
    more KV cache at 405B tp 8 and the H200 7 %; it was -1.8 % and the worst -6.7 % while the
    fraction was read as one of the whole device. 405B at 20k in / 2k out was -17.8 % before
    prompts were scheduled a chunk at a time)."""
    _, _, pairs = validated
    assert all(abs(p.error) <= 0.15 for p in pairs), [p for p in pairs if abs(p.error) > 0.15]
    assert summarise_modern(*validated).pairs_median_abs <= 0.05  # reached 4.5 % (was 2.7 %)
