"""Replicas for a request rate within every stated SLO: the one rule that `estimate
inference`, `search inference` and a plan's MIG options size a serving pool by.

A request's p99 queue wait adds to its time to first token and so to its end-to-end time
(`e2e_s`); the TPOT does not depend on the wait. So the wait may use the smaller of two
budgets, TTFT SLO − prefill and e2e SLO − prefill − decode, and the replicas are the fewest
whose M/G/c p99 wait (`replicas_needed`) fits it, at most MAX_UTILISATION busy.

Apart from `inference_estimate` because three callers size pools by it: the search sized
against the TTFT SLO only and listed 7 replicas of a 70B tp 4 whose p99 request took
3,970 ms against a 3,000 ms e2e SLO (9 meet it), and the plan's MIG options re-checked only
TTFT and TPOT, never the e2e SLO or the queue of the slices themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufleet.estimate.inference_load import decode_tokens
from gpufleet.estimate.queueing import MAX_REPLICAS, QueueResult, replicas_needed
from gpufleet.specs.inference import InferenceSpec

# Output lengths vary; a request's service time has this coefficient of variation when
# the spec gives no p99 (exponential-like spread; assumption).
DEFAULT_SERVICE_CV = 1.0
# Headroom: the queue model pools every slot of the fleet behind one queue, which routers
# only approach; replicas are also sized so the fleet runs at most this busy (assumption).
MAX_UTILISATION = 0.85
# The wait budget passed to the queue when no SLO bounds the wait (it must be finite).
NO_LATENCY_SLO_S = 1e9


@dataclass(frozen=True)
class ReplicaPoint:
    """One replica (or MIG slice) at full slots: the figures its pool is sized and its SLOs
    are checked on. prefill_s is the p99 prompt's TTFT before any queue wait; tpot_s the
    time per output token with every slot busy; request_time_s the mean time a request
    holds a slot (the queue's service time)."""

    slots: int
    prefill_s: float
    tpot_s: float
    request_time_s: float


class RateMissError(ValueError):
    """No replica count serves the rate within the SLOs. `field` is the Slo field that
    binds ('ttft_p99_ms', 'tpot_p99_ms' or 'e2e_p99_ms'); `unqueued` is True where the
    point misses it before any queueing (more replicas cannot help), False where no count
    up to the cap keeps the p99 wait within it."""

    def __init__(self, field: str, *, unqueued: bool, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.unqueued = unqueued


def wait_budget_s(spec: InferenceSpec, point: ReplicaPoint) -> tuple[str, float]:
    """The SLO field that bounds the p99 queue wait and the TTFT it allows (prefill + wait):
    the TTFT SLO itself, or the e2e SLO less the p99 request's decode, whichever is tighter;
    ('ttft_p99_ms', inf) when neither is stated."""
    slo = spec.serving.slo
    budgets = {"ttft_p99_ms": (slo.ttft_p99_ms or math.inf) / 1e3}
    if slo.e2e_p99_ms is not None:  # a wait W meets it while TTFT + W + decode <= SLO
        budgets["e2e_p99_ms"] = slo.e2e_p99_ms / 1e3 - decode_tokens(spec) * point.tpot_s
    field = min(budgets, key=lambda k: budgets[k])
    return field, budgets[field]


def replicas_within_slos(
    spec: InferenceSpec, point: ReplicaPoint, max_replicas: int = MAX_REPLICAS
) -> tuple[int, QueueResult]:
    """The fewest replicas of `point` that serve `spec.serving.request_rate` within its TPOT,
    TTFT and e2e SLOs (p99 queue wait included), run at most MAX_UTILISATION busy, and
    their queue. Raises RateMissError naming the SLO that no count up to max_replicas meets."""
    rate = spec.serving.request_rate
    if rate is None:
        raise ValueError("replicas_within_slos needs serving.request_rate")
    tpot_slo = spec.serving.slo.tpot_p99_ms
    if tpot_slo is not None and point.tpot_s * 1e3 > tpot_slo:
        raise RateMissError(
            "tpot_p99_ms",
            unqueued=True,
            message=f"TPOT {point.tpot_s * 1e3:,.1f} ms exceeds the {tpot_slo:g} ms SLO "
            f"at {point.slots:,} slots",
        )
    field, budget = wait_budget_s(spec, point)
    if point.prefill_s > budget:
        raise RateMissError(
            field,
            unqueued=True,
            message=f"prefill {point.prefill_s * 1e3:,.1f} ms leaves no queue wait within "
            f"{field} ({budget * 1e3:,.1f} ms allowed before decode)",
        )
    try:
        return replicas_needed(
            rate,
            point.request_time_s,
            DEFAULT_SERVICE_CV,
            point.slots,
            point.prefill_s,
            budget if math.isfinite(budget) else NO_LATENCY_SLO_S,
            max_replicas=max_replicas,
            max_utilisation=MAX_UTILISATION,
        )
    except ValueError as exc:
        raise RateMissError(field, unqueued=False, message=str(exc)) from exc


__all__ = [
    "DEFAULT_SERVICE_CV",
    "MAX_UTILISATION",
    "RateMissError",
    "ReplicaPoint",
    "replicas_within_slos",
    "wait_budget_s",
]
