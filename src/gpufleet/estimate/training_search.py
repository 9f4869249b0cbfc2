"""Search accelerators × GPU counts × parallel layouts for a training workload.

The whole space of one accelerator is built as numpy arrays and evaluated by
the same `evaluate` that `gpufleet estimate` uses, in one call: no nested
Python loops over candidates. Every candidate the search drops is counted
under a reason a person can act on, and the survivors are ranked by time,
with the Pareto front over (time, cost, GPUs) returned beside the top-k.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpufleet.catalog.pricing import ANYWHERE, PriceScope, cheapest_gpu_hour
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.training import Evaluation, Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_case import case_for
from gpufleet.specs.training import TrainingSpec

DEFAULT_GPU_COUNTS = tuple(8 * 2**k for k in range(12))  # 8 … 16,384
MICROBATCHES = (1, 2, 4, 8)
CONTEXT_PARALLEL = (1, 2, 4, 8)
VIRTUAL_STAGES = (1, 2, 4)
RECOMPUTE = (0, 1, 2)
SECONDS_PER_DAY = 86_400.0


# Pipeline sizes tried besides the divisors of the layer count (uneven last stage).
_PIPELINE_SIZES = frozenset(
    {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 48, 64, 96, 128}
)


@dataclass(frozen=True)
class Constraints:
    max_gpus: int | None = None
    deadline_s: float | None = None
    budget_usd: float | None = None
    accelerators: tuple[str, ...] = ()
    scope: PriceScope = ANYWHERE  # where its GPU-hours may be bought (prices and budget)


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration, with scalars pulled out of the arrays."""

    accelerator: str
    gpus: int
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
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_bytes: float
    train_time_s: float | None
    gpu_hours: float | None
    cost_usd: float | None


@dataclass
class SearchResult:
    candidates_evaluated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    top: list[Candidate] = field(default_factory=list)
    pareto: list[Candidate] = field(default_factory=list)
    assumptions: Assumptions = field(default_factory=Assumptions)


def divisors(n: int, limit: int | None = None) -> list[int]:
    top = n if limit is None else min(n, limit)
    return [d for d in range(1, top + 1) if n % d == 0]


def candidate_layouts(
    case: TrainingCase, gpu_counts: Sequence[int], rejected: Counter[str]
) -> Layouts:
    """Every layout of `case` on the given GPU counts that can run, as arrays."""
    arch = case.arch
    domain = case.hw.scaleup_domain_gpus
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max(domain, 1)]
    # Divisors of the layer count (even stages) and common sizes (uneven last stage).
    pps = sorted(set(divisors(arch.layers, 128)) | {p for p in _PIPELINE_SIZES if p <= arch.layers})
    eps = divisors(arch.experts, 64) if arch.is_moe else [1]
    zeros = list(case.profile.zero_stages)
    grid = np.array(
        list(
            itertools.product(
                gpu_counts,
                tps,
                pps,
                CONTEXT_PARALLEL,
                eps,
                MICROBATCHES,
                VIRTUAL_STAGES,
                zeros,
                RECOMPUTE,
            )
        ),
        dtype=np.int64,
    )
    n, tp, pp, cp, ep, mb, vs, zero, rc = grid.T
    keep = np.ones(len(grid), dtype=bool)

    def drop(mask: npt.NDArray[np.bool_], reason: str) -> None:
        nonlocal keep
        hit = keep & mask
        count = int(hit.sum())
        if count:
            rejected[reason] += count
        keep &= ~mask

    model_parallel = tp * pp * cp
    drop(n % model_parallel != 0, "GPU count not a multiple of tp × pp × cp")
    dp = np.where(model_parallel > 0, n // np.maximum(model_parallel, 1), 0)
    drop((arch.heads % tp != 0) | (arch.kv_heads % tp != 0), "tp does not divide the heads")
    drop(pp > arch.layers, "more pipeline stages than layers")
    drop(
        (vs > 1) & ((pp == 1) | (pp * vs > arch.layers)),
        "virtual stages need pp > 1 and at least one layer per virtual stage",
    )
    drop(case.seq_len % (2 * cp) != 0, "sequence length not divisible by 2 × cp")
    drop((zero == 3) & (pp > 1), "ZeRO-3 with pipeline parallelism")
    drop((ep > 1) & (dp * cp % np.maximum(ep, 1) != 0), "ep does not divide dp × cp")
    drop(
        case.global_batch % np.maximum(dp * mb, 1) != 0,
        "global batch not divisible by dp × microbatch",
    )
    sp = (tp > 1).astype(np.int64)
    idx = np.flatnonzero(keep)
    return Layouts(
        tp=tp[idx],
        pp=pp[idx],
        dp=dp[idx],
        cp=cp[idx],
        ep=ep[idx],
        mb=mb[idx],
        vs=vs[idx],
        zero=zero[idx],
        recompute=rc[idx],
        sp=sp[idx],
    )


def search_training(
    spec: TrainingSpec,
    accelerators: Sequence[str],
    gpu_counts: Sequence[int] = DEFAULT_GPU_COUNTS,
    constraints: Constraints | None = None,
    top_k: int = 10,
) -> SearchResult:
    limits = constraints or Constraints()
    result = SearchResult()
    if spec.training.tokens is None and (limits.deadline_s or limits.budget_usd):
        raise UserError("a deadline or budget needs training.tokens to know the run's length")
    counts = [c for c in gpu_counts if limits.max_gpus is None or c <= limits.max_gpus]
    skipped = len(gpu_counts) - len(counts)
    if skipped:
        result.rejected[f"GPU counts above max_gpus ({limits.max_gpus}), not enumerated"] = skipped
    pool: list[Candidate] = []
    for name in accelerators:
        case = case_for(spec, result.assumptions, accelerator=name)
        lay = candidate_layouts(case, counts, result.rejected)
        result.candidates_evaluated += int(lay.tp.size)
        if lay.tp.size == 0:
            continue
        ev = evaluate(case, lay)
        fits = ev.total_bytes <= case.hw.memory_bytes
        result.rejected["does not fit in GPU memory"] += int((~fits).sum())
        ok = fits.copy()
        gpus = lay.gpus.astype(np.float64)
        train_s = (
            np.full_like(ev.step_time_s, np.nan)
            if spec.training.tokens is None
            else spec.training.tokens / ev.tokens_per_s
        )
        price = cheapest_gpu_hour(case.hw.accelerator, limits.scope)
        if price is not None:
            result.assumptions.add(
                f"price[{case.hw.accelerator}]",
                f"${price.usd_per_gpu_hour:.2f}/GPU-h",
                price.source,
            )
        gpu_hours = train_s * gpus / 3600
        cost = gpu_hours * (price.usd_per_gpu_hour if price else np.nan)
        if limits.deadline_s is not None:
            late = ok & (train_s > limits.deadline_s)
            result.rejected["misses the deadline"] += int(late.sum())
            ok &= ~late
        if limits.budget_usd is not None and price is None:
            # a budget cannot be met by an accelerator with no price: never "free"
            result.rejected["no price to check budget_usd against"] += int(ok.sum())
            ok = np.zeros_like(ok)
        elif limits.budget_usd is not None:
            over = ok & (cost > limits.budget_usd)
            result.rejected["over budget"] += int(over.sum())
            ok &= ~over
        pool.extend(
            _best_per_count(
                case, lay=lay, ev=ev, ok=ok, train_s=train_s, gpu_hours=gpu_hours, cost=cost
            )
        )

    def rank(c: Candidate) -> tuple[float, int]:
        time = c.train_time_s if c.train_time_s is not None else c.step_time_s
        return (time, c.gpus)

    pool.sort(key=rank)
    result.top = pool[:top_k]
    result.pareto = pareto_front(pool)
    return result


def _best_per_count(
    case: TrainingCase,
    *,
    lay: Layouts,
    ev: Evaluation,
    ok: npt.NDArray[np.bool_],
    train_s: npt.NDArray[np.float64],
    gpu_hours: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
) -> list[Candidate]:
    """The fastest feasible layout for each GPU count (the rest are dominated by it)."""
    out: list[Candidate] = []
    gpus = lay.gpus
    for count in np.unique(gpus[ok]):
        idx = np.flatnonzero(ok & (gpus == count))
        best = int(idx[np.argmin(ev.step_time_s[idx])])
        out.append(
            _candidate(
                case, lay=lay, ev=ev, i=best, train_s=train_s, gpu_hours=gpu_hours, cost=cost
            )
        )
    return out


def _candidate(
    case: TrainingCase,
    *,
    lay: Layouts,
    ev: Evaluation,
    i: int,
    train_s: npt.NDArray[np.float64],
    gpu_hours: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
) -> Candidate:
    def num(a: npt.NDArray[np.float64]) -> float | None:
        v = float(a[i])
        return None if np.isnan(v) else v

    return Candidate(
        accelerator=case.hw.accelerator,
        gpus=int(lay.gpus[i]),
        tp=int(lay.tp[i]),
        pp=int(lay.pp[i]),
        dp=int(lay.dp[i]),
        cp=int(lay.cp[i]),
        ep=int(lay.ep[i]),
        microbatch=int(lay.mb[i]),
        virtual_stages=int(lay.vs[i]),
        zero_stage=int(lay.zero[i]),
        recompute=("none", "selective", "full")[int(lay.recompute[i])],
        sequence_parallel=bool(lay.sp[i]),
        step_time_s=float(ev.step_time_s[i]),
        tokens_per_s=float(ev.tokens_per_s[i]),
        mfu=float(ev.mfu[i]),
        memory_bytes=float(ev.total_bytes[i]),
        train_time_s=num(train_s),
        gpu_hours=num(gpu_hours),
        cost_usd=num(cost),
    )


def pareto_front(pool: Sequence[Candidate]) -> list[Candidate]:
    """Candidates no other beats on time, cost and GPU count at once."""

    def objectives(c: Candidate) -> tuple[float, float, float]:
        time = c.train_time_s if c.train_time_s is not None else c.step_time_s
        cost = c.cost_usd if c.cost_usd is not None else (c.gpu_hours or 0.0)
        return (time, cost, float(c.gpus))

    points = [objectives(c) for c in pool]
    front: list[Candidate] = []
    for i, p in enumerate(points):
        dominated = any(
            all(q[k] <= p[k] for k in range(3)) and any(q[k] < p[k] for k in range(3))
            for j, q in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(pool[i])
    front.sort(key=objectives)
    return front
