"""Issue 28 (item 2): the per-family efficiency fit on the modern training rows.

The thresholds are the figures the fit reaches (docs/validation.md), with a little room:
a change to the model that makes any of them worse fails here. The issue's targets
(8 % overall, 12 % per accelerator with >= 5 rows, no row worse than 30 %, 15 %
leave-one-source-out): all but the last are met; docs/validation.md says why.
"""

from __future__ import annotations

import pytest

from gpufleet.estimate.efficiency import fitted_parameters
from gpufleet.validation.modern import groups, median_abs
from gpufleet.validation.training_fit import ModernFit, fit_all, fit_modern, predict_all, prepare

# Median |error| per accelerator with >= 5 rows, as fitted (docs/validation.md), + ~1 point.
ACCELERATOR_LIMITS = {
    "h100-sxm5-80gb": 0.065,
    "mi300x": 0.06,
    "mi325x": 0.12,
    "tpu-v5p": 0.05,
}


@pytest.fixture(scope="module")
def fit() -> ModernFit:
    return fit_modern()


def test_the_shipped_parameters_are_what_the_fit_gives() -> None:
    """efficiency.yaml holds the fit's output (`--fit --write`), reproducibly."""
    prepared = prepare()
    _, fits, borrowed = fit_all(prepared)
    assert borrowed == ()
    fitted = {k: v for f in fits for k, v in f.parameters.items()}
    shipped = fitted_parameters("fitted-modern")
    assert set(fitted) == set(shipped)
    for name, (value, low, high) in shipped.items():
        assert fitted[name] == pytest.approx(value, rel=2e-3, abs=1e-4), name
        assert low <= value <= high, name


def test_modern_rows_after_the_fit() -> None:
    results = predict_all(prepare())
    errors = [r.error for r in results]
    assert len(results) == 125
    assert median_abs(errors) <= 0.065
    assert max(abs(e) for e in errors) <= 0.30  # the "no row worse than 30 %"
    by_accelerator = {g.key: g for g in groups(results, lambda r: r.accelerator, lambda r: r.error)}
    for accelerator, limit in ACCELERATOR_LIMITS.items():
        assert by_accelerator[accelerator].median_abs <= limit, accelerator
    by_precision = {g.key: g for g in groups(results, lambda r: r.precision, lambda r: r.error)}
    assert by_precision["bf16"].median_abs <= 0.065
    assert by_precision["fp8"].median_abs <= 0.07
    assert abs(by_precision["fp8"].median_signed) <= 0.05  # no longer optimistic on FP8


def test_leave_one_source_out(fit: ModernFit) -> None:
    assert fit.loso_median_abs <= 0.25
    by_source = {r.source: r for r in fit.loso}
    assert by_source["amd-rocm-training"].borrowed == ("cdna3",)  # borrowed from Hopper
    assert by_source["maxtext"].borrowed == ("tpu-v5p",)
    assert by_source["nemo-24.07"].median_abs <= 0.10


def test_the_per_source_view_is_the_median_of_the_sources_and_printed_beside_the_pooled(
    fit: ModernFit,
) -> None:
    """Two honest readings of "leave-one-source-out median": over the held-out rows (the one
    judged against the target; llm-foundry is over half of them) and over the sources."""
    from gpufleet.cli.validate_fit import fit_sections

    medians = sorted(r.median_abs for r in fit.loso)
    assert len(medians) == 7
    assert fit.loso_median_of_sources == medians[3]
    assert fit.loso_median_of_sources < fit.loso_median_abs  # llm-foundry's rows weigh in
    _, line = fit_sections(fit)
    assert f"{fit.loso_median_abs:.1%} over the held-out rows" in line
    assert f"({fit.loso_median_of_sources:.1%} as the median of the 7 sources' medians" in line
