"""Fit the engine profiles per accelerator generation on the modern inference rows.

Why per (engine, generation): TensorRT-LLM on Hopper, TensorRT-LLM on Blackwell (NVFP4) and
vLLM on MI300X reach different fractions of their datasheets, and the A100-era profile in
engines.yaml must keep holding on the A100 rows it was fitted on. Each group is a bounded
least-squares fit of the log throughput error over the group's rows; bounds are the physical
ranges in engine_generations.yaml. Leave-one-source-out refits without a publication and
predicts it, which is the honest figure for runs nobody fitted on: a group that loses all its
rows falls back to the engines.yaml profile.

Reproduce: `gpufleet validate inference --rows modern --fit` prints the values to paste into
src/gpufleet/estimate/data/engine_generations.yaml.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpufleet.estimate.engines import GENERATION_KEYS, engine, generation_of, generation_table
from gpufleet.estimate.inference import EngineEfficiency, InferenceCase
from gpufleet.validation.inference_modern import (
    SOURCES,
    case_of,
    compare,
    load_rows,
)
from gpufleet.validation.modern import NotExpressibleError, median_abs, source_of

Group = tuple[str, str]  # (engine, generation)


@dataclass(frozen=True)
class Prepared:
    """A row with its case resolved once (the fit evaluates it hundreds of times)."""

    row: dict[str, str]
    case: InferenceCase
    group: Group
    source: str


@dataclass(frozen=True)
class GroupFit:
    group: Group
    rows: int
    values: dict[str, float]
    median_abs_before: float
    median_abs_after: float


@dataclass(frozen=True)
class SourceHoldout:
    source: str
    rows: int
    median_abs: float  # predicted by a fit that never saw the source


def prepare() -> list[Prepared]:
    out = []
    for row in load_rows():
        try:
            case = case_of(row)
        except NotExpressibleError:
            continue
        gen = generation_of(case.hw.accelerator) or case.hw.accelerator
        out.append(Prepared(row, case, (row["engine"], gen), source_of(row, SOURCES)))
    return out


def _base(p: Prepared) -> EngineEfficiency:
    """The engines.yaml profile (no generation fit): the start point and the fallback."""
    vendor = "AMD" if p.group[1] == "cdna3" else None
    return engine(p.row["engine"], vendor)


def _with(eng: EngineEfficiency, values: dict[str, float]) -> EngineEfficiency:
    return replace(eng, **values)  # type: ignore[arg-type]


def _fitted(values: dict[str, float]) -> Callable[[Prepared], EngineEfficiency]:
    return lambda p: _with(_base(p), values)


def _errors(
    rows: Sequence[Prepared], eng_of: Callable[[Prepared], EngineEfficiency]
) -> list[float]:
    return [compare(p.row, replace(p.case, engine=eng_of(p))).throughput_error for p in rows]


def fit_group(rows: Sequence[Prepared]) -> dict[str, float]:
    """Bounded least squares on log(predicted/published throughput) over `rows`."""
    from scipy.optimize import least_squares

    table = generation_table()
    bounds = table["bounds"]
    held = set(table.get("held", {}).get(rows[0].group[0], []))
    keys = [k for k in GENERATION_KEYS if k not in held]
    low = np.array([float(bounds[k][0]) for k in keys])
    high = np.array([float(bounds[k][1]) for k in keys])
    base = _base(rows[0])
    start = {k: float(getattr(base, k)) for k in keys}
    start["kv_bandwidth_fraction"] = base.kv_fraction
    x0 = np.clip(np.array([start[k] for k in keys]), low, high)
    x0 = np.where(x0 <= low, low + 0.1 * (high - low), x0)

    def residuals(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        eng = _with(base, dict(zip(keys, (float(v) for v in x), strict=True)))
        errs = _errors(rows, lambda _p: eng)
        return np.array([math.log1p(max(e, -0.99)) for e in errs])

    solution = least_squares(residuals, x0, bounds=(low, high), x_scale=high - low)
    return {k: _round(float(v)) for k, v in zip(keys, solution.x, strict=True)}


def _round(value: float) -> float:
    """Four significant figures; a value pinned at a zero bound prints as 0."""
    return 0.0 if abs(value) < 1e-9 else float(f"{value:.4g}")


def fit_all(prepared: Sequence[Prepared]) -> list[GroupFit]:
    out = []
    for group in sorted({p.group for p in prepared}):
        rows = [p for p in prepared if p.group == group]
        values = fit_group(rows)
        before = median_abs(_errors(rows, _base))
        after = median_abs(_errors(rows, _fitted(values)))
        out.append(GroupFit(group, len(rows), values, before, after))
    return out


def leave_one_source_out(prepared: Sequence[Prepared]) -> list[SourceHoldout]:
    """For each source: refit every group without its rows, then predict its rows."""
    return _holdouts(prepared, lambda p: p.source)


def leave_one_model_out(prepared: Sequence[Prepared]) -> list[SourceHoldout]:
    """For each model: refit without its rows, then predict them. TensorRT-LLM is one source,
    so leaving it out tests the A100 profile, not the fit; this is the fit's own holdout."""
    return _holdouts(prepared, lambda p: p.row["model"])


def _holdouts(prepared: Sequence[Prepared], key: Callable[[Prepared], str]) -> list[SourceHoldout]:
    out = []
    for source in sorted({key(p) for p in prepared}):
        train = [p for p in prepared if key(p) != source]
        test = [p for p in prepared if key(p) == source]
        fits = {g: fit_group([p for p in train if p.group == g]) for g in {p.group for p in train}}

        def eng_of(p: Prepared, fits: dict[Group, dict[str, float]] = fits) -> EngineEfficiency:
            values = fits.get(p.group)
            return _base(p) if values is None else _with(_base(p), values)

        out.append(SourceHoldout(source, len(test), median_abs(_errors(test, eng_of))))
    return out


def fitted_yaml(fits: Sequence[GroupFit]) -> str:
    """The `fitted:` block of engine_generations.yaml."""
    lines = ["fitted:"]
    for name in sorted({f.group[0] for f in fits}):
        lines.append(f"  {name}:")
        for f in fits:
            if f.group[0] == name:
                body = ", ".join(f"{k}: {v:g}" for k, v in f.values.items())
                lines.append(f"    {f.group[1]}: {{{body}}}")
    return "\n".join(lines)


def write_fitted(fits: Sequence[GroupFit]) -> None:
    """Replace the `fitted:` block (the file's last) of engine_generations.yaml."""
    from importlib import resources

    path = Path(
        str(resources.files("gpufleet.estimate").joinpath("data", "engine_generations.yaml"))
    )
    text = path.read_text("utf-8")
    head = text[: text.index("\nfitted:") + 1]
    path.write_text(head + fitted_yaml(fits) + "\n", "utf-8")
