"""Validate the training estimator on current accelerators (validation/data/training_modern.csv).

Every row is rebuilt as the run its publication describes and predicted with the
estimator's parameters as they are (per-family efficiency fitted on these rows by
`validation.training_fit`). A row is rebuilt from its own columns: model
shape, the catalog accelerator its `gpu` maps to (`modern.ACCELERATORS`), precision, the
stated tp/pp/dp/cp, microbatch, recompute, sequence parallelism and ZeRO stage, and the
framework's profile. What the publication leaves out is chosen as `gpufleet search` would
(the fastest choice that fits), as for the calibration rows; when no choice fits the memory
model, the one nearest to fitting (the run did fit its memory). A row the estimator cannot
express is skipped with a `SkipReason`. Rows whose run used a speed-up the model has no knob
for (torch.compile, async TP, MXFP8 or rowwise FP8 scaling) are still compared and carry the
knob in `unmodelled`, so their error shows what the model misses.

Like is compared with like: tokens/s per GPU where the source measured throughput, and
TFLOP/s per device in the source's own FLOP convention (`flops_per_token`) where it gave
only that. Both sides of a TFLOP/s comparison use the same FLOPs per token, so its error is
the throughput error.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.architecture import ModelArch
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for, framework_profile
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import RECOMPUTE_CODES, Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_memory import NEAR_LIMIT_FRACTION
from gpufleet.estimate.training_search import MICROBATCHES, RECOMPUTE, VIRTUAL_STAGES
from gpufleet.validation.data_files import csv_rows
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

# `source` marker -> short name of the publication (first match wins).
SOURCES: tuple[tuple[str, str], ...] = (
    ("mosaicml/llm-foundry", "llm-foundry"),
    ("pytorch/torchtitan", "torchtitan"),
    ("Megatron-Bridge", "megatron-bridge"),
    ("performance_long_sequence", "nemo-long-sequence"),
    ("NVIDIA/NeMo", "nemo-24.07"),
    ("ROCm PyTorch Training Container", "amd-rocm-training"),
    ("AI-Hypercomputer/maxtext", "maxtext"),
)
# Row `framework` -> the estimator's framework profile (estimate/data/frameworks.yaml).
# Megatron-Bridge runs Megatron-Core with the recipes' communication overlaps.
FRAMEWORK_PROFILES: dict[str, str] = {
    "llm-foundry-fsdp": "llm-foundry-fsdp",
    "torchtitan-fsdp2": "torchtitan-fsdp2",
    "pytorch-fsdp": "fsdp",
    "megatron-bridge": "megatron-core",
    "nemo": "nemo",
    "jax-maxtext": "jax",
}
# Row `precision` -> the estimator's training precision (GEMMs at that dense peak).
# MXFP8 runs FP8 GEMMs at the FP8 peak; its block scaling is not modelled (flagged).
PRECISIONS: dict[str, str] = {"bf16": "bf16", "fp8": "fp8", "mxfp8": "fp8"}
METRICS = ("tokens_per_s_per_gpu", "tflops_per_gpu")
CONVENTIONS = ("foundry_mfu", "megatron_causal", "megatron_noncausal", "torchtitan", "maxtext2023")
WORST_ROWS = 10

_COMPILE = re.compile(r"(?<!no )\bcompile", re.I)
_ASYNC_TP = re.compile(r"async[\s-]?tp", re.I)
_VP = re.compile(r"\bVP=(\d+)")
_HEAD_DIM = re.compile(r"\bhead_dim=(\d+)")


@dataclass(frozen=True)
class MemoryUse:
    """The memory model's bytes per GPU for the layout a row is compared with. No source
    publishes its peak memory, so the check is the one every row gives: the run fit, so the
    model's total must not exceed the device's capacity."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    other: float
    capacity: int

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.other

    @property
    def share(self) -> float:
        return self.total / self.capacity


@dataclass(frozen=True)
class ModernTrainingResult:
    id: str
    source: str
    gpu: str  # as the row names it
    accelerator: str  # catalog name
    framework: str
    precision: str
    metric: str
    published: float
    predicted: float
    convention: str  # empty when the source gave no FLOP rate
    published_tflops: float | None  # per GPU, in `convention`
    predicted_tflops: float | None
    layout: str
    fits: bool
    unmodelled: tuple[str, ...]
    memory: MemoryUse

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


@dataclass(frozen=True)
class ModernTrainingSummary:
    validated: int
    skipped: int
    median_abs: float
    median_signed: float  # > 0: the model is faster than published
    within_10: int
    within_25: int
    not_fitting: int  # rows whose published layout the memory model says does not fit
    near_limit: int  # rows the model puts above NEAR_LIMIT_FRACTION of capacity (incl. over)
    memory_share_median: float  # model total / capacity, median over rows
    by_accelerator: list[Group]
    by_source: list[Group]
    by_precision: list[Group]
    worst: list[ModernTrainingResult]
    skipped_by_reason: dict[str, int]


def load_rows() -> list[dict[str, str]]:
    return csv_rows("training_modern.csv")


def arch_of(row: dict[str, str]) -> ModelArch:
    """The published architecture. `relu` is a 2-matrix MLP like `gelu` (same FLOPs and
    stored activations); MPT adds LayerNorm, biases, learned positions and tied embeddings;
    MaxText ties its embeddings and states head_dim in `notes` (ground-truth README)."""
    fields: dict[str, object] = {
        "name": row["model"],
        "layers": int(row["layers"]),
        "hidden": int(row["hidden"]),
        "heads": int(row["heads"]),
        "kv_heads": int(row["kv_heads"]),
        "ffn_hidden": int(row["ffn_hidden"]),
        "ffn_type": "gelu" if row["ffn_type"] == "relu" else row["ffn_type"],
        "vocab": int(row["vocab"]),
        "max_seq_len": int(row["seq_len"]),
    }
    if row["model"].startswith("mpt-"):
        fields.update(
            bias="all", norm="layernorm", position_embedding="learned", tied_embeddings=True
        )
    if row["model"].startswith("maxtext-"):
        found = _HEAD_DIM.search(row["notes"])
        if found is None:
            raise UserError(f"modern row {row['id']}: MaxText row without head_dim= in notes")
        fields.update(tied_embeddings=True, head_dim=int(found[1]))
    return ModelArch.model_validate(fields)


def flops_per_token(convention: str, arch: ModelArch, seq_len: int) -> float:
    """Training FLOPs per token as the source counted them (ground-truth README)."""
    layers, h, s, vocab = arch.layers, arch.hidden, seq_len, arch.vocab
    n = float(parameter_count(arch).total)
    if convention in ("megatron_causal", "megatron_noncausal"):
        attention = 6.0 if convention == "megatron_causal" else 12.0
        per_layer = (
            12.0
            + 12.0 * arch.kv_heads / arch.heads
            + 18.0 * arch.ffn_hidden / h
            + attention * s / h
        )
        return layers * h * h * per_layer + 6.0 * vocab * h
    if convention == "torchtitan":
        return 6.0 * (n - vocab * h) + 12.0 * layers * h * s
    if convention == "foundry_mfu":
        return 6.0 * n + 12.0 * layers * h * s
    if convention == "maxtext2023":
        return 6.0 * n + 6.0 * layers * arch.heads * arch.head_dim * s
    raise UserError(f"unknown flops_convention '{convention}'; one of {', '.join(CONVENTIONS)}")


def unmodelled_knobs(row: dict[str, str]) -> tuple[str, ...]:
    """Speed-ups the run used that the time model has no parameter for."""
    text = " ".join((row["id"], row["source"], row["notes"]))
    out = []
    if _COMPILE.search(text):
        out.append("torch.compile")
    if _ASYNC_TP.search(text):
        out.append("async TP")
    if row["precision"] == "mxfp8":
        out.append("MXFP8 block scaling (run as FP8)")
    if "rowwise" in text.lower():
        out.append("FP8 rowwise scaling (run as FP8)")
    return tuple(out)


def case_of(row: dict[str, str]) -> TrainingCase:
    accelerator = accelerator_of(row["gpu"])
    precision = PRECISIONS.get(row["precision"])
    if precision is None:
        raise UserError(f"modern row {row['id']}: unknown precision '{row['precision']}'")
    device = get_accelerator(accelerator)
    if device.dense_flops(precision) is None:  # type: ignore[arg-type]
        raise NotExpressibleError(
            SkipReason.precision_not_on_device, f"{accelerator} lists no {precision} peak"
        )
    profile_name = FRAMEWORK_PROFILES.get(row["framework"])
    if profile_name is None:
        raise UserError(f"modern row {row['id']}: unknown framework '{row['framework']}'")
    hw = resolve_hardware(accelerator, precision, Assumptions())  # type: ignore[arg-type]
    eff, _ = efficiency_for(hw.accelerator)
    return TrainingCase(
        arch=arch_of(row),
        seq_len=int(row["seq_len"]),
        global_batch=int(row["global_batch_seqs"]),
        precision=precision,  # type: ignore[arg-type]
        dropout=False,  # the benchmark recipes of these sources train without dropout
        hw=hw,
        eff=eff,
        profile=framework_profile(profile_name),
    )


def _stated_checks(row: dict[str, str], case: TrainingCase, tp: int, pp: int, cp: int) -> None:
    """The rules `gpufleet search` applies to a layout, on the stated values."""
    arch = case.arch
    if arch.heads % tp or arch.kv_heads % tp:
        raise NotExpressibleError(SkipReason.layout_refused, f"tp {tp} does not divide the heads")
    if case.seq_len % (2 * cp):
        raise NotExpressibleError(
            SkipReason.layout_refused, f"seq_len not divisible by 2 × cp {cp}"
        )
    if row["zero_stage"] == "3" and pp > 1:
        raise NotExpressibleError(SkipReason.layout_refused, "ZeRO-3 with pipeline parallelism")


def layouts_of(row: dict[str, str], case: TrainingCase) -> Layouts:
    """The published layout; each unstated part becomes every option the search would try.

    Microbatch: as stated; MaxText takes a whole per-rank batch per step (global / dp);
    else the search's sizes. Virtual pipeline stages: `VP=` in notes, the search's sizes
    for an interleaved schedule, else 1. Sequence parallelism: off when stated false,
    else paired with tp > 1 as the search does.
    """
    tp, pp, dp, cp = (int(row[k]) for k in ("tp", "pp", "dp", "cp"))
    if tp * pp * dp * cp != int(row["gpus"]):
        raise UserError(f"modern row {row['id']}: tp·pp·dp·cp ≠ gpus")
    _stated_checks(row, case, tp, pp, cp)
    if row["microbatch"]:
        mbs: tuple[int, ...] = (int(row["microbatch"]),)
    elif row["framework"] == "jax-maxtext":
        mbs = (case.global_batch // dp,)
    else:
        mbs = MICROBATCHES
    stages = tuple(case.profile.zero_stages)
    if row["zero_stage"]:
        if int(row["zero_stage"]) not in stages:
            raise NotExpressibleError(
                SkipReason.zero_stage_not_in_profile,
                f"ZeRO {row['zero_stage']} with the {case.profile.name} profile "
                f"(stages {', '.join(map(str, stages))})",
            )
        stages = (int(row["zero_stage"]),)
    recomputes = (RECOMPUTE_CODES[row["recompute"]],) if row["recompute"] else RECOMPUTE
    vp = _VP.search(row["notes"])
    if vp:
        virtual: tuple[int, ...] = (int(vp[1]),)
        if pp * virtual[0] > case.arch.layers:
            raise NotExpressibleError(
                SkipReason.layout_refused,
                f"pp {pp} × VP {virtual[0]} = {pp * virtual[0]} virtual stages for "
                f"{case.arch.layers} layers (the model needs one layer per virtual stage)",
            )
    elif "interleaved" in row["id"]:
        virtual = tuple(v for v in VIRTUAL_STAGES if v > 1)
    else:
        virtual = (1,)
    grid = np.array(list(itertools.product(mbs, stages, recomputes, virtual)), dtype=np.int64)
    mb, zero, rc, vs = grid.T
    keep = case.global_batch % (dp * mb) == 0
    keep &= (vs == 1) | ((pp > 1) & (pp * vs <= case.arch.layers))
    keep &= ~((zero == 3) & (pp > 1))
    if not keep.any():
        raise NotExpressibleError(
            SkipReason.layout_refused,
            "no choice of the unstated microbatch, ZeRO stage, recompute or virtual stages "
            "satisfies the search's rules",
        )
    n = int(keep.sum())

    def full(v: int) -> np.ndarray:
        return np.full(n, v, dtype=np.int64)

    sp = 0 if tp == 1 or row["sequence_parallel"] == "false" else 1
    return Layouts(
        tp=full(tp),
        pp=full(pp),
        dp=full(dp),
        cp=full(cp),
        ep=full(1),
        mb=mb[keep],
        vs=vs[keep],
        zero=zero[keep],
        recompute=rc[keep],
        sp=full(sp),
    )


def predict(row: dict[str, str]) -> ModernTrainingResult:
    """Compare one row; raises NotExpressibleError when the estimator cannot express it."""
    if row["metric"] not in METRICS:
        raise UserError(f"modern row {row['id']}: unknown metric '{row['metric']}'")
    case = case_of(row)
    return predict_prepared(row, case, layouts_of(row, case))


def predict_prepared(row: dict[str, str], case: TrainingCase, lay: Layouts) -> ModernTrainingResult:
    """Compare one row already rebuilt (the fit calls this with other efficiencies)."""
    ev = evaluate(case, lay)
    fits = ev.total_bytes <= case.hw.memory_bytes
    if fits.any():
        pool = np.flatnonzero(fits)
        i = int(pool[np.argmin(ev.step_time_s[pool])])
    else:
        # The published run did fit its memory; when no candidate fits the memory model,
        # the one nearest to fitting is the most like what ran (the fastest would be the
        # least like it: no recompute, the largest microbatch).
        i = int(np.argmin(ev.total_bytes))
    gpus = int(lay.gpus[i])
    tokens_per_gpu = float(ev.tokens_per_s[i]) / gpus
    convention = row["flops_convention"]
    per_token = flops_per_token(convention, case.arch, case.seq_len) if convention else None
    published = float(row["value"])
    published_tflops: float | None
    predicted_tflops: float | None
    if row["metric"] == "tflops_per_gpu":
        if per_token is None:
            raise UserError(f"modern row {row['id']}: a TFLOP/s row needs a flops_convention")
        predicted = per_token * tokens_per_gpu / 1e12
        published_tflops, predicted_tflops = published, predicted
    else:
        predicted = tokens_per_gpu
        published_tflops = None if per_token is None else per_token * published / 1e12
        predicted_tflops = None if per_token is None else per_token * predicted / 1e12
    recompute = ("none", "selective", "full")[int(lay.recompute[i])]
    layout = (
        f"tp{lay.tp[i]} pp{lay.pp[i]} dp{lay.dp[i]} cp{lay.cp[i]} mb{lay.mb[i]} v{lay.vs[i]} "
        f"{recompute} zero{lay.zero[i]}{' sp' if lay.sp[i] else ''}"
    )
    if not fits[i]:
        layout += (
            f" (model: needs {float(ev.total_bytes[i]) / 1e9:.0f} of "
            f"{case.hw.memory_bytes / 1e9:.0f} GB)"
        )
    return ModernTrainingResult(
        id=row["id"],
        source=source_of(row, SOURCES),
        gpu=row["gpu"],
        accelerator=case.hw.accelerator,
        framework=row["framework"],
        precision=row["precision"],
        metric=row["metric"],
        published=published,
        predicted=predicted,
        convention=convention,
        published_tflops=published_tflops,
        predicted_tflops=predicted_tflops,
        layout=layout,
        fits=bool(fits[i]),
        unmodelled=unmodelled_knobs(row),
        memory=MemoryUse(
            weights=float(ev.weights_bytes[i]),
            gradients=float(ev.gradients_bytes[i]),
            optimizer=float(ev.optimizer_bytes[i]),
            activations=float(ev.activations_bytes[i]),
            other=float(ev.other_bytes[i]),
            capacity=case.hw.memory_bytes,
        ),
    )


def validate_modern() -> tuple[list[ModernTrainingResult], list[Skipped]]:
    """Every modern row, either compared or skipped with its reason (file order)."""
    results: list[ModernTrainingResult] = []
    skipped: list[Skipped] = []
    for row in load_rows():
        try:
            results.append(predict(row))
        except NotExpressibleError as why:
            skipped.append(
                Skipped(row["id"], source_of(row, SOURCES), row["gpu"], why.reason, why.detail)
            )
    return results, skipped


def summarise_modern(
    results: list[ModernTrainingResult], skipped: list[Skipped]
) -> ModernTrainingSummary:
    errors = [r.error for r in results]
    return ModernTrainingSummary(
        validated=len(results),
        skipped=len(skipped),
        median_abs=median_abs(errors),
        median_signed=median_signed(errors),
        within_10=sum(abs(e) <= 0.10 for e in errors),
        within_25=sum(abs(e) <= 0.25 for e in errors),
        not_fitting=sum(not r.fits for r in results),
        near_limit=sum(r.memory.share > NEAR_LIMIT_FRACTION for r in results),
        memory_share_median=float(np.median([r.memory.share for r in results])) if results else 0.0,
        by_accelerator=groups(results, lambda r: r.accelerator, lambda r: r.error),
        by_source=groups(results, lambda r: r.source, lambda r: r.error),
        by_precision=groups(results, lambda r: r.precision, lambda r: r.error),
        worst=sorted(results, key=lambda r: -abs(r.error))[:WORST_ROWS],
        skipped_by_reason=skip_counts(skipped),
    )
