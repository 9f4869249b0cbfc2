"""The inference estimator against every published ground-truth row, with the issue's targets."""

from __future__ import annotations

import pytest

from gpufleet.validation.inference import (
    KV,
    THROUGHPUT,
    TTFT,
    InferenceRow,
    load_rows,
    summarise,
    validate_inference,
)


@pytest.fixture(scope="module")
def results() -> list[InferenceRow]:
    return validate_inference()


def test_every_row_is_predicted(results: list[InferenceRow]) -> None:
    assert [r.id for r in results] == [row["id"] for row in load_rows()]
    assert {r.metric for r in results} <= set(THROUGHPUT) | set(TTFT) | set(KV)
    assert all(r.predicted > 0 for r in results)
    assert all(r.detail for r in results)


def test_every_kind_of_row_is_present(results: list[InferenceRow]) -> None:
    metrics = [r.metric for r in results]
    assert sum(m in THROUGHPUT for m in metrics) >= 3
    assert sum(m in TTFT for m in metrics) >= 2
    assert sum(m in KV for m in metrics) == 1


def test_throughput_rows_meet_the_target(results: list[InferenceRow]) -> None:
    assert summarise(results).throughput_median_abs <= 0.15


def test_ttft_rows_meet_the_target(results: list[InferenceRow]) -> None:
    assert summarise(results).ttft_median_abs <= 0.20


def test_kv_cache_row_meets_the_target(results: list[InferenceRow]) -> None:
    assert summarise(results).kv_abs <= 0.03


def test_summary_is_the_median_absolute_error() -> None:
    rows = [
        InferenceRow("a", "output_tokens_per_s_per_gpu", 100.0, 110.0, ""),
        InferenceRow("b", "tokens_per_s_system", 100.0, 70.0, ""),
        InferenceRow("c", "output_tokens_per_s_per_gpu", 100.0, 95.0, ""),
        InferenceRow("d", "ttft_ms", 10.0, 12.0, ""),
        InferenceRow("e", "ttft_ms", 10.0, 9.0, ""),
        InferenceRow("f", "kv_cache_gib", 10.0, 10.2, ""),
    ]
    s = summarise(rows)
    assert s.throughput_median_abs == pytest.approx(0.10)  # |+10%|, |−30%|, |−5%|
    assert s.ttft_median_abs == pytest.approx(0.15)  # |+20%|, |−10%|
    assert s.kv_abs == pytest.approx(0.02)
