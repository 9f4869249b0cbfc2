"""A replica at its load rather than its slots, and why a model does not fit at all.

Apart from `inference_estimate` (which sizes a request rate on slots) because these answer
the two questions its output left wrong: how many requests a rate keeps in flight, and at
what TPOT (Little's law, solved with the decode step at that batch: the 70B example's 509
slots were printed as "509 in flight" where its 50 req/s keep about 150), and, where not
even one request fits, what each GPU would hold against what it has and what would help
(a plan read "4 × model and one request do not fit" and offered a looser SLO).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator, load_accelerators
from gpufleet.estimate.inference import (
    BYTES_PER_WEIGHT,
    COMPUTE_PRECISION,
    Array,
    InferenceCase,
    Serving,
    continuous,
    device_bytes_needed,
    fixed_bytes,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    pipelined,
    stage_case,
    usable_bytes,
    weight_bytes_per_gpu,
)
from gpufleet.formatting import format_gb


def replica_serving(
    case: InferenceCase,
    tp: int,
    pp: int,
    concurrency: Array,
    *,
    prompt: float,
    out: float,
    ttft_prompt: float | None = None,
) -> Serving:
    """One replica under continuous batching at each of `concurrency` (an array), `pp`
    pipeline stages of `case` (a stage when pp > 1) each holding 1/pp of it: what
    `_estimate` evaluates one load at a time, for many loads in one call."""
    tps = np.full_like(concurrency, float(tp))
    if pp <= 1:
        return continuous(case, tps, concurrency, prompt, out, ttft_prompt=ttft_prompt)
    micro = np.maximum(1.0, np.ceil(concurrency / pp))
    stage = continuous(case, tps, micro, prompt, out, ttft_prompt=ttft_prompt)
    hop = (
        case.engine.allreduce_latency_s
        + micro * case.arch.hidden * 2 / case.hw.scaleout_bytes_per_s
    )
    return pipelined(stage, pp, hop, case.engine.request_overhead_s)


# The requests in flight at a load solve n = λ S(n), S(n) the time a request holds a slot
# with n in flight: two grids of this many points bracket the first crossing, which is then
# interpolated (slots / 4,096 apart, in three array evaluations: about 1 ms, which
# `search inference` spends on the candidates it keeps).
LOAD_GRID_POINTS = 64


@dataclass(frozen=True)
class LoadPoint:
    """One replica at its share of a request rate, not at its full slots.

    At a rate below what the slots serve fewer requests are in flight, each step decodes a
    smaller batch and is faster, and requests leave sooner; Little's law ties the three,
    in_flight = arrival_rate_per_s × request_time_s, with request_time_s (the mean prompt's
    first token, then output − 1 tokens at tpot_s) evaluated at that in-flight batch, so they
    are solved together. Queued requests are not in flight (they hold no slot).
    """

    arrival_rate_per_s: float  # per replica
    in_flight: float  # mean requests holding a slot
    tpot_s: float  # time per output token with `in_flight` requests decoding
    request_time_s: float  # mean time a request holds a slot at that batch


def load_point(
    case: InferenceCase,
    tp: int,
    pp: int,
    *,
    arrival_rate_per_s: float,
    slots: int,
    prompt: float,
    out: float,
) -> LoadPoint:
    """The requests in flight and the TPOT at `arrival_rate_per_s` per replica.

    S(n) grows with n (a bigger batch is a slower step), so λ S(n) − n is positive at n = 0
    and, on a replica sized with S at full slots to run at most MAX_UTILISATION busy,
    negative at n = slots: the first crossing is the steady state a replica reaches from
    empty. Latencies are those of at least one request in flight. A rate the slots cannot
    turn over (no crossing) reports the slots full."""

    def stay_s(n: Array) -> Serving:
        return replica_serving(case, tp, pp, np.maximum(n, 1.0), prompt=prompt, out=out)

    lam = max(arrival_rate_per_s, 0.0)
    lo, hi = 0.0, float(max(slots, 1))
    n = hi
    for _ in range(2):
        grid = np.linspace(lo, hi, LOAD_GRID_POINTS + 1)
        excess = lam * stay_s(grid).request_time_s - grid
        crossed = np.flatnonzero(excess <= 0.0)
        if crossed.size == 0:  # λ S(slots) > slots: every slot stays busy
            n = hi
            break
        i = int(crossed[0])
        if i == 0:  # only at λ = 0
            n = 0.0
            break
        lo, hi = float(grid[i - 1]), float(grid[i])
        f_lo, f_hi = float(excess[i - 1]), float(excess[i])
        n = lo + (hi - lo) * f_lo / (f_lo - f_hi)
    at = stay_s(np.array([n]))
    request_s = float(at.request_time_s[0])
    return LoadPoint(
        arrival_rate_per_s=lam,
        in_flight=min(lam * request_s, float(max(slots, 1))),
        tpot_s=float(at.tpot_s[0]),
        request_time_s=request_s,
    )


@dataclass(frozen=True)
class MemoryShortfall:
    """Why the model and one request do not fit at a tensor-parallel size, per GPU: the
    weights, the activation peak and runtime reserve an engine holds whatever the load, and
    the KV cache of one request of the longest length, against what the engine may fill
    (`usable_bytes`). The numbers a person needs to see that a looser SLO cannot help."""

    tp: int
    weights_bytes: float
    reserve_bytes: float
    one_request_kv_bytes: float
    usable_bytes: float

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.reserve_bytes + self.one_request_kv_bytes

    def text(self) -> str:
        """'at TP 8 the weights alone take 101.5 GB per GPU, with ...: 104.6 GB against
        85.9 GB usable'."""
        alone = " alone" if self.weights_bytes > self.usable_bytes else ""
        return (
            f"at TP {self.tp} the weights{alone} take {format_gb(self.weights_bytes)} per GPU, "
            f"with {format_gb(self.reserve_bytes)} of activation and runtime reserve and "
            f"{format_gb(self.one_request_kv_bytes)} of KV cache for one request: "
            f"{format_gb(self.needed_bytes)} against {format_gb(self.usable_bytes)} usable"
        )


def memory_shortfall(case: InferenceCase, tp: int, longest: float) -> MemoryShortfall:
    """The per-GPU memory of the model and one request of `longest` tokens at `tp`."""
    t = np.array([float(tp)])
    weights = float(weight_bytes_per_gpu(case.arch, case.precision, t)[0])
    kv = float(kv_bytes_per_token_per_gpu(case.arch, case.kv_precision, t)[0]) * longest
    return MemoryShortfall(
        tp=tp,
        weights_bytes=weights,
        reserve_bytes=float(fixed_bytes(case, t)[0]) - weights,
        one_request_kv_bytes=kv,
        usable_bytes=float(usable_bytes(case, t)[0]),
    )


# Lighter weights that serving engines run, tried as a remedy when the model does not fit.
SMALLER_WEIGHTS = ("fp8", "int4")
# Pipeline stages tried when saying how many would hold the model (a remedy, not sized).
MOST_PIPELINE_STAGES = 8


def memory_remedies(
    case: InferenceCase,
    tp: int,
    longest: float,
    *,
    pp: int = 1,
    wider_tp: tuple[int, ...],
    pipeline_note: str,
) -> list[str]:
    """What would let the model and one request fit when `tp` (with `pp` stages of the whole
    model `case`) does not: lighter weights that fit (and the accelerator runs), a GPU with
    the memory one request needs, one whose scale-up domain allows a larger TP (of
    `wider_tp`, the sizes a search would try where the domain allowed them), and more
    pipeline stages across nodes (with how many would hold it), followed by `pipeline_note`
    (whether gpufleet sizes that). A larger GPU only where the catalog has one that large,
    and a looser SLO never: the SLO does not change what memory holds. Each phrase carries
    its number."""
    t, seq = np.array([float(tp)]), np.array([longest])
    stage = stage_case(case, pp)
    device = get_accelerator(case.hw.accelerator)
    lighter: list[tuple[str, float]] = []
    for weights in SMALLER_WEIGHTS:
        if BYTES_PER_WEIGHT[weights] >= BYTES_PER_WEIGHT[case.precision]:
            continue
        if device.dense_flops(COMPUTE_PRECISION[weights]) is None:
            continue
        alt = replace(stage, precision=weights)  # type: ignore[arg-type]
        if max_sequences(alt, t, seq)[0] >= 1:
            lighter.append((weights, float(weight_bytes_per_gpu(stage.arch, weights, t)[0])))
    remedies: list[str] = []
    if lighter:
        names = " or ".join(name for name, _ in lighter)
        sizes = " or ".join(format_gb(size) for _, size in lighter).replace(" GB or", " or")
        remedies.append(f"{names} weights ({sizes} per GPU at TP {tp})")
    need = float(device_bytes_needed(stage, t, np.array([1.0]), seq)[0])
    if any(a.memory_bytes >= need for a in load_accelerators()):  # else no GPU would do
        remedies.append(f"a GPU with at least {format_gb(need)} of memory at TP {tp}")
    widest = max(size for size in (1, *wider_tp) if case.arch.heads % size == 0)
    if tp < widest:  # this accelerator's scale-up domain stops TP short of one node's 8 GPUs
        split = float(weight_bytes_per_gpu(stage.arch, case.precision, np.array([widest]))[0])
        remedies.append(
            f"an accelerator whose scale-up domain spans TP {widest} "
            f"({format_gb(split)} of weights per GPU there)"
        )
    stages = next(
        (
            more
            for more in range(pp + 1, MOST_PIPELINE_STAGES + 1)
            if max_sequences(stage_case(case, more), t, seq)[0] >= 1
        ),
        None,
    )
    across = f"serving across nodes with {'more ' if pp > 1 else ''}pipeline stages"
    if stages is not None:
        held = float(weight_bytes_per_gpu(stage_case(case, stages).arch, case.precision, t)[0])
        across += (
            f" (PP {stages} × TP {tp} = {stages * tp} GPUs would hold "
            f"{format_gb(held)} of weights per GPU)"
        )
    remedies.append(f"{across}, {pipeline_note}")
    return remedies
