"""A replica at its load rather than its slots, and the verdicts on a layout: whether it
fits, on how many GPUs, and within which SLOs.

Apart from `inference_estimate` (which sizes a request rate on slots) because these answer
the questions its output left wrong: how many requests a rate keeps in flight, and at
what TPOT (Little's law, solved with the decode step at that batch: the 70B example's 509
slots were printed as "509 in flight" where its 50 req/s keep about 150); where not even
one request fits, what each GPU would hold against what it has and what would help (a plan
read "4 × model and one request do not fit" and offered a looser SLO); which tp the GPUs of
`hardware.count` allow; and which SLOs a request misses, the end-to-end one included, with
only the remedies that would change something.
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
from gpufleet.specs.inference import InferenceSpec

TP_CHOICES = (1, 2, 4, 8)


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


def gb_pair(needed: float, has: float) -> tuple[str, str]:
    """Two byte counts as decimal GB ('85.9 GB'), with as many decimals as it takes (up to
    four) for a need above what there is to read as above: 79.33 against 79.30 GB printed
    "79.3 GB of 79.3 GB"."""
    for places in range(1, 5):
        a, b = f"{needed / 1e9:,.{places}f}", f"{has / 1e9:,.{places}f}"
        if a != b or needed <= has:
            break
    return f"{a} GB", f"{b} GB"


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
        needed, usable = gb_pair(self.needed_bytes, self.usable_bytes)
        return (
            f"at TP {self.tp} the weights{alone} take {format_gb(self.weights_bytes)} per GPU, "
            f"with {format_gb(self.reserve_bytes)} of activation and runtime reserve and "
            f"{format_gb(self.one_request_kv_bytes)} of KV cache for one request: "
            f"{needed} against {usable} usable"
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


def decode_tokens(spec: InferenceSpec) -> int:
    """Tokens a p99 request decodes after its first: the p99 output length − 1."""
    return max(spec.serving.max_tokens("output") - 1, 0)


def e2e_s(spec: InferenceSpec, ttft_s: float, tpot_s: float) -> float:
    """End-to-end time of a p99 request: TTFT + (output tokens − 1) × TPOT at the operating
    point, with the conventions the other two checks use: the TTFT of the p99 prompt (plus
    the p99 queue wait at a request rate), the TPOT of the load (full slots at a rate) and
    the p99 output length (`max_tokens`, the mean where no p99 is given). Each part at its
    p99, so the sum bounds the p99 of the whole (conservative)."""
    return ttft_s + decode_tokens(spec) * tpot_s


def slo_misses(spec: InferenceSpec, ttft_s: float, tpot_s: float) -> list[str]:
    """The SLOs a request with this TTFT (queue wait included) and TPOT misses, in the
    spec's words and ms: '[time-to-first-token SLO (1,234.5 ms > 1000 ms)]'."""
    slo = spec.serving.slo
    missed = []
    for name, value, limit in (
        ("time-to-first-token", ttft_s * 1e3, slo.ttft_p99_ms),
        ("time-per-output-token", tpot_s * 1e3, slo.tpot_p99_ms),
        ("end-to-end", e2e_s(spec, ttft_s, tpot_s) * 1e3, slo.e2e_p99_ms),
    ):
        if limit is not None and value > limit:
            missed.append(f"{name} SLO ({value:,.1f} ms > {limit:g} ms)")
    return missed


def no_concurrency_reason(
    spec: InferenceSpec, case: InferenceCase, layout: tuple[int, int], one: Serving
) -> str:
    """Why a request rate found no concurrency: names the SLO that one request in flight
    already misses, so the user relaxes the right one, and only remedies that change
    something: a larger tp where one fits in the scale-up domain (and hardware.count), fp8
    weights where the weights are not already fp8 or fp4 and the accelerator runs fp8."""
    tp, pp = layout
    missed = slo_misses(spec, float(one.ttft_s[0]), float(one.tpot_s[0]))
    what = " and the ".join(missed) or "SLOs"
    remedies = []
    wider = tp_sizes(spec, case)[-1]
    if tp < wider:
        count = spec.hardware.count
        if spec.parallelism is None and count is not None and wider * pp > count:
            remedies.append(f"a larger tp (up to {wider}, with hardware.count above {count})")
        else:
            remedies.append(f"a larger tp (up to {wider} in one node's scale-up domain)")
    fp8 = get_accelerator(case.hw.accelerator).fp8_dense_tflops is not None
    if case.precision not in ("fp8", "fp4") and fp8:
        remedies.append("fp8 weights")
    remedies += ["a faster accelerator", "a looser SLO"]
    return f"no concurrency meets the {what} at one request in flight; try {either(remedies)}"


def tp_sizes(spec: InferenceSpec, case: InferenceCase, count: int | None = None) -> list[int]:
    """The tensor-parallel sizes tried, smallest first: within the scale-up domain, dividing
    the heads and, with `count`, on at most that many GPUs (tp 1 always qualifies)."""
    domain = min(case.hw.scaleup_domain_gpus, count or case.hw.scaleup_domain_gpus)
    return [t for t in TP_CHOICES if t == 1 or (t <= domain and spec.model.heads % t == 0)]


def holds(case: InferenceCase, tp: int, longest: float, requests: int) -> bool:
    return bool(max_sequences(case, np.array([float(tp)]), np.array([longest]))[0] >= requests)


def choose_tp(spec: InferenceSpec, case: InferenceCase, longest: float) -> int:
    """Smallest tensor-parallel size that holds the load (at least one request) in memory on
    at most `hardware.count` GPUs; the largest of those when none does (it does not fit,
    and `count_reason` says how many GPUs would hold it)."""
    sv = spec.serving
    want = sv.batch or sv.concurrency or 1
    sizes = tp_sizes(spec, case, spec.hardware.count)
    return next((tp for tp in sizes if holds(case, tp, longest, want)), sizes[-1])


def count_reason(
    spec: InferenceSpec, case: InferenceCase, longest: float, requests: int
) -> list[str]:
    """Where `hardware.count` kept the automatic tp below one that holds the load: how many
    GPUs would ([] when the count did not decide it, or no tp on one node holds it)."""
    count = spec.hardware.count
    if spec.parallelism is not None or count is None:
        return []
    within = tp_sizes(spec, case, count)
    larger = [t for t in tp_sizes(spec, case) if t not in within]
    tp = next((t for t in larger if holds(case, t, longest, requests)), None)
    if tp is None:
        return []
    gpus = f"{count} GPU{'s' * (count != 1)}"
    return [
        f"hardware.count gives {gpus}: tp {tp} ({tp} GPUs) would hold the load; "
        f"raise hardware.count to {tp} or more, or see what else would help above"
    ]


def either(items: list[str]) -> str:
    """'a, b, or c': remedies read as alternatives."""
    if len(items) < 3:
        return " or ".join(items)
    return ", ".join(items[:-1]) + ", or " + items[-1]
