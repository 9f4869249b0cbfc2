"""The services of a multi-team plan, sized once per candidate accelerator: replicas, tensor
parallelism or MIG slices from the inference estimator and search, at each service's peak
request rate.

Apart from `fleet_setup` (which turns them, the traces and the training workloads into what
one simulation runs) because sizing a service is the estimator's question, not the
simulator's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import check_layout, mig_profiles_for
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference_estimate import estimate_inference
from gpufleet.estimate.inference_rate import (
    MAX_UTILISATION,
    RateMissError,
    ReplicaPoint,
    replicas_within_slos,
)
from gpufleet.plan.inference_search import ServingCandidate, search_inference
from gpufleet.plan.planner import serving_on
from gpufleet.specs.fleet import PlanInferenceEntry
from gpufleet.specs.inference import InferenceSpec, ServingParams


@dataclass(frozen=True)
class ServiceSizing:
    """One inference entry sized on one accelerator (peak replicas)."""

    team: str
    service: str
    model: str
    accelerator: str
    request_rate: float
    tp: int
    replicas: int  # at the peak: whole-GPU replicas, or slices when `mig_profile` is set
    mig_profile: str | None
    slices_per_gpu: int  # MIG: slices of the profile one GPU is cut into; 0 for whole GPUs
    compute_share: float  # MIG: the slice's share of the GPU's compute (quota weight)
    ttft_ms: float
    tpot_ms: float
    whole_gpus: int  # what whole-GPU replicas would take at the peak
    how: str

    @property
    def gpu_equivalent(self) -> float:
        """GPUs the service takes at its peak: whole GPUs, or slices / slices per GPU."""
        if self.mig_profile is None:
            return float(self.replicas * self.tp)
        return self.replicas / self.slices_per_gpu

    @property
    def quota_gpus(self) -> float:
        """What the peak replicas weigh against a quota (slices by compute share)."""
        if self.mig_profile is None:
            return float(self.replicas * self.tp)
        return self.replicas * self.compute_share


def service_label(entry: PlanInferenceEntry) -> str:
    return entry.name or "inference"


def size_service(
    team: str, entry: PlanInferenceEntry, accelerator: str, log: Assumptions
) -> ServiceSizing | str:
    """The service's replicas on `accelerator` at its peak rate, or why it cannot be served."""

    label = f"{team}/{service_label(entry)}"
    for key, default in (("input_tokens", "1,024"), ("output_tokens", "256")):
        if key not in entry.model_fields_set:
            log.add(f"{key}[{label}]", default, "not given in the spec (assumption)")
    serving = serving_on(
        ServingParams(
            precision=entry.precision,
            engine=entry.engine,
            input_tokens=entry.input_tokens,
            output_tokens=entry.output_tokens,
            request_rate=entry.request_rate,
            slo=entry.slo,
        ),
        accelerator,
        label,
        log,
    )
    try:
        inf = InferenceSpec.model_validate(
            {
                "kind": "inference",
                "name": label,
                "model": entry.model.model_dump(),
                "serving": serving.model_dump(),
                "hardware": {"accelerator": accelerator},
            }
        )
    except ValueError as exc:
        return f"{label} on {accelerator}: {str(exc).splitlines()[-1].strip()}"
    result = search_inference(inf, [accelerator], precisions=[serving.precision], top_k=1)
    if not result.top:
        # memory is not an SLO matter: say which stops it (a count of TP sizes read as a count
        # of models, "4 × model and one request do not fit", and "within the SLO" misled)
        within = "" if result.memory_misses else " within the SLO"
        return f"{label} on {accelerator}: cannot serve it{within}: {result.why_none()}"
    best = result.top[0]
    whole = ServiceSizing(
        team=team,
        service=service_label(entry),
        model=entry.model.name or "model",
        accelerator=accelerator,
        request_rate=entry.request_rate,
        tp=best.tp,
        replicas=best.replicas,
        mig_profile=None,
        slices_per_gpu=0,
        compute_share=1.0,
        ttft_ms=best.ttft_ms,
        tpot_ms=best.tpot_ms,
        whole_gpus=best.gpus,
        how=f"{best.replicas} replica{'s' * (best.replicas != 1)} × {best.tp} GPU "
        f"(TP {best.tp}, {best.slots} slots each{_in_flight(best)}) for "
        f"{entry.request_rate:g} req/s within the SLO",
    )
    if not entry.mig or best.tp != 1 or not mig_profiles_for(accelerator):
        return whole
    est = estimate_inference(inf)
    if est.tp != 1:
        return whole
    device = get_accelerator(accelerator)
    options: list[ServiceSizing] = []
    profiles = {p.profile: p for p in mig_profiles_for(accelerator)}
    for fit in est.mig_fit:
        p = profiles[fit.profile]
        if not fit.fits or fit.output_tokens_per_s <= 0 or p.compute_slices >= 7:
            continue
        per_gpu = _homogeneous_count(accelerator, p.profile, p.max_instances)
        if per_gpu == 0:
            continue
        point = _slice_point(
            inf,
            best,
            slots=min(est.batch, fit.max_batch),
            tokens_per_s=fit.output_tokens_per_s,
            compute_slices=p.compute_slices,
            memory_ratio=device.memory_bytes / p.memory_bytes,
        )
        try:  # the whole-GPU rule: TTFT, TPOT and e2e at the rate, the slices' own queue
            slices, q = replicas_within_slos(inf, point)
        except RateMissError:
            continue
        ttft = (point.prefill_s + q.p99_wait_s) * 1e3
        options.append(
            replace(
                whole,
                replicas=slices,
                mig_profile=p.profile,
                slices_per_gpu=per_gpu,
                compute_share=p.compute_slices / 7,
                ttft_ms=ttft,
                tpot_ms=point.tpot_s * 1e3,
                how=f"{slices} MIG {p.profile} slice{'s' * (slices != 1)} "
                f"({point.slots} slots each, run at most {MAX_UTILISATION:.0%} busy) for "
                f"{entry.request_rate:g} req/s within the SLO instead of {best.gpus} whole "
                f"GPU{'s' * (best.gpus != 1)}",
            )
        )
    if not options:
        return whole
    pick = min(options, key=lambda o: (o.gpu_equivalent, o.replicas))
    if pick.gpu_equivalent >= whole.gpu_equivalent:
        return whole
    log.add(
        "mig slice latency",
        "TTFT × 7 / compute slices; TPOT × GPU memory / slice memory",
        "a slice has its share of the SMs (prefill) and of memory bandwidth (decode), "
        "scaled from the whole-GPU estimate (approximation)",
    )
    return pick


def _slice_point(
    inf: InferenceSpec,
    best: ServingCandidate,
    *,
    slots: int,
    tokens_per_s: float,
    compute_slices: int,
    memory_ratio: float,
) -> ReplicaPoint:
    """A MIG slice at full slots (`slots`: the whole GPU's within the SLOs, no more than fit
    the slice's memory), what `replicas_within_slos` sizes its slices on.

    The latencies held to the SLOs are scaled from the whole-GPU candidate (the logged
    approximation): a prefill (TTFT before any queue wait) × 7 / compute slices, its share
    of the SMs, and a TPOT × GPU memory / slice memory, its share of bandwidth. The queue
    wait is the slices' own, not the whole GPU's scaled with the prefill. A request holds a
    slot for slots × mean output / the slice's throughput (`mig_fit`, Little's law at full
    slots): the basis the slices were counted on before the queue and the e2e SLO were."""
    prefill_s = (best.ttft_ms - best.queue_wait_ms) / 1e3 * 7 / compute_slices
    out = float(inf.serving.mean_tokens("output"))
    return ReplicaPoint(
        slots=max(1, slots),
        prefill_s=prefill_s,
        tpot_s=best.tpot_ms / 1e3 * memory_ratio,
        request_time_s=max(1, slots) * out / tokens_per_s,
    )


def _in_flight(best: ServingCandidate) -> str:
    """', about N in flight at the peak': the requests the peak rate keeps in each replica
    (Little's law), which the slots only bound (they were printed as "in flight")."""
    if best.in_flight is None:
        return ""
    return f", about {best.in_flight:,.0f} in flight at the peak rate"


def _homogeneous_count(accelerator: str, profile: str, most: int) -> int:
    """Most slices of one profile a GPU can be cut into, by the catalog's layout rules."""
    for count in range(most, 0, -1):
        if not check_layout(accelerator, {profile: count}):
            return count
    return 0
