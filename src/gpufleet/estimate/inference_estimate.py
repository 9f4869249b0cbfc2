"""`gpufleet estimate inference`: latency, throughput, memory, replicas and MIG fit.

The three load forms of a spec map to three questions: `batch` — how fast is
one static batch; `concurrency` — what does a replica deliver with that many
requests in flight; `request_rate` — how many replicas (and GPUs) serve that
rate within the SLOs, and at what cost per million output tokens.

A request rate is sized on slots: the largest batch per replica whose TPOT and TTFT meet
the SLOs (and whose KV cache fits), with the latencies at that full batch, which is what the
SLO is checked against and the replicas are counted with (conservative: a burst fills the
slots). The rate itself keeps fewer requests in flight than that — Little's law, arrival
rate per replica × mean time in system — and runs them at a faster TPOT; `load_point`
says how many and how fast, so the figures are not read as the load (the 70B example's 509
slots were printed as "509 in flight" where its 50 req/s keep about 180).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import mig_profiles_for
from gpufleet.catalog.pricing import cheapest_gpu_hour
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for
from gpufleet.estimate.engines import engine
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.inference import (
    COMPUTE_PRECISION,
    InferenceCase,
    Serving,
    continuous,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    memory,
    pipelined,
    stage_case,
    static_batch,
)
from gpufleet.estimate.inference_load import (
    TP_CHOICES,
    LoadPoint,
    choose_tp,
    count_reason,
    decode_tokens,
    e2e_s,
    either,
    gb_pair,
    load_point,
    memory_remedies,
    memory_shortfall,
    no_concurrency_reason,
    replica_serving,
    slo_misses,
    tp_sizes,
)
from gpufleet.estimate.inference_rate import (
    DEFAULT_SERVICE_CV,
    MAX_UTILISATION,
    RateMissError,
    ReplicaPoint,
    replicas_within_slos,
)
from gpufleet.estimate.queueing import MAX_REPLICAS
from gpufleet.specs.inference import InferenceSpec

# The KV cache when serving.kv_precision is not given: the activations' format. Weight-only
# int8/int4 (AWQ, GPTQ) dequantise to 16-bit and keep a 16-bit KV cache; fp8 checkpoints run
# fp8 activations and cache; NVFP4 ones (ModelOpt) quantise their KV cache to fp8.
DEFAULT_KV_PRECISION: dict[str, str] = {
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "bf16",
    "int4": "bf16",
    "fp4": "fp8",
}


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryOut(Report):
    weights: int
    kv_cache: int
    activations: int
    other: int
    total: int


class MigFit(Report):
    profile: str
    fits: bool
    max_batch: int
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float


class AssumptionOut(Report):
    name: str
    value: str
    source: str


class InferenceEstimate(Report):
    accelerator: str
    precision: str
    kv_precision: str
    engine: str
    tp: int
    pp: int
    mode: str
    batch: int  # the load evaluated: the batch or concurrency given, or the slots of a rate
    # The batch each replica is sized for: the batch or concurrency given, or for a request
    # rate the largest concurrency whose TPOT and TTFT meet the SLOs within memory (0: none).
    slots_per_replica: int
    # Mean requests holding a slot per replica at the stated load: the batch or concurrency
    # given, or for a request rate Little's law (`load_point`); None when nothing is served.
    in_flight_per_replica: float | None
    arrival_rate_per_replica_per_s: float | None  # request rate ÷ replicas
    ttft_ms: float  # at `batch` (a rate: full slots, p99 prompt and p99 queue wait)
    tpot_ms: float  # at `batch` (a rate: full slots, the figure held to the SLO)
    tpot_at_load_ms: float | None  # with `in_flight_per_replica` requests decoding
    request_time_at_load_s: float | None  # mean time a request holds a slot at the load
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    replica_capacity_output_tokens_per_s: float
    max_batch: int
    kv_cache_bytes_per_token: float
    kv_cache_bytes: float
    memory_per_gpu_bytes: MemoryOut
    memory_capacity_bytes: float
    fits: bool
    replicas: int
    gpus: int
    slo_met: bool
    cost_per_million_output_tokens_usd: float | None
    mig_fit: list[MigFit]
    reasons: list[str]
    assumptions: list[AssumptionOut]


def case_for(
    spec: InferenceSpec,
    log: Assumptions,
    accelerator: str | None = None,
    precision: str | None = None,
) -> InferenceCase:
    name = accelerator or spec.hardware.accelerator
    weights = precision or spec.serving.precision
    kv = spec.serving.kv_precision or DEFAULT_KV_PRECISION[weights]
    compute = COMPUTE_PRECISION[weights]
    device = get_accelerator(name)
    if device.dense_flops(compute) is None:
        raise UserError(
            f"serving.precision: {weights} needs {compute} matrix units, which "
            f"{device.name} does not list; use bf16"
        )
    same = name == spec.hardware.accelerator
    hw = resolve_hardware(
        name,
        compute,
        log,
        system=spec.hardware.system if same else None,
        scale_out=spec.hardware.scale_out if same else None,
    )
    eng = engine(spec.serving.engine, device.vendor, device.name)
    log.add(f"engine[{eng.name}]", eng.source, "src/gpufleet/estimate/data/engines.yaml")
    log.add(
        f"prefill_chunk_tokens[{eng.name}]",
        eng.profile_tokens,
        "the engine's per-step token budget (max_num_tokens, engines.yaml): prompts are "
        "scheduled in pieces this large and its activation peak is reserved (design 0005)",
    )
    train_eff, _ = efficiency_for(hw.accelerator)
    return InferenceCase(
        arch=spec.model,
        precision=weights,  # type: ignore[arg-type]
        kv_precision=kv,  # type: ignore[arg-type]
        hw=hw,
        engine=eng,
        scaleup_link_fraction=train_eff.scaleup_link_fraction,
    )


def _serving(
    case: InferenceCase,
    tp: int,
    load: int,
    *,
    mode: str,
    prompt: float,
    out: float,
    ttft_prompt: float | None = None,
) -> Serving:
    t = np.array([float(tp)])
    b = np.array([float(load)])
    if mode == "batch":
        return static_batch(case, t, b, prompt, out)
    return continuous(case, t, b, prompt, out, ttft_prompt=ttft_prompt)


def _hop_s(case: InferenceCase, micro: int) -> float:
    """Pipeline hand-off of one micro-batch's hidden states to the next stage's node."""
    bw = case.hw.scaleout_bytes_per_s
    return case.engine.allreduce_latency_s + micro * case.arch.hidden * 2 / bw


def _slo_ok(spec: InferenceSpec, s: Serving, extra_wait_s: float = 0.0) -> bool:
    return not slo_misses(spec, float(s.ttft_s[0]) + extra_wait_s, float(s.tpot_s[0]))


# Concurrency levels tried between 1 and the memory limit: `estimate inference` and `search
# inference` both pick from these, so one spec gets one concurrency from either command.
CONCURRENCY_LEVELS = 64


def concurrency_levels(limit: int) -> npt.NDArray[np.float64]:
    """Concurrencies from 1 to `limit`: CONCURRENCY_LEVELS geometric steps, rounded, repeats
    dropped (13 % apart at a limit of 2,500), as throughput flattens while concurrency rises."""
    if limit < 1:
        return np.zeros(0)
    grid = np.round(np.geomspace(1, limit, num=min(limit, CONCURRENCY_LEVELS)))
    return np.asarray(np.unique(grid), dtype=np.float64)


@dataclass(frozen=True)
class SloConcurrency:
    """The concurrency levels of one tp, their serving figures, and the largest level whose
    TPOT and unqueued TTFT (of the p99 prompt) meet the SLO (`index`; None when none does)."""

    levels: npt.NDArray[np.float64]
    serving: Serving
    index: int | None

    @property
    def concurrency(self) -> int:
        return 0 if self.index is None else int(self.levels[self.index])


def slo_concurrency(
    spec: InferenceSpec,
    case: InferenceCase,
    tp: int,
    *,
    limit: int,
    prompt: float,
    out: float,
    pp: int = 1,
) -> SloConcurrency:
    """Largest concurrency (<= limit) whose TPOT, unqueued TTFT and unqueued end-to-end time
    (`e2e_s`) meet the SLO, with the figures at every level tried. The one function `estimate
    inference` and `search inference` use, so they agree (they picked from 64 and 48 levels:
    502 against 477 requests for examples/inference-llama2-70b.yaml). With `pp` stages
    (`case` is then one stage) the figures are the pipelined replica's (`replica_serving`),
    the ones the SLO is checked on: one stage at the whole load picked 211 slots for a
    70B tp 2 pp 2 replica whose pipelined TPOT (60 ms) then missed a 50 ms SLO."""
    levels = concurrency_levels(limit)
    # the p99 TTFT SLO is met by the p99 prompt's prefill, not the mean's
    ttft_prompt = float(spec.serving.max_tokens("input"))
    serving = replica_serving(case, tp, pp, levels, prompt=prompt, out=out, ttft_prompt=ttft_prompt)
    slo = spec.serving.slo
    ok = np.ones_like(levels, dtype=bool)
    if slo.tpot_p99_ms is not None:
        ok &= serving.tpot_s * 1e3 <= slo.tpot_p99_ms
    if slo.ttft_p99_ms is not None:  # leave the queue room: TTFT before any wait
        ok &= serving.ttft_s * 1e3 <= slo.ttft_p99_ms
    if slo.e2e_p99_ms is not None:  # likewise before any wait
        ok &= (serving.ttft_s + decode_tokens(spec) * serving.tpot_s) * 1e3 <= slo.e2e_p99_ms
    index = int(np.flatnonzero(ok)[-1]) if ok.any() else None
    return SloConcurrency(levels, serving, index)


def estimate_inference(spec: InferenceSpec) -> InferenceEstimate:
    """The serving estimate. With `hardware.count` and a request rate but no parallelism, the
    tensor-parallel size is the one that serves the rate on the fewest GPUs within that count
    (issue 27: the smallest tp that fits was taken, 91 × H100 where tp 8 needs 8); otherwise
    the smallest tp that holds the load, within `hardware.count` when it is given (a 70B
    bf16 model on a count of 1 was put at tp 2, "1 × 2 = 2" GPUs that "fit")."""
    count = spec.hardware.count
    if spec.parallelism is None and count and spec.serving.request_rate is not None:
        return _within_count(_fewest_gpus_within(spec, count), count)
    return _within_count(_estimate(spec), count)


def _within_count(est: InferenceEstimate, count: int | None) -> InferenceEstimate:
    """`hardware.count` is the GPUs there are (specs: "Number of accelerators"; batch and
    concurrency loads fill it with replicas), so a request rate that needs more does not fit
    on them: the sizing is kept, to say how many it takes, but the verdict fails."""
    if est.mode != "request_rate" or count is None or est.gpus <= count or not est.fits:
        return est
    reason = (
        f"the request rate needs {est.gpus:,} GPUs ({est.replicas:,} replicas at tp "
        f"{est.tp}); hardware.count gives {count:,}"
    )
    return est.model_copy(update={"fits": False, "reasons": [*est.reasons, reason]})


def _fewest_gpus_within(spec: InferenceSpec, count: int) -> InferenceEstimate:
    sizes = tp_sizes(spec, case_for(spec, Assumptions()), count)
    tried: list[InferenceEstimate] = []
    for tp in sizes:
        try:
            est = _estimate(spec, tp)
        except UserError:
            continue  # this tp cannot meet the SLO at any size: the others may
        if est.fits:
            tried.append(est)
    if not tried:  # the largest tp the count allows: the fastest, and the one to explain
        return _estimate(spec, sizes[-1])
    best = min(tried, key=lambda e: (e.gpus > count, e.gpus, not e.slo_met, e.tp))
    note = AssumptionOut(
        name="tp",
        value=str(best.tp),
        source=(
            f"the tensor-parallel size among {', '.join(str(e.tp) for e in tried)} that serves "
            f"the request rate on the fewest GPUs within hardware.count {count} (derived)"
        ),
    )
    return best.model_copy(update={"assumptions": [*best.assumptions, note]})


def _estimate(spec: InferenceSpec, tp_given: int | None = None) -> InferenceEstimate:
    log = Assumptions()
    case = case_for(spec, log)
    sv = spec.serving
    prompt, out = float(sv.mean_tokens("input")), float(sv.mean_tokens("output"))
    longest = float(sv.max_tokens("input") + sv.max_tokens("output"))
    pp = spec.parallelism.pp if spec.parallelism else 1
    full_case = case
    case = stage_case(case, pp)  # per-GPU memory and per-stage time from here on
    tp = spec.parallelism.tp if spec.parallelism else tp_given or choose_tp(spec, case, longest)
    t = np.array([float(tp)])
    cap = int(max_sequences(case, t, np.array([longest]))[0])
    reasons: list[str] = []
    if sv.batch is not None:
        mode, load = "batch", sv.batch
    elif sv.concurrency is not None:
        mode, load = "concurrency", sv.concurrency
    elif sv.request_rate is not None:
        # the slots of the pipelined replica, as the SLO is checked on it below
        slots = slo_concurrency(spec, case, tp, limit=cap, prompt=prompt, out=out, pp=pp)
        mode, load = "request_rate", slots.concurrency
    else:
        mode, load = "batch", 1
        log.add("load", "batch 1", "the spec gives no batch, concurrency or request_rate")
    mem = memory(case, t, np.array([float(max(load, 1))]), np.array([longest]))
    usable = float(mem.capacity[0])
    memory_ok = bool(mem.total[0] <= usable)
    fits = memory_ok and load >= 1
    if not memory_ok:
        reasons += _memory_reasons(spec, full_case, tp, pp, max(load, 1), cap, mem.total[0], usable)
        reasons += count_reason(spec, case, longest, max(load, 1))
    micro = max(1, -(-max(load, 1) // pp))  # each stage works on 1/pp of the load at a time
    stage = _serving(
        case,
        tp,
        micro,
        mode="batch" if mode == "batch" else "c",
        prompt=prompt,
        out=out,
        ttft_prompt=float(sv.max_tokens("input")),
    )
    serving = pipelined(stage, pp, _hop_s(case, micro), case.engine.request_overhead_s)
    if memory_ok and load < 1:
        reasons.append(no_concurrency_reason(spec, case, (tp, pp), serving))
    gpus_per_replica = tp * pp
    replicas, wait_s = (
        _replicas_for_rate(spec, serving, load, log)
        if mode == "request_rate" and load >= 1
        else (max(1, (spec.hardware.count or gpus_per_replica) // gpus_per_replica), 0.0)
    )
    at_load = _at_load(
        spec, case, (tp, pp), mode=mode, load=load if fits else 0, replicas=replicas, log=log
    )
    # Nothing is served when not one request fits, or a rate found no slots within the SLO
    # (b7: "0 slots" printed the demand, 1,280 tok/s, and $9.35/M tokens).
    nothing = cap < 1 or (mode == "request_rate" and load < 1)
    per_replica = 0.0 if nothing else float(serving.output_tokens_per_s[0])
    slo_met = fits and _slo_ok(spec, serving, wait_s)
    if fits and not slo_met:
        reasons.append(_missed_reason(spec, serving, wait_s, mode, load))
    served = per_replica * replicas
    if mode == "request_rate" and sv.request_rate is not None:
        # Sized for the rate, the fleet serves the demand; with no slots, nothing.
        served = sv.request_rate * out if fits else 0.0
    gpus = replicas * gpus_per_replica
    cost = _cost_per_million(case, gpus, served, log)
    kv_tok = kv_bytes_per_token(spec.model, case.kv_precision)
    return InferenceEstimate(
        accelerator=case.hw.accelerator,
        precision=case.precision,
        kv_precision=case.kv_precision,
        engine=case.engine.name,
        tp=tp,
        pp=pp,
        mode=mode,
        batch=load,
        slots_per_replica=load,
        # a batch or concurrency given is the load itself; a rate's is solved (`load_point`)
        in_flight_per_replica=(
            load if mode != "request_rate" else None if at_load is None else at_load.in_flight
        ),
        arrival_rate_per_replica_per_s=None if at_load is None else at_load.arrival_rate_per_s,
        ttft_ms=(float(serving.ttft_s[0]) + wait_s) * 1e3,
        tpot_ms=float(serving.tpot_s[0]) * 1e3,
        tpot_at_load_ms=(
            float(serving.tpot_s[0]) * 1e3
            if mode != "request_rate"
            else None
            if at_load is None
            else at_load.tpot_s * 1e3
        ),
        request_time_at_load_s=(
            float(serving.request_time_s[0])
            if mode != "request_rate"
            else None
            if at_load is None
            else at_load.request_time_s
        ),
        output_tokens_per_s=served,
        output_tokens_per_s_per_gpu=served / gpus,
        replica_capacity_output_tokens_per_s=per_replica,
        max_batch=cap,
        kv_cache_bytes_per_token=kv_tok,
        kv_cache_bytes=float(kv_bytes_per_token_per_gpu(spec.model, case.kv_precision, t)[0])
        * max(load, 1)
        * longest
        * tp,
        memory_per_gpu_bytes=MemoryOut(
            weights=round(float(mem.weights[0])),
            kv_cache=round(float(mem.kv_cache[0])),
            activations=round(float(mem.activations[0])),
            other=round(float(mem.other[0])),
            total=round(float(mem.total[0])),
        ),
        memory_capacity_bytes=usable,
        fits=fits,
        replicas=replicas,
        gpus=gpus,
        slo_met=slo_met,
        cost_per_million_output_tokens_usd=cost,
        mig_fit=mig_fit(
            spec, full_case, load=max(load, 1), prompt=prompt, out=out, longest=longest
        ),
        reasons=reasons,
        assumptions=[
            AssumptionOut(name=a.name, value=a.value, source=a.source) for a in log.frozen()
        ],
    )


def _missed_reason(spec: InferenceSpec, s: Serving, wait_s: float, mode: str, load: int) -> str:
    """'misses the end-to-end SLO (5,735.1 ms > 500 ms) at concurrency 64'."""
    misses = slo_misses(spec, float(s.ttft_s[0]) + wait_s, float(s.tpot_s[0]))
    where = f"{load:,} slots per replica" if mode == "request_rate" else f"{mode} {load:,}"
    return f"misses the {' and the '.join(misses)} at {where}"


def _cost_per_million(
    case: InferenceCase, gpus: int, served: float, log: Assumptions
) -> float | None:
    """USD per million output tokens at the cheapest GPU-hour; None when nothing is served
    or the catalog has no price."""
    price = cheapest_gpu_hour(case.hw.accelerator)
    if price is None or served <= 0:
        return None
    log.add(f"price[{case.hw.accelerator}]", f"${price.usd_per_gpu_hour:.2f}/GPU-h", price.source)
    return gpus * price.usd_per_gpu_hour / (served * 3600) * 1e6


def _at_load(
    spec: InferenceSpec,
    case: InferenceCase,
    layout: tuple[int, int],
    *,
    mode: str,
    load: int,
    replicas: int,
    log: Assumptions,
) -> LoadPoint | None:
    """A request rate's replicas at the rate itself (`load_point`), beside the full slots
    (`load`) they are sized and checked at; None for other loads or when nothing fits."""
    rate = spec.serving.request_rate
    if mode != "request_rate" or rate is None or load < 1:
        return None
    sv = spec.serving
    tp, pp = layout
    log.add(
        "in_flight_per_replica",
        "request rate ÷ replicas × mean time a request holds a slot (Little's law)",
        "solved with the TPOT of that in-flight batch; TTFT, TPOT, memory and the SLO check "
        "are at full slots (conservative: a burst fills them)",
    )
    return load_point(
        case,
        tp,
        pp,
        arrival_rate_per_s=rate / replicas,
        slots=load,
        prompt=float(sv.mean_tokens("input")),
        out=float(sv.mean_tokens("output")),
    )


def _memory_reasons(  # noqa: PLR0917 - the figures of one estimate, in its order
    spec: InferenceSpec,
    whole: InferenceCase,
    tp: int,
    pp: int,
    requests: int,
    cap: int,
    needed_bytes: float,
    usable: float,
) -> list[str]:
    """Why the load does not fit; where not even one request does, in per-GPU numbers and
    with what would help (`_no_request_fits_reason`; `whole` is the model before its pp
    stages are cut)."""
    sv = spec.serving
    longest = float(sv.max_tokens("input") + sv.max_tokens("output"))
    plural = requests != 1
    need, have = gb_pair(needed_bytes, usable)  # 79.33 of 79.30 GB read "79.3 of 79.3"
    reasons = [
        f"does not fit: {requests} request{'s' * plural} of {longest:.0f} tokens "
        f"need{'' if plural else 's'} {need} per GPU of "
        f"{have} usable; at most {cap} fit at tp {tp}"
    ]
    if cap < 1:
        reasons.append(_no_request_fits_reason(spec, whole, tp, pp, longest))
    return reasons


def _no_request_fits_reason(
    spec: InferenceSpec, whole: InferenceCase, tp: int, pp: int, longest: float
) -> str:
    """Why not even one request fits, in per-GPU numbers, and what would help: an SLO does
    not change memory, and a larger tp only helps up to one node's tensor-parallel group.
    `whole` is the whole model; each of `pp` stages holds its share of the layers."""
    stage = stage_case(whole, pp)
    largest = max(
        t for t in TP_CHOICES if t <= whole.hw.scaleup_domain_gpus and spec.model.heads % t == 0
    )
    where = f" with {pp} pipeline stages" if pp > 1 else ""
    if tp < largest and (spec.parallelism is not None or pp > 1):
        hint = f"; tp up to {largest} fits in one node's scale-up domain"
    else:
        hint = f"; tp {tp} is the largest on one node" if tp == largest else ""
    remedies = memory_remedies(
        whole,
        tp,
        longest,
        pp=pp,
        wider_tp=tuple(t for t in TP_CHOICES if t > largest),
        pipeline_note="which parallelism.pp estimates (the search and plans do not size it)",
    )
    return (
        f"no request fits{where}: {memory_shortfall(stage, tp, longest).text()}{hint}. "
        f"What would help: {either(remedies)}"
    )


def _replicas_for_rate(
    spec: InferenceSpec, serving: Serving, slots: int, log: Assumptions
) -> tuple[int, float]:
    """Replicas of `slots` slots whose p99 queue wait keeps the TTFT and the end-to-end time
    within their SLOs (`replicas_within_slos`, the rule the search and plans size by too),
    and that wait. Raises UserError, in the spec's fields and ms, where no count up to
    MAX_REPLICAS does."""
    sv = spec.serving
    rate = sv.request_rate
    assert rate is not None
    prefill_s, tpot_s = float(serving.ttft_s[0]), float(serving.tpot_s[0])
    stay_s = float(serving.request_time_s[0])
    per_replica = slots * MAX_UTILISATION / stay_s
    if rate / per_replica > MAX_REPLICAS:
        raise UserError(
            f"serving.request_rate: {rate:,.6g} req/s needs more than {MAX_REPLICAS:,} "
            f"replicas (each serves about {per_replica:,.3g} req/s with {slots:,} slots, run "
            f"at most {MAX_UTILISATION:.0%} busy), more than gpufleet sizes; lower the rate"
        )
    cv = DEFAULT_SERVICE_CV
    log.add("service_time_cv", cv, "output lengths vary; exponential-like spread (assumption)")
    log.add(
        "queueing",
        "M/G/c, Allen–Cunneen approximation",
        "docs/design/0004-inference-queueing.md",
    )
    log.add(
        "max_utilisation", MAX_UTILISATION, "routing headroom over the pooled queue (assumption)"
    )
    try:
        replicas, q = replicas_within_slos(
            spec, ReplicaPoint(slots, prefill_s, tpot_s, stay_s), max_replicas=MAX_REPLICAS
        )
    except RateMissError as exc:
        raise UserError(_rate_miss_text(spec, exc, prefill_s, tpot_s, slots)) from exc
    return replicas, float(q.p99_wait_s)


def _rate_miss_text(
    spec: InferenceSpec, miss: RateMissError, prefill_s: float, tpot_s: float, slots: int
) -> str:
    """'serving.slo.ttft_p99_ms: the time to first token is 264.2 ms before any queueing,
    above the 200 ms SLO at 32 slots, ...': the SLO no replica count meets, in ms."""
    slo = getattr(spec.serving.slo, miss.field)
    if miss.field == "tpot_p99_ms":
        before = f"the time per output token is {tpot_s * 1e3:,.1f} ms"
    elif miss.field == "ttft_p99_ms":
        before = f"the time to first token is {prefill_s * 1e3:,.1f} ms"
    else:
        before = f"a request takes {e2e_s(spec, prefill_s, tpot_s) * 1e3:,.1f} ms end to end"
    if miss.unqueued:
        why = f"{before} before any queueing, above the {slo:g} ms SLO at {slots:,} slots"
        return (
            f"serving.slo.{miss.field}: {why}, so no number of replicas can meet it; it needs "
            "faster serving or a looser SLO"
        )
    return (
        f"serving.slo.{miss.field}: no number of replicas up to {MAX_REPLICAS:,} keeps the p99 "
        f"queue wait within the {slo:g} ms SLO ({before} before any queueing)"
    )


def mig_fit(
    spec: InferenceSpec,
    case: InferenceCase,
    *,
    load: int,
    prompt: float,
    out: float,
    longest: float,
) -> list[MigFit]:
    """Whether each MIG profile of the GPU holds the model at this load, and its throughput.

    A slice gets compute_slices/7 of the SMs and, as the MIG user guide describes memory
    slices carrying their share of bandwidth, memory bandwidth in proportion to its
    memory (assumption: memory-slice counts are not in the catalog).
    """
    device = get_accelerator(case.hw.accelerator)
    results: list[MigFit] = []
    for profile in mig_profiles_for(device.name):
        if profile.has_media_extensions:
            continue
        share = profile.memory_bytes / device.memory_bytes
        hw = replace(
            case.hw,
            peak_flops=case.hw.peak_flops * profile.compute_slices / 7,
            memory_bytes=profile.memory_bytes,
            memory_bytes_per_s=case.hw.memory_bytes_per_s * min(share, 1.0),
        )
        sliced = replace(case, hw=hw)
        one = np.array([1.0])
        cap = int(max_sequences(sliced, one, np.array([longest]))[0])
        use = min(load, cap)
        fits = cap >= 1
        rate = 0.0
        if fits:
            rate = float(
                continuous(sliced, one, np.array([float(use)]), prompt, out).output_tokens_per_s[0]
            )
        results.append(
            MigFit(
                profile=profile.profile,
                fits=fits,
                max_batch=cap,
                output_tokens_per_s=rate,
                output_tokens_per_s_per_gpu=rate * profile.max_instances,
            )
        )
    return results
