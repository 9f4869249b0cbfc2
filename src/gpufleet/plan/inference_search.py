"""Search accelerators × tensor parallelism × weight precision for a serving workload.

For each candidate: the slots of a replica (the largest concurrency whose time per output
token meets the SLO and whose KV cache fits), the replica throughput they give, the replicas
a request rate needs within every stated SLO (TTFT, TPOT and end-to-end, the p99 queue wait
included: `replicas_within_slos`, the estimator's rule), the requests that rate keeps in
flight in each replica and their TPOT (Little's law, `load_point`), and the cost per
million output tokens. Concurrency levels are evaluated as numpy arrays per (accelerator,
precision); candidates are ranked by cost.

The search tries TP 1, 2, 4 and 8 inside one node's scale-up domain and no pipeline
parallelism, so a model whose weights do not fit on one node is never served here: when
nothing is found, `ServingSearch.why_none` says so in per-GPU numbers and names what would
help (the planner said "4 × model and one request do not fit", counting the TP sizes).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpufleet.catalog.pricing import ANYWHERE, PriceScope, cheapest_gpu_hour
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference import InferenceCase, max_sequences
from gpufleet.estimate.inference_estimate import case_for, slo_concurrency
from gpufleet.estimate.inference_load import (
    MemoryShortfall,
    load_point,
    memory_remedies,
    memory_shortfall,
)
from gpufleet.estimate.inference_rate import (
    RateMissError,
    ReplicaPoint,
    replicas_within_slos,
)
from gpufleet.formatting import format_gb
from gpufleet.specs.inference import InferenceSpec

DEFAULT_ACCELERATORS = (
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "h100-sxm5-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200-sxm-192gb",
    "mi300x",
    "mi325x",
    "l40s",
    "l4",
)
PRECISIONS = ("bf16", "fp8", "int8", "int4")
TP_CHOICES = (1, 2, 4, 8)


MEMORY_REJECTION = "model and one request do not fit in memory"
# Said of multi-node serving wherever the search names it as a remedy.
NOT_SIZED = "which gpufleet does not size (the search and plans keep a replica on one node)"
# In `why_none` where even the largest TP on one node misses on memory: no SLO can help
# then, which a planner can read from its note.
ONE_NODE_ONLY = "on one node (no pipeline parallelism or multi-node serving is tried)"


@dataclass(frozen=True)
class ServingCandidate:
    """One accelerator × precision × TP that meets the SLO, at its slots and at its load.

    `slots` is the batch a replica is sized for (the largest concurrency within the SLOs and
    its KV cache); `ttft_ms` and `tpot_ms` are at full slots, the figures held to the SLO
    (conservative: a burst fills them). `in_flight` and `tpot_at_load_ms` are the stated
    request rate's: the requests it keeps in each replica (Little's law) and their TPOT at
    that batch; None without a request rate."""

    accelerator: str
    precision: str
    tp: int
    slots: int
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s_per_replica: float
    replicas: int
    gpus: int
    cost_per_million_output_tokens_usd: float | None
    slo_met: bool
    in_flight: float | None = None
    tpot_at_load_ms: float | None = None
    # the p99 queue wait at the stated rate, included in ttft_ms (0 without a rate): a MIG
    # slice re-sizes its own queue from the TTFT before it (`fleet_services`)
    queue_wait_ms: float = 0.0

    @property
    def concurrency(self) -> int:
        """The slots, under the name the planner reads (`max_concurrency_per_replica`)."""
        return self.slots

    def plan_parallelism(self, engine: str) -> dict[str, int | str]:
        """The layout a plan reports: slots named as slots, not as the load."""
        return {
            "tp": self.tp,
            "replicas": self.replicas,
            "precision": self.precision,
            "slots_per_replica": self.slots,
            "engine": engine,
        }

    def plan_metrics(self) -> dict[str, float | None]:
        """The figures a plan reports, each at the load it is evaluated at: TTFT and TPOT at
        full slots (held to the SLO), and the in-flight requests and TPOT of the stated rate.
        `max_concurrency_per_replica` stays: the ranking compares it across accelerators."""
        return {
            "ttft_at_full_slots_ms": self.ttft_ms,
            "tpot_at_full_slots_ms": self.tpot_ms,
            "in_flight_per_replica": self.in_flight,
            "tpot_at_load_ms": self.tpot_at_load_ms,
            "output_tokens_per_s_per_replica_at_full_slots": self.output_tokens_per_s_per_replica,
            "cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd,
            "max_concurrency_per_replica": float(self.slots),
        }


@dataclass(frozen=True)
class MemoryMiss:
    """One accelerator and precision on which the model and one request do not fit at some
    TP sizes: the per-GPU numbers of each, and what would help where even the largest TP
    tried on one node misses (empty when a larger TP fits and fails for another reason)."""

    accelerator: str
    precision: str
    shortfalls: tuple[MemoryShortfall, ...]  # by TP, smallest first
    remedies: tuple[str, ...]

    def text(self, model: str) -> str:
        """'llama-3.1-405b in bf16 does not fit on h100-sxm5-80gb at TP 1, 2, 4 or 8 on one
        node (...): at TP 8 the weights alone take 101.5 GB per GPU, ... What would help:
        ...'."""
        largest = self.shortfalls[-1]
        others = ", ".join(
            f"{format_gb(m.weights_bytes)} at TP {m.tp}" for m in reversed(self.shortfalls[:-1])
        )
        tps = _join([m.tp for m in self.shortfalls], "or")
        text = f"{model} in {self.precision} does not fit on {self.accelerator} at TP {tps}"
        if self.remedies:
            text += f" {ONE_NODE_ONLY}"
        text += f": {largest.text()}"
        if others:
            text += f" (the weights take {others})"
        if self.remedies:
            text += f". What would help: {_join(self.remedies, 'or')}"
        return text


@dataclass
class ServingSearch:
    candidates_evaluated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    top: list[ServingCandidate] = field(default_factory=list)
    assumptions: Assumptions = field(default_factory=Assumptions)
    model: str = "the model"
    memory_misses: list[MemoryMiss] = field(default_factory=list)
    # (accelerator, precision, TP) of the candidates an SLO or the queue ruled out, by reason
    rejected_tp: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)

    def why_none(self) -> str:
        """Why no candidate serves the spec, in words and numbers a person can act on; ''
        when one does. A count of rejections ("4 × model and one request do not fit") read
        as four models, and the planner's remedy ("relax the serving SLOs") cannot help a
        model that does not fit: this names the TP sizes tried on one node, what each needs
        per GPU against what it may use, and what would help."""
        if self.top:
            return ""
        parts = [m.text(self.model) for m in self.memory_misses]
        for reason, where in self.rejected_tp.items():
            configs = {(acc, prec) for acc, prec, _ in where}
            if len(configs) == 1:
                (acc, prec), tps = configs.pop(), sorted({tp for _, _, tp in where})
                parts.append(f"{reason} on {acc} in {prec} at TP {_join(tps)}")
            else:
                parts.append(f"{reason} in {len(where)} configurations")
        if not parts:  # every candidate failed a configuration check (vendor, precision)
            parts = [f"{why} ({n} configurations)" for why, n in self.rejected.most_common(2)]
        return "; ".join(parts) or "no candidate was tried"


def _join(items: Sequence[object], word: str = "and") -> str:
    """A serial list: '1, 2, 4 and 8', or 'a, b, or c' for alternatives."""
    words = [str(i) for i in items]
    if len(words) < 3:
        return f" {word} ".join(words)
    return ", ".join(words[:-1]) + ("," if word == "or" else "") + f" {word} " + words[-1]


def search_inference(
    spec: InferenceSpec,
    accelerators: Sequence[str] = DEFAULT_ACCELERATORS,
    precisions: Sequence[str] = PRECISIONS,
    top_k: int = 10,
    scope: PriceScope = ANYWHERE,
) -> ServingSearch:
    result = ServingSearch(model=spec.model.name or "the model")
    sv = spec.serving
    prompt, out = float(sv.mean_tokens("input")), float(sv.mean_tokens("output"))
    longest = float(sv.max_tokens("input") + sv.max_tokens("output"))
    pool: list[ServingCandidate] = []
    cases: dict[tuple[str, str], InferenceCase] = {}
    for name in accelerators:
        for precision in precisions:
            try:
                case = case_for(spec, result.assumptions, accelerator=name, precision=precision)
            except UserError as exc:
                result.rejected[_reason(str(exc))] += len(TP_CHOICES)
                continue
            cases[case.hw.accelerator, case.precision] = case
            domain = case.hw.scaleup_domain_gpus
            tried: list[int] = []
            short: list[MemoryShortfall] = []
            for tp in TP_CHOICES:
                result.candidates_evaluated += 1
                if tp > domain:
                    result.rejected["tp beyond the scale-up domain"] += 1
                    continue
                if spec.model.heads % tp:
                    result.rejected["tp does not divide the heads"] += 1
                    continue
                tried.append(tp)
                cand = _evaluate(
                    spec,
                    case,
                    tp,
                    prompt=prompt,
                    out=out,
                    longest=longest,
                    result=result,
                    scope=scope,
                )
                if isinstance(cand, MemoryShortfall):
                    short.append(cand)
                elif cand is not None:
                    pool.append(cand)
            if short:
                result.memory_misses.append(_memory_miss(case, short, tried[-1], longest))
    pool.sort(
        key=lambda c: (not c.slo_met, c.cost_per_million_output_tokens_usd or math.inf, c.gpus)
    )
    result.top = [_at_load(spec, cases[c.accelerator, c.precision], c) for c in pool[:top_k]]
    return result


def _memory_miss(
    case: InferenceCase, short: list[MemoryShortfall], largest_tp: int, longest: float
) -> MemoryMiss:
    """The TP sizes at which one accelerator and precision miss on memory; what would help
    only where the largest TP tried misses too (else memory is not what stops it)."""
    remedies: tuple[str, ...] = ()
    if short[-1].tp == largest_tp:
        wider = tuple(t for t in TP_CHOICES if t > largest_tp)
        remedies = tuple(
            memory_remedies(case, largest_tp, longest, wider_tp=wider, pipeline_note=NOT_SIZED)
        )
    return MemoryMiss(case.hw.accelerator, case.precision, tuple(short), remedies)


def _reason(message: str) -> str:
    if "does not run on" in message:
        return "engine does not run on this vendor"
    if "matrix units" in message:
        return "precision not supported by the accelerator"
    return message


def _evaluate(
    spec: InferenceSpec,
    case: object,
    tp: int,
    *,
    prompt: float,
    out: float,
    longest: float,
    result: ServingSearch,
    scope: PriceScope = ANYWHERE,
) -> ServingCandidate | MemoryShortfall | None:
    """The candidate at its slots; the memory shortfall when not even one request fits;
    None when an SLO or the queue rules it out (counted in `result`)."""
    assert isinstance(case, InferenceCase)
    sv = spec.serving
    t = np.array([float(tp)])
    cap = int(max_sequences(case, t, np.array([longest]))[0])
    if cap < 1:
        result.rejected[MEMORY_REJECTION] += 1
        return memory_shortfall(case, tp, longest)
    # the same levels and SLO test as `estimate inference`, so both give one concurrency
    best = slo_concurrency(spec, case, tp, limit=cap, prompt=prompt, out=out)
    if best.index is None:
        _reject(result, "no concurrency meets the SLO", case, tp)
        return None
    i, serving, conc = best.index, best.serving, best.concurrency
    per_replica = float(serving.output_tokens_per_s[i])
    replicas, wait = 1, 0.0
    if sv.request_rate is not None:
        # every SLO the spec states, queue wait included: the estimator's rule (TTFT alone
        # listed 7 replicas of a 70B tp 4 whose p99 request took 3,970 ms of a 3,000 ms e2e)
        point = ReplicaPoint(
            conc,
            float(serving.ttft_s[i]),
            float(serving.tpot_s[i]),
            float(serving.request_time_s[i]),
        )
        try:
            replicas, q = replicas_within_slos(spec, point)
            wait = float(q.p99_wait_s)
        except RateMissError as exc:
            _reject(result, _miss_reason(exc), case, tp)
            return None
    served = sv.request_rate * out if sv.request_rate is not None else per_replica
    price = cheapest_gpu_hour(case.hw.accelerator, scope)
    gpus = replicas * tp
    cost = None if price is None else gpus * price.usd_per_gpu_hour / (served * 3600) * 1e6
    return ServingCandidate(
        accelerator=case.hw.accelerator,
        precision=case.precision,
        tp=tp,
        slots=conc,
        ttft_ms=(float(serving.ttft_s[i]) + wait) * 1e3,
        tpot_ms=float(serving.tpot_s[i]) * 1e3,
        output_tokens_per_s_per_replica=per_replica,
        replicas=replicas,
        gpus=gpus,
        cost_per_million_output_tokens_usd=cost,
        slo_met=True,
        queue_wait_ms=wait * 1e3,
    )


# Rejections by the SLO that binds; a TTFT miss keeps the wording it had.
_UNREACHABLE = {
    "ttft_p99_ms": "TTFT SLO unreachable even without queueing",
    "tpot_p99_ms": "TPOT SLO unreachable even without queueing",
    "e2e_p99_ms": "end-to-end SLO unreachable even without queueing",
}


def _miss_reason(miss: RateMissError) -> str:
    """A rejection count's key: the SLO missed before any queueing, or the replica cap."""
    if miss.unqueued:
        return _UNREACHABLE[miss.field]
    return "needs more replicas than the search allows"


def _at_load(spec: InferenceSpec, case: InferenceCase, c: ServingCandidate) -> ServingCandidate:
    """The candidate with the requests its rate keeps in flight per replica and their TPOT
    (`load_point`); solved for the kept candidates only (it tripled the search's time)."""
    sv = spec.serving
    if sv.request_rate is None:
        return c
    at = load_point(
        case,
        c.tp,
        1,
        arrival_rate_per_s=sv.request_rate / c.replicas,
        slots=c.slots,
        prompt=float(sv.mean_tokens("input")),
        out=float(sv.mean_tokens("output")),
    )
    return replace(c, in_flight=at.in_flight, tpot_at_load_ms=at.tpot_s * 1e3)


def _reject(result: ServingSearch, reason: str, case: InferenceCase, tp: int) -> None:
    """Count a rejection and keep which TP it was, for `ServingSearch.why_none`."""
    result.rejected[reason] += 1
    result.rejected_tp.setdefault(reason, []).append((case.hw.accelerator, case.precision, tp))
