"""Search accelerators × GPU counts × parallel layouts for a training workload.

The whole space of one accelerator is built as numpy arrays and evaluated by
the same `evaluate` that `gpufleet estimate` uses, in one call: no nested
Python loops over candidates. Every candidate the search drops is counted
under a reason a person can act on, and the survivors are ranked by time,
with the Pareto front over (time, cost, GPUs) returned beside the top-k.

GPU counts are not a fixed grid: `gpu_counts_for` takes the whole-server counts that split
into tp · pp · cp · dp layouts, so a cluster of 3,072 or 5,128 GPUs is searched as it is
(design 0003, "Which GPU counts the search tries").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpufleet.catalog.pricing import ANYWHERE, PriceScope, cheapest_gpu_hour
from gpufleet.catalog.systems import get_system
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.hardware import GpuHardware
from gpufleet.estimate.training import Evaluation, Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_case import case_for
from gpufleet.estimate.training_memory import (
    concat_evaluations,
    concat_layouts,
    host_fits,
    offload_variants,
)
from gpufleet.estimate.training_offload import offload_assumptions
from gpufleet.formatting import format_gb
from gpufleet.specs.training import TrainingSpec

DEFAULT_MAX_GPUS = 16_384  # the search's ceiling when neither max_gpus nor hardware.count is given
POWER_OF_TWO_COUNTS = tuple(8 * 2**k for k in range(12))  # 8 … 16,384: always tried
COUNTS_PER_OCTAVE = 8  # at most this many other GPU counts per doubling (~9 % apart)
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
    offload: str = "none"  # "optimizer": state in host memory (training_offload)


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


@dataclass(frozen=True)
class _Axes:
    """The values each layout dimension takes, before the feasibility rules."""

    tp: list[int]
    pp: list[int]
    ep: list[int]
    zero: list[int]


def _axes(case: TrainingCase) -> _Axes:
    arch = case.arch
    domain = case.hw.scaleup_domain_gpus
    return _Axes(
        tp=[t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max(domain, 1)],
        # Divisors of the layer count (even stages) and common sizes (uneven last stage).
        pp=sorted(
            set(divisors(arch.layers, 128)) | {p for p in _PIPELINE_SIZES if p <= arch.layers}
        ),
        ep=divisors(arch.experts, 64) if arch.is_moe else [1],
        zero=list(case.profile.zero_stages),
    )


def candidate_layouts(
    case: TrainingCase, gpu_counts: Sequence[int], rejected: Counter[str]
) -> Layouts:
    """Every layout of `case` on the given GPU counts that can run, as arrays.

    The space is the product gpu_counts × tp × pp × cp × ep × microbatch × virtual
    stages × ZeRO stage × recompute, and each point breaking a rule is counted under the
    first rule it breaks, in the order below. The product is not materialised: it is
    grown one axis at a time in product order, and each rule is applied as soon as the
    axes it reads exist, so a row dropped early stands for every point the later axes
    would have made from it (its weight). This gives the same survivors, in the same
    order, and the same counts as filtering the full product, at a fraction of the cost:
    the full product for a 405B model on one GPU count is ~30,000 points, most of which
    the GPU-count rule removes before microbatch, ZeRO and recompute multiply them.
    """
    arch = case.arch
    ax = _axes(case)
    axes: list[tuple[str, Sequence[int]]] = [
        ("n", list(gpu_counts)),
        ("tp", ax.tp),
        ("pp", ax.pp),
        ("cp", CONTEXT_PARALLEL),
        ("ep", ax.ep),
        ("mb", MICROBATCHES),
        ("vs", case.profile.virtual_stages),
        ("zero", ax.zero),
        ("rc", RECOMPUTE),
    ]
    cols: dict[str, npt.NDArray[np.int64]] = {}
    rows = 1
    grown = 0

    def grow(upto: str) -> None:
        """Extend every row by the next axes, through `upto`, in product order."""
        nonlocal rows, grown
        while grown < len(axes):
            name, values = axes[grown]
            k = len(values)
            for key, col in cols.items():
                cols[key] = np.repeat(col, k)
            cols[name] = np.tile(np.asarray(values, dtype=np.int64), rows)
            rows *= k
            grown += 1
            if name == upto:
                return

    def drop(mask: npt.NDArray[np.bool_], reason: str) -> None:
        """Remove the rows in `mask`, counting each with the points it stands for."""
        nonlocal rows
        count = int(mask.sum())
        if count:
            weight = int(np.prod([len(values) for _, values in axes[grown:]], dtype=np.int64))
            rejected[reason] += count * weight
            keep = ~mask
            for key, col in cols.items():
                cols[key] = col[keep]
            rows -= count

    grow("cp")
    n, tp, pp, cp = cols["n"], cols["tp"], cols["pp"], cols["cp"]
    drop(n % (tp * pp * cp) != 0, "GPU count not a multiple of tp × pp × cp")
    cols["dp"] = cols["n"] // (cols["tp"] * cols["pp"] * cols["cp"])
    tp = cols["tp"]
    drop((arch.heads % tp != 0) | (arch.kv_heads % tp != 0), "tp does not divide the heads")
    drop(cols["pp"] > arch.layers, "more pipeline stages than layers")
    grow("vs")
    pp, vs = cols["pp"], cols["vs"]
    drop(
        (vs > 1) & ((pp == 1) | (pp * vs > arch.layers)),
        "virtual stages need pp > 1 and at least one layer per virtual stage",
    )
    drop(case.seq_len % (2 * cols["cp"]) != 0, "sequence length not divisible by 2 × cp")
    grow("zero")
    drop((cols["zero"] == 3) & (cols["pp"] > 1), "ZeRO-3 with pipeline parallelism")
    ep = cols["ep"]
    drop(
        (ep > 1) & (cols["dp"] * cols["cp"] % np.maximum(ep, 1) != 0),
        "ep does not divide dp × cp",
    )
    drop(
        case.global_batch % np.maximum(cols["dp"] * cols["mb"], 1) != 0,
        "global batch not divisible by dp × microbatch",
    )
    grow("rc")
    tp = cols["tp"]
    return Layouts(
        tp=tp,
        pp=cols["pp"],
        dp=cols["dp"],
        cp=cols["cp"],
        ep=cols["ep"],
        mb=cols["mb"],
        vs=cols["vs"],
        zero=cols["zero"],
        recompute=cols["rc"],
        sp=(tp > 1).astype(np.int64),
    )


def server_gpus(hw: GpuHardware) -> int:
    """GPUs in one server or tray: the unit a scheduler gives a job whole.

    `gpus_per_node` is per catalog row, and a row can be a rack (GB200 NVL72: 72 GPUs in
    18 trays of 4) or a SuperPOD scalable unit (256 GPUs in 32 DGX servers); jobs are
    placed on whole servers, not whole racks, so the row is divided by its compute nodes.
    """
    if hw.system is not None:
        row = get_system(hw.system)
        return max(1, row.node_gpus // (row.compute_nodes or 1))
    return max(1, hw.gpus_per_node)


def layout_products(case: TrainingCase, limit: int) -> Counter[int]:
    """How many (tp, pp, cp, dp) splits make each GPU count up to `limit`.

    tp, pp and cp range over the search's own values that the model allows (tp divides
    the heads, 2·cp divides the sequence), and dp divides the global batch (dp ×
    microbatch must, with microbatch ≥ 1). A count missing here has no layout at all:
    every grid point on it breaks the GPU-count or the global-batch rule.
    """
    arch, ax = case.arch, _axes(case)
    tps = [t for t in ax.tp if arch.heads % t == 0 and arch.kv_heads % t == 0]
    cps = [c for c in CONTEXT_PARALLEL if case.seq_len % (2 * c) == 0]
    dps = divisors(case.global_batch, limit)
    ways: Counter[int] = Counter()
    for tp in tps:
        for pp in ax.pp:
            for cp in cps:
                split = tp * pp * cp
                for dp in dps:
                    if split * dp > limit:
                        break
                    ways[split * dp] += 1
    return ways


def gpu_counts_for(case: TrainingCase, max_gpus: int, exact: int | None = None) -> list[int]:
    """The GPU counts the search tries for `case`: whole servers, up to `max_gpus`.

    Every multiple of the server size up to 16,384 is 2,048 counts on 8-GPU servers,
    and almost all of them have no layout: the search splits a count as tp · pp · cp ·
    dp with dp dividing the global batch, so a count with a large prime factor (5,128 =
    8 × 641) cannot be split unless the batch holds that prime. The candidates are
    therefore the whole-server counts that do split (`layout_products`), which are a
    few dozen for a power-of-two batch. A batch with many divisors can make hundreds;
    then each band of a doubling cut in `COUNTS_PER_OCTAVE` log-spaced bands (~9 %
    wide) keeps one count, the one with the most splits (the most freedom to find a
    fast layout; the smaller on a tie), so the space stays bounded and spread evenly.
    Always kept, whatever their band: the power-of-two counts 8 … 16,384 (the
    search's earlier grid, so nothing it found is lost), the largest count that splits
    within `max_gpus` (all of a cluster) and `exact`, the user's hardware.count, even
    when it does not split or is not whole servers, so the result says why.
    """
    unit = server_gpus(case.hw)
    ways = {n: k for n, k in layout_products(case, max_gpus).items() if n % unit == 0}
    pinned = {n for n in POWER_OF_TWO_COUNTS if n in ways}
    if ways:
        pinned.add(max(ways))
    if exact is not None and exact <= max_gpus:
        pinned.add(exact)
    best: dict[int, int] = {}
    for n in sorted(ways):
        band = math.floor(COUNTS_PER_OCTAVE * math.log2(n / unit) + 1e-9)
        if band not in best or ways[n] > ways[best[band]]:
            best[band] = n
    taken = {math.floor(COUNTS_PER_OCTAVE * math.log2(n / unit) + 1e-9) for n in pinned}
    return sorted(pinned | {n for band, n in best.items() if band not in taken})


def search_training(
    spec: TrainingSpec,
    accelerators: Sequence[str],
    gpu_counts: Sequence[int] | None = None,
    constraints: Constraints | None = None,
    top_k: int = 10,
) -> SearchResult:
    """The fastest layout per accelerator and GPU count, ranked, with the Pareto front.

    Without `gpu_counts` each accelerator gets `gpu_counts_for` up to the ceiling:
    `max_gpus` when given, else the spec's hardware.count (the GPUs the user has; a
    run may use fewer), else 16,384. The spec's hardware.count is always among them
    when within the ceiling, and if it gets no layout `rejected` says why.
    """
    limits = constraints or Constraints()
    result = SearchResult()
    if spec.training.tokens is None and (limits.deadline_s or limits.budget_usd):
        raise UserError("a deadline or budget needs training.tokens to know the run's length")
    exact = spec.hardware.count
    ceiling = limits.max_gpus or exact or DEFAULT_MAX_GPUS
    given: list[int] = []
    if gpu_counts is not None:
        given = [c for c in gpu_counts if limits.max_gpus is None or c <= limits.max_gpus]
        skipped = len(gpu_counts) - len(given)
        if skipped:
            result.rejected[f"GPU counts above max_gpus ({limits.max_gpus}), not enumerated"] = (
                skipped
            )
    elif exact is not None and exact > ceiling:
        result.rejected[
            f"hardware.count ({exact:,}) above max_gpus ({ceiling:,}), not searched"
        ] = 1
    pool: list[Candidate] = []
    for name in accelerators:
        case = case_for(spec, result.assumptions, accelerator=name)
        counts = given if gpu_counts is not None else gpu_counts_for(case, ceiling, exact)
        if not counts:
            result.rejected[
                f"no GPU count up to {ceiling:,} on whole {server_gpus(case.hw)}-GPU servers "
                f"of {case.hw.accelerator}"
            ] += 1
            continue
        lay = candidate_layouts(case, counts, result.rejected)
        result.candidates_evaluated += int(lay.tp.size)
        if lay.tp.size == 0:
            found: list[Candidate] = []
        else:
            found = _evaluate(case, lay, spec, limits, result)
        pool.extend(found)
        missing = exact is not None and all(c.gpus != exact for c in found)
        if gpu_counts is None and exact is not None and exact in counts and missing:
            result.rejected[_why_no_layout_on(case, exact, lay)] += 1

    def rank(c: Candidate) -> tuple[float, int]:
        time = c.train_time_s if c.train_time_s is not None else c.step_time_s
        return (time, c.gpus)

    pool.sort(key=rank)
    result.top = pool[:top_k]
    result.pareto = pareto_front(pool)
    return result


def _evaluate(
    case: TrainingCase,
    lay: Layouts,
    spec: TrainingSpec,
    limits: Constraints,
    result: SearchResult,
) -> list[Candidate]:
    """Evaluate the layouts of one accelerator, drop those breaking a constraint (counted
    in `result.rejected`) and return the fastest survivor per GPU count."""
    ev = evaluate(case, lay)
    fits = ev.total_bytes <= case.hw.memory_bytes
    result.rejected["does not fit in GPU memory"] += int((~fits).sum())
    lay, ev, fits = _with_offload(case, lay, ev, fits, result)
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
    return _best_per_count(
        case, lay=lay, ev=ev, ok=ok, train_s=train_s, gpu_hours=gpu_hours, cost=cost
    )


def _with_offload(
    case: TrainingCase,
    lay: Layouts,
    ev: Evaluation,
    fits: npt.NDArray[np.bool_],
    result: SearchResult,
) -> tuple[Layouts, Evaluation, npt.NDArray[np.bool_]]:
    """Add optimizer-offloaded variants of the layouts on GPU counts where none fits in HBM
    (only there: offload adds host traffic, so a count with a fitting layout keeps it)."""
    stuck = ~np.isin(lay.gpus, lay.gpus[fits])
    extra = offload_variants(case, lay.take(np.flatnonzero(stuck)))
    if extra.tp.size == 0:
        return lay, ev, fits
    ev_off = evaluate(case, extra)
    hbm = ev_off.total_bytes <= case.hw.memory_bytes
    host = host_fits(case, ev_off)
    result.candidates_evaluated += int(extra.tp.size)
    for why, mask in (
        ("does not fit in GPU memory even with optimizer offload", ~hbm),
        ("offloaded optimizer state does not fit in host memory", hbm & ~host),
    ):
        if mask.any():  # no zero counts in the list of reasons
            result.rejected[why] += int(mask.sum())
    if (hbm & host).any():
        offload_assumptions(case.hw, result.assumptions)
    return (
        concat_layouts(lay, extra),
        concat_evaluations(ev, ev_off),
        np.concatenate([fits, hbm & host]),
    )


def _why_no_layout_on(case: TrainingCase, count: int, lay: Layouts) -> str:
    """One line on why the user's own GPU count has no result on this accelerator."""
    head = f"hardware.count {count:,} on {case.hw.accelerator}:"
    mine = lay.take(lay.gpus == count)
    if mine.tp.size:
        least_bytes = float(evaluate(case, mine).total_bytes.min())
        if least_bytes > case.hw.memory_bytes:
            return (
                f"{head} none of its {mine.tp.size:,} layouts fits in memory (the smallest "
                f"needs {format_gb(least_bytes)} of {format_gb(case.hw.memory_bytes)})"
            )
        return f"{head} every layout that fits in memory misses the deadline or budget"
    ways = layout_products(case, 2 * count)
    if count not in ways:
        below = max((n for n in ways if n < count), default=None)
        above = min((n for n in ways if n > count), default=None)
        near = " and ".join(f"{n:,}" for n in (below, above) if n is not None)
        return (
            f"{head} no layout: it is not tp × pp × cp × dp with dp dividing global_batch "
            f"({case.global_batch:,}); the nearest counts that split are {near}"
        )
    own: Counter[str] = Counter()
    candidate_layouts(case, [count], own)
    why = own.most_common(1)[0][0] if own else "no rule recorded"
    return f"{head} no layout (most grid points: {why})"


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
    """The fastest feasible layout for each GPU count (the rest are dominated by it).

    One stable sort by (count, step time) instead of a pass over every layout per count:
    the first row of each count is its fastest, the earliest layout on a tie, as argmin.
    """
    idx = np.flatnonzero(ok)
    gpus = lay.gpus[idx]
    order = np.lexsort((ev.step_time_s[idx], gpus))
    first = order[np.r_[True, gpus[order][1:] != gpus[order][:-1]]] if idx.size else order
    return [
        _candidate(
            case, lay=lay, ev=ev, i=int(idx[j]), train_s=train_s, gpu_hours=gpu_hours, cost=cost
        )
        for j in first
    ]


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
        gpus=int(lay.tp[i] * lay.pp[i] * lay.dp[i] * lay.cp[i]),  # not lay.gpus: whole arrays
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
        offload="optimizer" if int(lay.offloaded[i]) == 1 else "none",
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
