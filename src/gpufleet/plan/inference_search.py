"""Search accelerators × tensor parallelism × weight precision for a serving workload.

For each candidate: the largest concurrency whose time per output token meets
the SLO and whose KV cache fits, the replica throughput it gives, the replicas
a request rate needs under the TTFT SLO (M/G/c), and the cost per million
output tokens. Concurrency levels are evaluated as numpy arrays per
(accelerator, precision); candidates are ranked by cost.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpufleet.catalog.pricing import ANYWHERE, PriceScope, cheapest_gpu_hour
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference import InferenceCase, max_sequences
from gpufleet.estimate.inference_estimate import (
    DEFAULT_SERVICE_CV,
    MAX_UTILISATION,
    case_for,
    slo_concurrency,
)
from gpufleet.estimate.queueing import replicas_needed
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


@dataclass(frozen=True)
class ServingCandidate:
    accelerator: str
    precision: str
    tp: int
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s_per_replica: float
    replicas: int
    gpus: int
    cost_per_million_output_tokens_usd: float | None
    slo_met: bool


@dataclass
class ServingSearch:
    candidates_evaluated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    top: list[ServingCandidate] = field(default_factory=list)
    assumptions: Assumptions = field(default_factory=Assumptions)


def search_inference(
    spec: InferenceSpec,
    accelerators: Sequence[str] = DEFAULT_ACCELERATORS,
    precisions: Sequence[str] = PRECISIONS,
    top_k: int = 10,
    scope: PriceScope = ANYWHERE,
) -> ServingSearch:
    result = ServingSearch()
    sv = spec.serving
    prompt, out = float(sv.mean_tokens("input")), float(sv.mean_tokens("output"))
    longest = float(sv.max_tokens("input") + sv.max_tokens("output"))
    pool: list[ServingCandidate] = []
    for name in accelerators:
        for precision in precisions:
            try:
                case = case_for(spec, result.assumptions, accelerator=name, precision=precision)
            except UserError as exc:
                result.rejected[_reason(str(exc))] += len(TP_CHOICES)
                continue
            domain = case.hw.scaleup_domain_gpus
            for tp in TP_CHOICES:
                result.candidates_evaluated += 1
                if tp > domain:
                    result.rejected["tp beyond the scale-up domain"] += 1
                    continue
                if spec.model.heads % tp:
                    result.rejected["tp does not divide the heads"] += 1
                    continue
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
                if cand is not None:
                    pool.append(cand)
    pool.sort(
        key=lambda c: (not c.slo_met, c.cost_per_million_output_tokens_usd or math.inf, c.gpus)
    )
    result.top = pool[:top_k]
    return result


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
) -> ServingCandidate | None:

    assert isinstance(case, InferenceCase)
    sv = spec.serving
    t = np.array([float(tp)])
    cap = int(max_sequences(case, t, np.array([longest]))[0])
    if cap < 1:
        result.rejected["model and one request do not fit in memory"] += 1
        return None
    # the same levels and SLO test as `estimate inference`, so both give one concurrency
    best = slo_concurrency(spec, case, tp, limit=cap, prompt=prompt, out=out)
    if best.index is None:
        result.rejected["no concurrency meets the SLO"] += 1
        return None
    i, serving, conc = best.index, best.serving, best.concurrency
    per_replica = float(serving.output_tokens_per_s[i])
    replicas, wait = 1, 0.0
    if sv.request_rate is not None:
        ttft_slo = (sv.slo.ttft_p99_ms or 1e12) / 1e3
        try:
            replicas, q = replicas_needed(
                sv.request_rate,
                float(serving.request_time_s[i]),
                DEFAULT_SERVICE_CV,
                conc,
                float(serving.ttft_s[i]),
                ttft_slo,
                max_utilisation=MAX_UTILISATION,
            )
            wait = float(q.p99_wait_s)
        except ValueError as exc:
            reason = (
                "TTFT SLO unreachable even without queueing"
                if "exceeds ttft_p99_s" in str(exc)
                else "needs more replicas than the search allows"
            )
            result.rejected[reason] += 1
            return None
    served = sv.request_rate * out if sv.request_rate is not None else per_replica
    price = cheapest_gpu_hour(case.hw.accelerator, scope)
    gpus = replicas * tp
    cost = None if price is None else gpus * price.usd_per_gpu_hour / (served * 3600) * 1e6
    return ServingCandidate(
        accelerator=case.hw.accelerator,
        precision=case.precision,
        tp=tp,
        concurrency=conc,
        ttft_ms=(float(serving.ttft_s[i]) + wait) * 1e3,
        tpot_ms=float(serving.tpot_s[i]) * 1e3,
        output_tokens_per_s_per_replica=per_replica,
        replicas=replicas,
        gpus=gpus,
        cost_per_million_output_tokens_usd=cost,
        slo_met=True,
    )
