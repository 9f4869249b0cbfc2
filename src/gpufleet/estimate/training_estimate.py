"""`gpufleet estimate training`: one configuration, every number with its basis.

Takes a validated spec, fills what it leaves open (parallelism by the same
search `gpufleet search` runs, reliability from sourced defaults), evaluates
the time and memory model and the goodput model, and returns a stable,
JSON-ready record. A configuration that cannot run comes back with reasons
and the changes that would make it fit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.goodput import (
    checkpoint_write_rule,
    default_reliability,
    goodput,
)
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import (
    RECOMPUTE_CODES,
    TRAINING_STATE_BYTES_PER_PARAM,
    Evaluation,
    Layouts,
    TrainingCase,
    evaluate,
)
from gpufleet.estimate.training_case import case_for, layout_for
from gpufleet.estimate.training_memory import (
    fitting_changes,
    host_fits,
    memory_engineering,
    offload_variants,
)
from gpufleet.estimate.training_offload import host_memory_per_gpu_bytes, offload_assumptions
from gpufleet.estimate.training_search import candidate_layouts
from gpufleet.estimate.training_traffic import ScaleOutBytes
from gpufleet.formatting import format_gb
from gpufleet.specs.training import Parallelism, TrainingSpec

GiB = 2**30
SECONDS_PER_DAY = 86_400.0


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryPerGpu(Report):
    weights: int
    gradients: int
    optimizer: int
    activations: int
    other: int
    total: int


class CommTime(Report):
    tp: float
    pp: float
    dp: float
    cp: float
    ep: float
    exposed: float


class ScaleOutTraffic(Report):
    """Bytes one GPU sends across the scale-out network per step, by parallel group (the
    busiest pipeline stage's GPU; `estimate.training_traffic`): what a fabric must carry."""

    tp: float
    pp: float
    dp: float
    cp: float
    ep: float
    total: float


class ParallelismOut(Report):
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    microbatch: int
    virtual_stages: int
    zero_stage: int
    recompute: str
    sequence_parallel: bool
    microbatches_per_step: int
    offload: str
    chosen_by: str


class AssumptionOut(Report):
    name: str
    value: str
    source: str


class TrainingEstimate(Report):
    """Stable JSON fields of `gpufleet estimate training --format json`."""

    accelerator: str
    gpus: int
    tokens_per_s: float
    step_time_s: float
    tflops_per_gpu: float
    mfu: float
    hfu: float
    memory_per_gpu_bytes: MemoryPerGpu
    memory_capacity_bytes: int
    fits: bool
    train_time_days: float | None
    gpu_hours: float | None
    goodput_fraction: float | None
    wall_clock_days_with_failures: float | None
    gpu_hours_with_failures: float | None
    checkpoint_interval_s: float | None
    parallelism: ParallelismOut
    comm_time_s: CommTime
    scaleout_bytes_per_gpu_per_step: ScaleOutTraffic
    compute_time_s: float
    bubble_time_s: float
    optimizer_time_s: float
    reasons: list[str]
    assumptions: list[AssumptionOut]


def estimate_training(spec: TrainingSpec) -> TrainingEstimate:
    log = Assumptions()
    gpus = spec.hardware.count
    if gpus is None:
        raise UserError(
            "hardware.count: needed to estimate one configuration; "
            "use `gpufleet search training` to choose the GPU count"
        )
    case = case_for(spec, log)
    if spec.parallelism is not None:
        lay, chosen_by = _given_layout(
            case, spec.parallelism, layout_for(spec, spec.parallelism, gpus)
        )
    else:
        lay = _best_layout(case, gpus)
        chosen_by = "search (fastest layout that fits)"
    ev = evaluate(case, lay)
    fits = bool(ev.total_bytes[0] <= case.hw.memory_bytes)
    if not fits and spec.parallelism is None:  # nothing fits: the search fell back to the least
        chosen_by = "search (no layout fits: the one needing the least memory)"
    reasons = [] if fits else [_not_fitting(case, lay, ev)]
    if int(lay.offloaded[0]) == 1:
        offload_assumptions(case.hw, log)
        reasons.append(_offload_reason(case, ev))
    finding = memory_engineering(case, lay, float(ev.total_bytes[0]))
    if finding is not None:
        reasons.append(finding)
    return _report(
        spec, case=case, lay=lay, ev=ev, fits=fits, reasons=reasons, chosen_by=chosen_by, log=log
    )


# Knobs a framework chooses per run rather than per cluster: when a spec gives a layout
# (tp, pp, dp, cp, ep) but leaves these out, they are searched, not defaulted (issue 28: a 405B
# run at pp 16 with one virtual stage and microbatch 1 spent half its step in the bubble).
SEARCHED_KNOBS: dict[str, str] = {
    "microbatch": "mb",
    "virtual_stages": "vs",
    "zero_stage": "zero",
    "recompute": "recompute",
}
FIXED_AXES = ("tp", "pp", "dp", "cp", "ep")


def _given_layout(case: TrainingCase, par: Parallelism, given: Layouts) -> tuple[Layouts, str]:
    """The spec's layout, with the knobs it leaves out chosen as the fastest that fits among
    the layouts `gpufleet search` would try with the same tp, pp, dp, cp and ep (the spec's
    defaults when none of those runs or fits)."""
    unset = [name for name in SEARCHED_KNOBS if name not in par.model_fields_set]
    if not unset:
        return given, "spec"
    space = candidate_layouts(case, [int(given.gpus[0])], Counter())
    mask = np.ones(space.tp.size, dtype=bool)
    for axis in FIXED_AXES:
        mask &= getattr(space, axis) == getattr(given, axis)[0]
    for name, axis in SEARCHED_KNOBS.items():
        if name not in unset:
            mask &= getattr(space, axis) == getattr(given, axis)[0]
    searched = ", ".join(n.replace("_", " ") for n in unset)
    if not mask.any():
        return given, f"spec; {searched}: defaults (no searched layout matches the spec's)"
    pool = replace(space.take(np.flatnonzero(mask)), sp=np.full(int(mask.sum()), given.sp[0]))
    ev = evaluate(case, pool)
    fits = ev.total_bytes <= case.hw.memory_bytes
    how = "fastest that fits"
    if not fits.any():
        pool = offload_variants(case, pool)
        if pool.tp.size == 0:
            return given, f"spec; {searched}: defaults (no searched choice fits in memory)"
        ev = evaluate(case, pool)
        fits = (ev.total_bytes <= case.hw.memory_bytes) & host_fits(case, ev)
        if not fits.any():
            return given, f"spec; {searched}: defaults (no searched choice fits in memory)"
        how = "fastest that fits, with optimizer offload: none fits without"
    best = np.flatnonzero(fits)[np.argmin(ev.step_time_s[fits])]
    return pool.take(np.array([int(best)])), f"spec; searched: {searched} ({how})"


def _best_layout(case: TrainingCase, gpus: int) -> Layouts:

    rejected: Counter[str] = Counter()
    space = candidate_layouts(case, [gpus], rejected)
    if space.tp.size == 0:
        reasons = "; ".join(f"{n} × {why}" for why, n in rejected.most_common(3))
        raise UserError(f"no parallel layout of {gpus} GPUs can run this workload ({reasons})")
    ev = evaluate(case, space)
    fits = ev.total_bytes <= case.hw.memory_bytes
    if not fits.any():
        # Optimizer offload only when nothing fits without it (training_offload).
        offloaded = offload_variants(case, space)
        if offloaded.tp.size:
            ev_off = evaluate(case, offloaded)
            ok = (ev_off.total_bytes <= case.hw.memory_bytes) & host_fits(case, ev_off)
            if ok.any():
                best = np.flatnonzero(ok)[np.argmin(ev_off.step_time_s[ok])]
                return offloaded.take(np.array([int(best)]))
    pool = np.flatnonzero(fits) if fits.any() else np.arange(space.tp.size)
    key = ev.step_time_s if fits.any() else ev.total_bytes
    return space.take(np.array([int(pool[np.argmin(key[pool])])]))


def _not_fitting(case: TrainingCase, lay: Layouts, ev: Evaluation) -> str:
    """Say how far over the layout is and which single changes would make it fit."""
    need, have = format_gb(float(ev.total_bytes[0])), format_gb(case.hw.memory_bytes)
    helps = [label for label, _ in fitting_changes(case, lay, case.hw.memory_bytes)]
    hint = f"; try {', '.join(helps)}" if helps else "; no single change fits: use more GPUs"
    return f"does not fit: needs {need} per GPU of {have}{hint}"


def _offload_reason(case: TrainingCase, ev: Evaluation) -> str:
    """What optimizer offload costs: host memory used of what is there, seconds per step."""
    host = float(ev.host_bytes[0])
    room = host_memory_per_gpu_bytes(case.hw)
    added = float(ev.offload_s[0])
    share = added / float(ev.step_time_s[0])
    where = "fits" if host <= room else "does not fit"
    return (
        f"optimizer offload: fp32 master weights and Adam moments in host memory, "
        f"{format_gb(host)} per GPU of {format_gb(room)} ({where}); its host-link traffic and "
        f"CPU optimizer step add {added:.2f} s per step ({share:.0%} of the step)"
    )


def _scaleout_traffic(ev: Evaluation) -> ScaleOutTraffic:
    """The first layout's scale-out bytes per GPU per step, by group."""
    out = ScaleOutBytes(
        tp=ev.scaleout_tp_bytes,
        cp=ev.scaleout_cp_bytes,
        ep=ev.scaleout_ep_bytes,
        pp=ev.scaleout_pp_bytes,
        dp=ev.scaleout_dp_bytes,
    )
    return ScaleOutTraffic(
        tp=float(out.tp[0]),
        pp=float(out.pp[0]),
        dp=float(out.dp[0]),
        cp=float(out.cp[0]),
        ep=float(out.ep[0]),
        total=float(out.total[0]),
    )


def _days(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / SECONDS_PER_DAY


def _report(
    spec: TrainingSpec,
    *,
    case: TrainingCase,
    lay: Layouts,
    ev: Evaluation,
    fits: bool,
    reasons: list[str],
    chosen_by: str,
    log: Assumptions,
) -> TrainingEstimate:
    gpus = int(lay.gpus[0])
    tokens = spec.training.tokens
    train_s = None if tokens is None else tokens / float(ev.tokens_per_s[0])
    good = None
    if train_s is not None:
        rel = spec.reliability
        # a checkpoint holds every parameter's training state once (the busiest stage's
        # parameters x tp x pp counted the embedding stage pp times: +8.8 % for 405B at pp 8);
        # the plan's storage design sizes the same checkpoint
        params = float(parameter_count(spec.model).total)
        checkpoint_bytes = params * TRAINING_STATE_BYTES_PER_PARAM
        storage = _checkpoint_storage(spec, gpus, checkpoint_bytes, log)
        good = goodput(
            gpus=gpus,
            ideal_time_s=train_s,
            checkpoint_bytes=checkpoint_bytes,
            storage_bytes_per_s=storage,
            gpu_mtbf_s=rel.gpu_mtbf if rel else None,
            restart_s=rel.restart_overhead if rel else None,
            checkpoint_interval_s=rel.checkpoint_interval if rel else None,
        )
        defaults = default_reliability()
        for source in defaults.sources:
            if source == defaults.checkpoint_write_source:
                continue  # the storage is the spec's or the designed one, never this default
            name, _, where = source.partition(": ")
            log.add(f"reliability[{name}]", "default", where)
        if bool(np.asarray(good.breakdown)):
            reasons.append(f"goodput: {good.reason}")
    par = ParallelismOut(
        tp=int(lay.tp[0]),
        pp=int(lay.pp[0]),
        dp=int(lay.dp[0]),
        cp=int(lay.cp[0]),
        ep=int(lay.ep[0]),
        microbatch=int(lay.mb[0]),
        virtual_stages=int(lay.vs[0]),
        zero_stage=int(lay.zero[0]),
        recompute=next(k for k, v in RECOMPUTE_CODES.items() if v == int(lay.recompute[0])),
        sequence_parallel=bool(lay.sp[0]),
        microbatches_per_step=int(ev.microbatches[0]),
        offload="optimizer" if int(lay.offloaded[0]) == 1 else "none",
        chosen_by=chosen_by,
    )

    def f(a: np.ndarray) -> float:
        return float(a[0])

    def opt(v: object) -> float | None:
        value = None if v is None else float(np.asarray(v))
        return None if value is None or not np.isfinite(value) else value

    return TrainingEstimate(
        accelerator=case.hw.accelerator,
        gpus=gpus,
        tokens_per_s=f(ev.tokens_per_s),
        step_time_s=f(ev.step_time_s),
        tflops_per_gpu=f(ev.tflops_per_gpu),
        mfu=f(ev.mfu),
        hfu=f(ev.hfu),
        memory_per_gpu_bytes=MemoryPerGpu(
            weights=round(f(ev.weights_bytes)),
            gradients=round(f(ev.gradients_bytes)),
            optimizer=round(f(ev.optimizer_bytes)),
            activations=round(f(ev.activations_bytes)),
            other=round(f(ev.other_bytes)),
            total=round(f(ev.total_bytes)),
        ),
        memory_capacity_bytes=case.hw.memory_bytes,
        fits=fits,
        train_time_days=None if train_s is None else train_s / SECONDS_PER_DAY,
        gpu_hours=None if train_s is None else train_s * gpus / 3600,
        goodput_fraction=opt(good.fraction) if good else None,
        wall_clock_days_with_failures=_days(opt(good.wall_clock_s)) if good else None,
        gpu_hours_with_failures=opt(good.gpu_hours) if good else None,
        checkpoint_interval_s=opt(good.checkpoint_interval_s) if good else None,
        parallelism=par,
        comm_time_s=CommTime(
            tp=f(ev.tp_comm_s),
            pp=f(ev.pp_comm_s),
            dp=f(ev.dp_comm_s),
            cp=f(ev.cp_comm_s),
            ep=f(ev.ep_comm_s),
            exposed=f(ev.exposed_comm_s),
        ),
        scaleout_bytes_per_gpu_per_step=_scaleout_traffic(ev),
        compute_time_s=f(ev.compute_s),
        bubble_time_s=f(ev.bubble_s),
        optimizer_time_s=f(ev.optimizer_s),
        reasons=reasons,
        assumptions=[
            AssumptionOut(name=a.name, value=a.value, source=a.source) for a in log.frozen()
        ],
    )


def _checkpoint_storage(
    spec: TrainingSpec, gpus: int, checkpoint_bytes: float, log: Assumptions
) -> float:
    """The checkpoint write bandwidth the run's goodput is computed at: the spec's
    `reliability.checkpoint_storage`, else the storage `gpufleet plan` would build for this
    run (`goodput.checkpoint_write_rule`, as the planner). The goodput model's own default (2,000
    GB/s, Meta's Tectonic) gave `estimate training` a different wall clock than a plan of
    the same run: 405B on 16,384 GPUs got 2,000 GB/s here and 2,955 GB/s there."""
    rel = spec.reliability
    rate = checkpoint_write_rule(rel, checkpoint_bytes)(gpus)
    if rel is not None and rel.checkpoint_storage is not None:
        return rate
    log.add(
        "checkpoint_storage",
        f"{format_gb(rate)}/s",
        "not given (reliability.checkpoint_storage): the storage gpufleet plan builds for "
        "this run, blocking checkpoint writes held to 1 % of the compute time "
        "(estimate/goodput.py, designed_checkpoint_write_bytes_per_s)",
    )
    return rate
