"""Fit the per-family efficiency of current accelerators on the modern training rows.

`gpufleet validate training --rows modern --fit` runs this. Each family (a vendor
generation: Hopper, Blackwell, CDNA3, TPU v5p; efficiency.yaml `families`) has a few
physical parameters marked `fitted-modern`: the bf16 and FP8 GEMM fractions of the dense
peak, flash attention relative to bf16 GEMMs, the HBM fraction reached by memory-bound
kernels and, where rows cross nodes, the scale-out collective fraction. They are fitted on
that family's rows only (families share no fitted parameter, so the fits are independent),
by robust least squares on log(predicted / published) inside the ranges the YAML states,
with a weak prior pulling each value toward the family it would otherwise borrow from
(so a parameter the rows cannot see stays where physics put it instead of drifting).

Leave-one-source-out (`loso`) refits without every row of one publication and predicts
that publication's rows: the honest error for runs nobody fitted on. A family left without
rows is then borrowed from its `borrow` family with its penalty, exactly as a plan borrows
for an accelerator without rows.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpufleet.estimate.efficiency import (
    PENALISED,
    efficiency_for,
    efficiency_table,
    family_of,
    family_values,
)
from gpufleet.estimate.training import Layouts, TrainingCase
from gpufleet.validation.modern import Group, NotExpressibleError, groups, median_abs, source_of
from gpufleet.validation.training_modern import (
    METRICS,
    SOURCES,
    ModernTrainingResult,
    case_of,
    layouts_of,
    load_rows,
    predict_prepared,
)

MARKER = "fitted-modern"
# Width of the prior in log space: a parameter may move e^0.5 = 1.65x from the family it
# would borrow from at the cost of one row's residual (weak: data dominates when present).
PRIOR_LOG_SIGMA = 0.5
# Log-residual scale of the robust loss: rows further off than ~10 % weigh less than
# squared (outliers the model cannot express do not drag every other row).
ROBUST_SCALE = 0.1
# A device's own compute scale within its family is fitted only on this many of its rows.
MIN_DEVICE_ROWS = 5


@dataclass(frozen=True)
class Prepared:
    """A modern row rebuilt once: its case and the layouts the validation tries."""

    row: dict[str, str]
    source: str
    family: str
    case: TrainingCase
    layouts: Layouts


@dataclass(frozen=True)
class FamilyFit:
    family: str
    rows: int
    parameters: dict[str, float]  # `family.parameter` -> value


@dataclass(frozen=True)
class LosoResult:
    source: str
    rows: int
    median_abs: float
    median_signed: float
    borrowed: tuple[str, ...]  # families left without rows, borrowed in this refit


def prepare() -> list[Prepared]:
    """Every modern row the estimator can express, rebuilt once."""
    out = []
    for row in load_rows():
        if row["metric"] not in METRICS:
            continue
        try:
            case = case_of(row)
            lay = layouts_of(row, case)
        except NotExpressibleError:
            continue
        family = family_of(case.hw.accelerator)
        if family is None:
            continue
        out.append(Prepared(row, source_of(row, SOURCES), family, case, lay))
    return out


def predict_all(
    prepared: Sequence[Prepared], table: dict[str, Any] | None = None
) -> list[ModernTrainingResult]:
    """Predictions with the efficiencies of `table` (default: the shipped one)."""
    out = []
    for p in prepared:
        eff, _ = efficiency_for(p.case.hw.accelerator, table)
        out.append(predict_prepared(p.row, replace(p.case, eff=eff), p.layouts))
    return out


def _fitted_names(table: dict[str, Any], family: str) -> list[str]:
    fam = table["families"][family]
    params = {**fam.get("params", {}), **fam.get("device_gemm_scale", {})}
    return [n for n, spec in params.items() if spec.get("source") == MARKER]


def _prior(table: dict[str, Any], family: str, name: str) -> float:
    """The value the family would have without rows: its borrow family's (as fitted so far:
    families are fitted in YAML order, a borrow source first), GEMM fractions with the
    borrow penalty. Every parameter no row informs is set to it, so a fit never depends on
    the values it starts from."""
    spec = table["families"][family].get("params", {}).get(name, {})
    if "prior" in spec:  # a measurement outside the rows (kernel benchmark), cited in the YAML
        return float(spec["prior"]["value"])
    borrow = table["families"][family]["borrow"]
    value = family_values(str(borrow["family"]), table)[name]
    return value * float(borrow["penalty"]) if name in PENALISED else value


def _spec(table: dict[str, Any], family: str, name: str) -> dict[str, Any]:
    """A fitted parameter's YAML entry: `params.<name>`, or `device_gemm_scale.<device>`."""
    fam = table["families"][family]
    if name in fam.get("params", {}):
        spec: dict[str, Any] = fam["params"][name]
    else:
        spec = fam["device_gemm_scale"][name]
    return spec


def _set(table: dict[str, Any], family: str, name: str, value: float) -> None:
    _spec(table, family, name)["value"] = value


def fit_family(prepared: Sequence[Prepared], family: str, table: dict[str, Any]) -> FamilyFit:
    """Fit one family's `fitted-modern` parameters on its rows (writes them into `table`).

    A parameter no row informs (FP8 fraction without FP8 rows) keeps its prior value.
    """
    from scipy.optimize import least_squares

    rows = [p for p in prepared if p.family == family]
    names = _fitted_names(table, family)
    precisions = {p.case.precision for p in rows}
    if "fp8" not in precisions and "fp8_gemm_peak_fraction" in names:
        _set(table, family, "fp8_gemm_peak_fraction", _prior(table, family, "gemm_peak_fraction"))
        names.remove("fp8_gemm_peak_fraction")
    if "bf16" not in precisions and "gemm_peak_fraction" in names:
        _set(table, family, "gemm_peak_fraction", _prior(table, family, "gemm_peak_fraction"))
        names.remove("gemm_peak_fraction")
    kernels = {p.case.profile.attention_kernel for p in rows}
    for kernel, name in (("flash", "attention_vs_gemm"), ("fused", "fused_attention_vs_gemm")):
        if kernel not in kernels and name in names:
            _set(table, family, name, _prior(table, family, name))
            names.remove(name)
    devices = table["families"][family].get("device_gemm_scale", {})
    for device in [n for n in names if n in devices]:
        if sum(p.case.hw.accelerator == device for p in rows) < MIN_DEVICE_ROWS:
            _set(table, family, device, 1.0)
            names.remove(device)
    low = np.array([float(_spec(table, family, n)["range"][0]) for n in names])
    high = np.array([float(_spec(table, family, n)["range"][1]) for n in names])
    prior = np.array([1.0 if n in devices else _prior(table, family, n) for n in names])
    x0 = np.clip(prior, low + 1e-6, high - 1e-6)
    published = np.array([float(p.row["value"]) for p in rows])

    def residuals(x: np.ndarray) -> np.ndarray:
        for name, value in zip(names, x, strict=True):
            _set(table, family, name, float(value))
        predicted = np.array([r.predicted for r in predict_all(rows, table)])
        data = np.log(predicted / published)
        return np.concatenate([data, np.log(x / prior) / PRIOR_LOG_SIGMA])

    if rows and names:
        solution = least_squares(
            residuals, x0, bounds=(low, high), loss="soft_l1", f_scale=ROBUST_SCALE
        )
        residuals(solution.x)  # leave the solution in the table
    fitted = {
        f"{family}.{n}": float(_spec(table, family, n)["value"])
        for n in _fitted_names(table, family)
    }
    return FamilyFit(family, len(rows), fitted)


def _without_rows(table: dict[str, Any], family: str) -> None:
    """A family left without rows: its devices borrow from its `borrow` family."""
    fam = table["families"].pop(family)
    borrow = fam["borrow"]
    for device in fam["devices"]:
        table["nearest"][device] = {
            "family": borrow["family"],
            "penalty": borrow["penalty"],
            "why": f"refit without {family} rows (leave-one-source-out)",
        }


def fit_all(
    prepared: Sequence[Prepared], table: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[FamilyFit], tuple[str, ...]]:
    """Fit every family that has rows; borrow for the fitted families that have none.

    Returns the fitted table (a copy), the fits and the families borrowed."""
    fitted = copy.deepcopy(table or efficiency_table())
    fits = []
    borrowed = []
    families = [f for f, fam in fitted["families"].items() if "borrow" in fam]
    present = {p.family for p in prepared}
    for family in families:  # YAML order: a family's borrow source comes first
        if family in present:
            fits.append(fit_family(prepared, family, fitted))
        else:
            borrowed.append(family)
    for family in borrowed:
        _without_rows(fitted, family)
    return fitted, fits, tuple(borrowed)


def loso(prepared: Sequence[Prepared]) -> tuple[list[LosoResult], float]:
    """Refit without each source, predict its rows; per source and the median of all."""
    out = []
    errors_all: list[float] = []
    for source in dict.fromkeys(p.source for p in prepared):
        train = [p for p in prepared if p.source != source]
        test = [p for p in prepared if p.source == source]
        table, _, borrowed = fit_all(train)
        errors = [r.error for r in predict_all(test, table)]
        errors_all += errors
        out.append(
            LosoResult(
                source,
                len(test),
                median_abs(errors),
                statistics.median(errors),
                tuple(b for b in borrowed if any(p.family == b for p in test)),
            )
        )
    return out, median_abs(errors_all) if errors_all else math.nan


@dataclass(frozen=True)
class ModernFit:
    """What `validate training --rows modern --fit` reports."""

    parameters: dict[str, float]  # `family.parameter` -> fitted value
    rows: int
    before_median_abs: float  # with the parameters shipped in efficiency.yaml
    after_median_abs: float
    after_median_signed: float
    after_by_accelerator: list[Group]
    after_by_precision: list[Group]
    loso: list[LosoResult]
    loso_median_abs: float  # over every held-out row of every source

    @property
    def loso_median_of_sources(self) -> float:
        """The median of the sources' held-out medians, each source one vote: the pooled
        figure weighs a source by its rows (llm-foundry is over half of them), this one asks
        how a typical source fares. Reported beside it, never instead of it."""
        if not self.loso:
            return math.nan
        return statistics.median(r.median_abs for r in self.loso)


def fit_modern(with_loso: bool = True) -> ModernFit:
    """Fit every family on the modern rows; report residuals and leave-one-source-out."""
    prepared = prepare()
    before = [r.error for r in predict_all(prepared)]
    table, fits, _ = fit_all(prepared)
    after = predict_all(prepared, table)
    errors = [r.error for r in after]
    held, held_median = loso(prepared) if with_loso else ([], math.nan)
    return ModernFit(
        parameters={k: v for f in fits for k, v in f.parameters.items()},
        rows=len(prepared),
        before_median_abs=median_abs(before),
        after_median_abs=median_abs(errors),
        after_median_signed=statistics.median(errors),
        after_by_accelerator=groups(after, lambda r: r.accelerator, lambda r: r.error),
        after_by_precision=groups(after, lambda r: r.precision, lambda r: r.error),
        loso=held,
        loso_median_abs=held_median,
    )
