"""Validate the training estimator against published runs (validation/data/*.csv).

Each row is rebuilt as the run that was published: its architecture, GPU,
parallel layout and software generation, and compared like with like
(TFLOP/s in the publication's own FLOP convention, iteration time, tokens/s,
or GPU-hours of the whole run). What a publication leaves out is chosen the
way a user of gpufleet would get it: the fastest layout that fits, searched
with the same code as `gpufleet search`.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import (
    Efficiency,
    efficiency_for,
    fitted_parameters,
    framework_profile,
)
from gpufleet.estimate.flops import megatron2021_flops_per_sequence
from gpufleet.estimate.goodput import goodput
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.training import (
    RECOMPUTE_CODES,
    TRAINING_STATE_BYTES_PER_PARAM,
    Layouts,
    TrainingCase,
    evaluate,
)
from gpufleet.estimate.training_estimate import estimate_training
from gpufleet.estimate.training_search import candidate_layouts
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec
from gpufleet.validation.data_files import csv_rows, data_text

THROUGHPUT_METRICS = ("tflops_per_gpu", "iteration_time_s", "tokens_per_s_per_gpu")
GOODPUT_METRICS = ("gpu_hours",)
# LLaMA (Touvron et al. 2023, §2.4): "we use 2048 A100 GPU with 80GB of RAM" — the
# cluster size when a row does not state its GPU count.
DEFAULT_GPUS = 2048


@dataclass(frozen=True)
class RowResult:
    id: str
    metric: str
    published: float
    predicted: float
    layout: str
    source: str

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


@dataclass(frozen=True)
class Summary:
    throughput_median_abs: float
    throughput_max_abs: float
    goodput_median_abs: float
    rows: int


def load_rows() -> list[dict[str, str]]:
    return csv_rows("training_calibration.csv")


def framework_of(row: dict[str, str]) -> str:
    """The software generation each publication ran (its own text says so)."""
    if row["id"].startswith("zero3"):
        return "deepspeed"  # Narayanan et al. 2021 Table 2 compares against DeepSpeed ZeRO-3
    if row["id"].startswith("llama"):
        # Touvron et al. 2023 §2.4: xformers efficient attention, saved linear outputs,
        # model + sequence parallelism, communication overlapped with computation.
        return "nemo"
    return "megatron-2021"


def arch_of(row: dict[str, str]) -> ModelArch:
    fields: dict[str, Any] = {
        "name": row["model"],
        "layers": int(row["layers"]),
        "hidden": int(row["hidden"]),
        "heads": int(row["heads"]),
        "kv_heads": int(row["kv_heads"]),
        "ffn_hidden": int(row["ffn_hidden"]),
        "ffn_type": row["ffn_type"],
        "vocab": int(row["vocab"]),
        "max_seq_len": int(row["seq_len"]),
    }
    if row["ffn_type"] == "gelu":  # GPT-style: LayerNorm, biases, learned positions
        fields.update(bias="all", norm="layernorm", position_embedding="learned")
    return ModelArch.model_validate(fields)


def case_of(row: dict[str, str], eff: Efficiency | None = None) -> TrainingCase:
    log = Assumptions()
    hw = resolve_hardware(row["gpu"], "bf16", log)
    base, _ = efficiency_for(hw.accelerator)
    return TrainingCase(
        arch=arch_of(row),
        seq_len=int(row["seq_len"]),
        global_batch=int(row["global_batch_seqs"]),
        precision="bf16",
        dropout=row["ffn_type"] == "gelu",  # GPT recipes used dropout 0.1; LLaMA none
        hw=hw,
        eff=eff or base,
        profile=framework_profile(framework_of(row)),
    )


def layouts_of(row: dict[str, str], case: TrainingCase) -> Layouts:
    """The published layout; unstated parts become every option the search would try."""
    gpus = int(row["gpus"] or DEFAULT_GPUS)
    space = candidate_layouts(case, [gpus], Counter())
    keep = np.ones(space.tp.size, dtype=bool)
    for column, attr in (
        ("tp", "tp"),
        ("pp", "pp"),
        ("dp", "dp"),
        ("cp", "cp"),
        ("microbatch", "mb"),
        ("zero_stage", "zero"),
    ):
        if row[column]:
            keep &= getattr(space, attr) == int(row[column])
    keep &= space.vs == 1  # no row reports an interleaved schedule
    if row["recompute"]:
        keep &= space.recompute == RECOMPUTE_CODES[row["recompute"]]
    chosen = space.take(keep)  # the search always pairs tp > 1 with sequence parallelism
    if row["sequence_parallel"] == "false":
        chosen = replace(chosen, sp=np.zeros_like(chosen.sp))
    return chosen


def predict(row: dict[str, str], eff: Efficiency | None = None) -> RowResult:
    case = case_of(row, eff)
    return _predict_prepared(row, case, layouts_of(row, case))


def _predict_prepared(row: dict[str, str], case: TrainingCase, lay: Layouts) -> RowResult:
    ev = evaluate(case, lay)
    fits = ev.total_bytes <= case.hw.memory_bytes
    pool = np.flatnonzero(fits) if fits.any() else np.arange(lay.tp.size)
    i = int(pool[np.argmin(ev.step_time_s[pool])])
    gpus = int(lay.gpus[i])
    metric = row["metric"]
    if metric == "tflops_per_gpu":
        value = float(ev.megatron2021_tflops_per_gpu[i])
    elif metric == "iteration_time_s":
        value = float(ev.step_time_s[i])
    elif metric == "tokens_per_s_per_gpu":
        value = float(ev.tokens_per_s[i]) / gpus
    else:
        ideal_s = float(row["tokens"]) / float(ev.tokens_per_s[i])
        params = float(ev.params_per_gpu[i]) * int(lay.tp[i]) * int(lay.pp[i])
        g = goodput(
            gpus=gpus,
            ideal_time_s=ideal_s,
            checkpoint_bytes=params * TRAINING_STATE_BYTES_PER_PARAM,
        )
        value = float(g.gpu_hours)
    layout = (
        f"tp{lay.tp[i]} pp{lay.pp[i]} dp{lay.dp[i]} mb{lay.mb[i]} "
        f"{('none', 'selective', 'full')[int(lay.recompute[i])]} zero{lay.zero[i]}"
    )
    return RowResult(row["id"], metric, float(row["value"]), value, layout, row["source"])


def validate_training(eff_by_row: Efficiency | None = None) -> list[RowResult]:
    return [predict(row, eff_by_row) for row in load_rows()]


def summarise(results: list[RowResult]) -> Summary:
    through = [abs(r.error) for r in results if r.metric in THROUGHPUT_METRICS]
    good = [abs(r.error) for r in results if r.metric in GOODPUT_METRICS]
    return Summary(
        throughput_median_abs=statistics.median(through) if through else math.nan,
        throughput_max_abs=max(through) if through else math.nan,
        goodput_median_abs=statistics.median(good) if good else math.nan,
        rows=len(results),
    )


@dataclass(frozen=True)
class FitResult:
    parameters: dict[str, float]
    before: Summary
    after: Summary


def fit_parameters() -> FitResult:
    """Least squares on log(predicted / published) over the throughput rows only.

    The GPU-hour rows are left out: they judge the goodput model, which has its own
    sourced defaults. Parameters stay inside the physical ranges in efficiency.yaml.
    """
    from scipy.optimize import least_squares

    spec = fitted_parameters()
    names = list(spec)
    x0 = np.array([spec[n][0] for n in names])
    low = np.array([spec[n][1] for n in names])
    high = np.array([spec[n][2] for n in names])
    rows = [r for r in load_rows() if r["metric"] in THROUGHPUT_METRICS]
    accelerator = rows[0]["gpu"].lower()
    base, _cal = efficiency_for(resolve_hardware(accelerator, "bf16", Assumptions()).accelerator)
    prepared = [(row, case_of(row)) for row in rows]
    prepared_layouts = [layouts_of(row, case) for row, case in prepared]

    def efficiency(x: np.ndarray) -> Efficiency:
        values = {n.split(".")[-1]: float(v) for n, v in zip(names, x, strict=True)}
        return base.with_values(**values)

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = efficiency(x)
        out = []
        for (row, case), lay in zip(prepared, prepared_layouts, strict=True):
            result = _predict_prepared(row, replace(case, eff=eff), lay)
            out.append(math.log(result.predicted / result.published))
        return np.array(out)

    before = summarise(validate_training())
    solution = least_squares(residuals, x0, bounds=(low, high), x_scale=np.abs(x0))
    fitted = dict(zip(names, (float(v) for v in solution.x), strict=True))
    after = summarise(validate_training(efficiency(solution.x)))
    return FitResult(fitted, before, after)


def write_fitted(parameters: dict[str, float], path: str) -> None:
    """Rewrite the `value:` of each fitted parameter in a YAML data file, keeping comments.

    Names are `key` (first match in the file) or `section.key` (first match after the
    line that opens `section:`).
    """
    import re
    from pathlib import Path

    file = Path(path)
    text = file.read_text(encoding="utf-8")
    for name, value in parameters.items():
        section, _, key = name.rpartition(".")
        pattern = re.compile(rf"(^\s*{re.escape(key)}: \{{value: )([^,]+)(, range)", re.M)
        start = 0
        if section:
            opener = re.search(rf"^\s*{re.escape(section)}:\s*$", text, re.M)
            if opener is None:
                raise ValueError(f"{path}: no section {section!r}")
            start = opener.end()
        head, tail = text[:start], text[start:]
        text = head + pattern.sub(rf"\g<1>{value:.4g}\g<3>", tail, count=1)
    partial = file.with_suffix(".yaml.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(file)


def validate_holdout() -> list[RowResult]:
    """Published runs never used for fitting, predicted through `estimate_training`."""
    import yaml

    text = data_text("training_holdout.yaml")
    out = []
    for entry in yaml.safe_load(text):
        spec = validate(TrainingSpec, {"kind": "training", **entry["spec"]}, entry["id"])
        est = estimate_training(spec)
        if entry["metric"] == "tflops_per_gpu_model":
            value = est.tflops_per_gpu
        else:  # megatron2021 convention: hardware FLOPs with full recomputation counted
            per_step = megatron2021_flops_per_sequence(spec.model, spec.training.seq_len)
            value = per_step * spec.training.global_batch / est.step_time_s / est.gpus / 1e12
        p = est.parallelism
        layout = f"tp{p.tp} pp{p.pp} dp{p.dp} cp{p.cp} v{p.virtual_stages} {p.recompute}" + (
            "" if est.fits else f" (model: needs {est.memory_per_gpu_bytes.total / 1e9:.0f} GB)"
        )
        out.append(
            RowResult(
                entry["id"],
                entry["metric"],
                float(entry["published"]),
                value,
                layout,
                entry["source"],
            )
        )
    return out
