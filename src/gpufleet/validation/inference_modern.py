"""Validate the inference estimator on current accelerators (validation/data/inference_modern.csv).

The engine profiles are used as `engine(name, vendor, accelerator)` gives them: per
generation where engine_generations.yaml has a fit (made on these rows by
`validation/inference_fit.py`), else the A100 profile. Each row is one model instance of
`tp` GPUs:

- `output_tokens_per_s_system`, scenario offline (all requests queued at once, in-flight
  batching): the steady state of `continuous` at the most requests whose KV cache fits
  (`max_sequences`), the way the MLPerf Offline row is predicted;
- `e2e_latency_s`, scenario static: `static_batch`'s time to prefill `batch` prompts and
  decode every output token.

Errors are reported in the row's metric and, for a summary on one footing, as the error of
the output throughput the row implies (a latency row's throughput is batch × output ÷
latency). KV cache is held at the weights' precision, as `gpufleet estimate inference`
defaults, except as `kv_precision_of` says. NVFP4 rows run at the catalog's FP4 peak.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for
from gpufleet.estimate.engines import engine
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.inference import (
    BYTES_PER_WEIGHT,
    COMPUTE_PRECISION,
    EngineEfficiency,
    InferenceCase,
    WeightPrecision,
    continuous,
    max_sequences,
    static_batch,
)
from gpufleet.validation.data_files import csv_rows
from gpufleet.validation.inference import arch_of  # the same columns as the calibration rows
from gpufleet.validation.modern import (
    Group,
    NotExpressibleError,
    Skipped,
    SkipReason,
    accelerator_of,
    groups,
    median_abs,
    median_signed,
    skip_counts,
    source_of,
)

SOURCES: tuple[tuple[str, str], ...] = (
    ("NVIDIA/TensorRT-LLM", "tensorrt-llm-perf-overview"),
    ("ROCm/vllm", "rocm-vllm-dev-docker"),
    ("Oracle Cloud Infrastructure", "oci-mi300x-blog"),
)
THROUGHPUT = "output_tokens_per_s_system"
LATENCY = "e2e_latency_s"
PAIR = ("H100-SXM5-80GB", "H200-SXM-141GB")  # same settings on both: the H200/H100 ratio
WORST_ROWS = 10


@dataclass(frozen=True)
class ModernInferenceResult:
    id: str
    source: str
    gpu: str
    accelerator: str
    engine: str
    precision: str
    tp: int
    batch: int | None  # static batch; None for offline rows
    input_tokens: int
    output_tokens: int
    metric: str
    published: float
    predicted: float
    detail: str
    fits: bool

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0

    @property
    def throughput_error(self) -> float:
        """Error of the output throughput the row implies (latency rows: its inverse)."""
        if self.metric == LATENCY:
            return self.published / self.predicted - 1.0
        return self.error


@dataclass(frozen=True)
class PairRatio:
    """H200 over H100 at the same model, tp, precision, engine and request lengths."""

    model: str
    tp: int
    input_tokens: int
    output_tokens: int
    published: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


@dataclass(frozen=True)
class VsH100:
    """Per-GPU output throughput of an accelerator over the H100's on the same model and
    request lengths (offline rows). `settings` says what else differs: the publications run
    each GPU at its own tp, precision or engine, so only the H200 pairs are like for like."""

    accelerator: str
    model: str
    input_tokens: int
    output_tokens: int
    published: float
    predicted: float
    settings: str

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


@dataclass(frozen=True)
class ModernInferenceSummary:
    validated: int
    skipped: int
    median_abs: float  # throughput error
    median_signed: float
    within_15: int
    not_fitting: int
    by_accelerator: list[Group]
    by_source: list[Group]
    by_metric: list[Group]  # in the row's own metric
    worst: list[ModernInferenceResult]
    skipped_by_reason: dict[str, int]
    pairs_median_abs: float
    pairs_published_median: float
    pairs_predicted_median: float


def load_rows() -> list[dict[str, str]]:
    return csv_rows("inference_modern.csv")


def kv_precision_of(engine_name: str, precision: str) -> WeightPrecision:
    """The KV-cache format each engine uses by default with the rows' checkpoints.

    vLLM: `--kv-cache-dtype auto` is the model's activation dtype (16-bit); the ROCm rows run
    `--dtype float16` and pass no `--kv-cache-dtype`. TensorRT-LLM: the ModelOpt FP8 and
    NVFP4 checkpoints quantise the KV cache to FP8 (`kv_cache_quant_algo: FP8` in their
    hf_quant_config.json; as recalled, not re-read).
    """
    if engine_name == "vllm":
        return "fp16"
    return "fp8" if precision in ("fp8", "fp4") else precision  # type: ignore[return-value]


def case_of(row: dict[str, str]) -> InferenceCase:
    accelerator = accelerator_of(row["gpu"])
    precision = row["precision"]
    if precision not in BYTES_PER_WEIGHT:
        raise NotExpressibleError(
            SkipReason.precision_not_modelled,
            f"{precision} weights (the model has {', '.join(BYTES_PER_WEIGHT)})",
        )
    compute = COMPUTE_PRECISION[precision]
    device = get_accelerator(accelerator)
    if device.dense_flops(compute) is None:
        raise NotExpressibleError(
            SkipReason.precision_not_on_device, f"{accelerator} lists no {compute} peak"
        )
    hw = resolve_hardware(accelerator, compute, Assumptions())
    train_eff, _ = efficiency_for(hw.accelerator)
    return InferenceCase(
        arch=arch_of(row),
        precision=precision,  # type: ignore[arg-type]
        kv_precision=kv_precision_of(row["engine"], precision),
        hw=hw,
        engine=engine(row["engine"], device.vendor, hw.accelerator),
        scaleup_link_fraction=train_eff.scaleup_link_fraction,
    )


def predict(row: dict[str, str], eng: EngineEfficiency | None = None) -> ModernInferenceResult:
    """Compare one row; raises NotExpressibleError when the estimator cannot express it.
    `eng` replaces the row's engine profile (the fit tries candidate values this way)."""
    case = case_of(row)
    return compare(row, case if eng is None else replace(case, engine=eng))


def compare(row: dict[str, str], case: InferenceCase) -> ModernInferenceResult:
    """One row predicted with `case` (offline: continuous batching at the KV-cache limit;
    static: the batch's end-to-end latency)."""
    tp = int(row["tp"])
    if tp != int(row["gpus"]):
        raise UserError(f"modern row {row['id']}: one instance must have gpus = tp")
    prompt, output = float(row["input_tokens"]), float(row["output_tokens"])
    t = np.array([float(tp)])
    cap = float(max_sequences(case, t, np.array([prompt + output]))[0])
    metric, scenario = row["metric"], row["scenario"]
    batch: int | None = None
    if metric == THROUGHPUT and scenario == "offline":
        fits = cap >= 1
        value = (
            float(continuous(case, t, np.array([cap]), prompt, output).output_tokens_per_s[0])
            if fits
            else 0.0
        )
        detail = f"tp {tp}, {cap:,.0f} requests in flight (KV-cache limit)"
    elif metric == LATENCY and scenario == "static":
        batch = int(row["batch"])
        fits = batch <= cap
        served = static_batch(case, t, np.array([float(batch)]), prompt, output)
        value = float(served.request_time_s[0])
        detail = f"tp {tp}, static batch {batch}" + ("" if fits else f" (model: fits {cap:.0f})")
    else:
        raise UserError(f"modern row {row['id']}: unknown metric/scenario {metric}/{scenario}")
    return ModernInferenceResult(
        id=row["id"],
        source=source_of(row, SOURCES),
        gpu=row["gpu"],
        accelerator=case.hw.accelerator,
        engine=row["engine"],
        precision=row["precision"],
        tp=tp,
        batch=batch,
        input_tokens=int(prompt),
        output_tokens=int(output),
        metric=metric,
        published=float(row["value"]),
        predicted=value,
        detail=detail,
        fits=fits,
    )


def validate_modern() -> tuple[list[ModernInferenceResult], list[Skipped], list[PairRatio]]:
    """Every modern row compared or skipped with its reason, and the H100/H200 pairs."""
    results: list[ModernInferenceResult] = []
    skipped: list[Skipped] = []
    models: dict[str, str] = {}
    for row in load_rows():
        models[row["id"]] = row["model"]
        try:
            results.append(predict(row))
        except NotExpressibleError as why:
            skipped.append(
                Skipped(row["id"], source_of(row, SOURCES), row["gpu"], why.reason, why.detail)
            )
    return results, skipped, pairs(results, models)


def pairs(results: list[ModernInferenceResult], models: dict[str, str]) -> list[PairRatio]:
    """Every H100/H200 pair of rows at the same settings, in file order."""
    keyed: dict[tuple[object, ...], dict[str, ModernInferenceResult]] = {}
    for r in results:
        key: tuple[object, ...] = (
            models[r.id],
            r.tp,
            r.precision,
            r.engine,
            r.batch,
            r.input_tokens,
            r.output_tokens,
            r.metric,
        )
        keyed.setdefault(key, {})[r.gpu] = r
    out = []
    for key, by_gpu in keyed.items():
        if all(g in by_gpu for g in PAIR):
            old, new = (by_gpu[g] for g in PAIR)
            out.append(
                PairRatio(
                    model=str(key[0]),
                    tp=old.tp,
                    input_tokens=old.input_tokens,
                    output_tokens=old.output_tokens,
                    published=new.published / old.published,
                    predicted=new.predicted / old.predicted,
                )
            )
    return out


def models_of() -> dict[str, str]:
    """Row id -> model name (the results carry the shape, not the name)."""
    return {row["id"]: row["model"] for row in load_rows()}


def ratios_vs_h100(results: list[ModernInferenceResult], models: dict[str, str]) -> list[VsH100]:
    """Every offline row of another accelerator against the H100 row with the same model and
    request lengths, per GPU (throughput ÷ tp)."""
    offline = [r for r in results if r.metric == THROUGHPUT]
    h100 = {(models[r.id], r.input_tokens, r.output_tokens): r for r in offline if r.gpu == PAIR[0]}
    out = []
    for r in offline:
        base = h100.get((models[r.id], r.input_tokens, r.output_tokens))
        if r.gpu == PAIR[0] or base is None:
            continue
        same = (r.tp, r.precision, r.engine) == (base.tp, base.precision, base.engine)
        settings = (
            "same tp, precision, engine"
            if same
            else f"{r.engine} {r.precision} tp{r.tp} vs {base.engine} {base.precision} tp{base.tp}"
        )
        out.append(
            VsH100(
                accelerator=r.accelerator,
                model=models[r.id],
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                published=(r.published / r.tp) / (base.published / base.tp),
                predicted=(r.predicted / r.tp) / (base.predicted / base.tp),
                settings=settings,
            )
        )
    return out


def summarise_modern(
    results: list[ModernInferenceResult], skipped: list[Skipped], pair_list: list[PairRatio]
) -> ModernInferenceSummary:
    errors = [r.throughput_error for r in results]
    return ModernInferenceSummary(
        validated=len(results),
        skipped=len(skipped),
        median_abs=median_abs(errors),
        median_signed=median_signed(errors),
        within_15=sum(abs(e) <= 0.15 for e in errors),
        not_fitting=sum(not r.fits for r in results),
        by_accelerator=groups(results, lambda r: r.accelerator, lambda r: r.throughput_error),
        by_source=groups(results, lambda r: r.source, lambda r: r.throughput_error),
        by_metric=groups(results, lambda r: r.metric, lambda r: r.error),
        worst=sorted(results, key=lambda r: -abs(r.throughput_error))[:WORST_ROWS],
        skipped_by_reason=skip_counts(skipped),
        pairs_median_abs=median_abs([p.error for p in pair_list]),
        pairs_published_median=median_signed([p.published for p in pair_list]),
        pairs_predicted_median=median_signed([p.predicted for p in pair_list]),
    )
