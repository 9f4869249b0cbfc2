"""Training search: a brute-force oracle, the Pareto front and the constraints.

The oracle enumerates the search space with plain Python loops, applies each
feasibility rule as written in the rule list below and evaluates every
survivor on its own (`Layouts.single`); the vectorised search must agree with
it on what survives, why the rest were dropped and which layout wins.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.training import Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_case import case_for
from gpufleet.estimate.training_search import (
    Candidate,
    Constraints,
    SearchResult,
    candidate_layouts,
    pareto_front,
    search_training,
)
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"
RECOMPUTE_NAMES = ("none", "selective", "full")


def make_spec(
    model: str | dict[str, Any],
    *,
    seq_len: int,
    global_batch: int,
    framework: str = "megatron",
    tokens: str | None = None,
    accelerator: str = H100,
) -> TrainingSpec:
    training: dict[str, Any] = {
        "seq_len": seq_len,
        "global_batch": global_batch,
        "framework": framework,
    }
    if tokens is not None:
        training["tokens"] = tokens
    return validate(
        TrainingSpec,
        {
            "kind": "training",
            "model": {"preset": model} if isinstance(model, str) else model,
            "training": training,
            "hardware": {"accelerator": accelerator},
        },
        "inline",
    )


# --- brute-force oracle ---------------------------------------------------------------------

# A few wide layers keep the grid small (pp ranges over 1..6) while weights are large
# enough that some layouts do not fit in 80 GB. kv_heads 4 makes tp 8 illegal;
# seq_len 3000 makes cp 8 illegal (3000 is not a multiple of 16); global batch 48
# rejects dp × microbatch that do not divide it; 6 layers reject pp × vs > 6.
DENSE = {
    "layers": 6,
    "hidden": 8192,
    "heads": 64,
    "kv_heads": 4,
    "ffn_hidden": 28672,
    "ffn_type": "swiglu",
    "vocab": 32000,
}
MOE = {
    "layers": 6,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn_hidden": 14336,
    "ffn_type": "swiglu",
    "vocab": 32000,
    "experts": 4,
    "experts_per_token": 2,
}

# What the search considers, written out: tp up to the 8-GPU NVLink domain of an H100
# system; pp = divisors of 6 and the common pipeline sizes up to 6.
SPACE: dict[str, tuple[int, ...]] = {
    "tp": (1, 2, 4, 8),
    "pp": (1, 2, 3, 4, 5, 6),
    "cp": (1, 2, 4, 8),
    "mb": (1, 2, 4, 8),
    "vs": (1, 2, 4),
    "recompute": (0, 1, 2),
}

Row = tuple[int, int, int, int, int, int, int, int, int, int, int]  # gpus … sp


def first_rule_broken(
    case: TrainingCase, *, n: int, tp: int, pp: int, cp: int, ep: int, mb: int, vs: int, zero: int
) -> str | None:
    """The feasibility rules in the order the search applies them (the first one counts)."""
    arch, seq_len, global_batch = case.arch, case.seq_len, case.global_batch
    if n % (tp * pp * cp):
        return "GPU count not a multiple of tp × pp × cp"
    dp = n // (tp * pp * cp)
    if arch.heads % tp or arch.kv_heads % tp:
        return "tp does not divide the heads"
    if pp > arch.layers:
        return "more pipeline stages than layers"
    if vs > 1 and (pp == 1 or pp * vs > arch.layers):
        return "virtual stages need pp > 1 and at least one layer per virtual stage"
    if seq_len % (2 * cp):
        return "sequence length not divisible by 2 × cp"
    if zero == 3 and pp > 1:
        return "ZeRO-3 with pipeline parallelism"
    if ep > 1 and (dp * cp) % ep:
        return "ep does not divide dp × cp"
    if global_batch % (dp * mb):
        return "global batch not divisible by dp × microbatch"
    return None


def brute_force(
    case: TrainingCase, counts: list[int], eps: tuple[int, ...], zeros: tuple[int, ...]
) -> tuple[set[Row], Counter[str], int]:
    """Every layout, by hand; virtual stages as the case's framework offers them."""
    survivors: set[Row] = set()
    rejected: Counter[str] = Counter()
    grid = 0
    for n, tp, pp, cp, ep, mb, vs, zero, rc in itertools.product(
        counts,
        SPACE["tp"],
        SPACE["pp"],
        SPACE["cp"],
        eps,
        SPACE["mb"],
        case.profile.virtual_stages,
        zeros,
        SPACE["recompute"],
    ):
        grid += 1
        why = first_rule_broken(case, n=n, tp=tp, pp=pp, cp=cp, ep=ep, mb=mb, vs=vs, zero=zero)
        if why is not None:
            rejected[why] += 1
            continue
        dp = n // (tp * pp * cp)
        survivors.add((n, tp, pp, dp, cp, ep, mb, vs, zero, rc, int(tp > 1)))
    return survivors, rejected, grid


def rows(lay: Layouts) -> list[Row]:
    names = ("tp", "pp", "dp", "cp", "ep", "mb", "vs", "zero", "recompute", "sp")
    columns = [lay.gpus, *(getattr(lay, name) for name in names)]
    out: list[Row] = []
    for i in range(lay.tp.size):
        n, tp, pp, dp, cp, ep, mb, vs, zero, rc, sp = (int(c[i]) for c in columns)
        out.append((n, tp, pp, dp, cp, ep, mb, vs, zero, rc, sp))
    return out


ORACLE_CASES = [
    pytest.param(DENSE, "deepspeed", [8, 12, 16], (1,), (0, 1, 2, 3), id="dense-gqa-deepspeed"),
    pytest.param(MOE, "megatron", [8, 16], (1, 2, 4), (0, 1), id="moe-megatron"),
]


@pytest.mark.parametrize(("model", "framework", "counts", "eps", "zeros"), ORACLE_CASES)
def test_search_agrees_with_brute_force(
    model: dict[str, Any],
    framework: str,
    counts: list[int],
    eps: tuple[int, ...],
    zeros: tuple[int, ...],
) -> None:
    spec = make_spec(model, seq_len=3000, global_batch=48, framework=framework)
    case = case_for(spec, Assumptions())
    assert case.hw.scaleup_domain_gpus == 8
    assert tuple(case.profile.zero_stages) == zeros

    expected, expected_rejected, grid = brute_force(case, counts, eps, zeros)
    rejected: Counter[str] = Counter()
    space = candidate_layouts(case, counts, rejected)
    got = rows(space)

    # (a) the same survivors, each once
    assert len(got) == len(set(got))
    assert set(got) == expected
    # (c) every grid point is either a survivor or counted under the first rule it breaks
    assert sum(rejected.values()) + len(got) == grid
    assert rejected == expected_rejected
    assert len(expected_rejected) >= 4  # the rules really bite on this space

    # (b) the fastest layout that fits, per GPU count, one layout at a time
    best: dict[int, float] = {}
    too_big = 0
    for n, tp, pp, dp, cp, ep, mb, vs, zero, rc, sp in expected:
        ev = evaluate(
            case,
            Layouts.single(
                tp=tp,
                pp=pp,
                dp=dp,
                cp=cp,
                ep=ep,
                mb=mb,
                vs=vs,
                zero=zero,
                recompute=RECOMPUTE_NAMES[rc],
                sp=bool(sp),
            ),
        )
        if float(ev.total_bytes[0]) > case.hw.memory_bytes:
            too_big += 1
            continue
        step = float(ev.step_time_s[0])
        best[n] = min(step, best.get(n, float("inf")))
    assert too_big > 0

    result = search_training(spec, [H100], gpu_counts=counts, top_k=100)
    assert result.candidates_evaluated == len(expected)
    assert result.rejected["does not fit in GPU memory"] == too_big
    chosen = {c.gpus: c for c in result.top}
    assert len(chosen) == len(result.top)
    assert set(chosen) == set(best)
    for n, step in best.items():
        assert chosen[n].step_time_s == pytest.approx(step, rel=1e-12), n
        assert chosen[n].memory_bytes <= case.hw.memory_bytes


# --- Pareto front -------------------------------------------------------------------------


def candidate(label: str, time_s: float, cost: float, gpus: int) -> Candidate:
    return Candidate(
        accelerator=label,
        gpus=gpus,
        tp=1,
        pp=1,
        dp=gpus,
        cp=1,
        ep=1,
        microbatch=1,
        virtual_stages=1,
        zero_stage=1,
        recompute="selective",
        sequence_parallel=False,
        step_time_s=1.0,
        tokens_per_s=1.0,
        mfu=0.5,
        memory_bytes=1.0,
        train_time_s=time_s,
        gpu_hours=cost / 2,
        cost_usd=cost,
    )


def test_pareto_front_of_hand_made_points() -> None:
    pool = [
        candidate("a", 10, 100, 8),
        candidate("slower-and-dearer-than-a", 12, 110, 8),
        candidate("b", 5, 120, 16),
        candidate("like-b-with-more-gpus", 5, 120, 32),
        candidate("e", 20, 90, 64),
        candidate("a-again", 10, 100, 8),  # a tie dominates neither way: both stay
    ]
    front = pareto_front(pool)
    assert [c.accelerator for c in front] == ["b", "a", "a-again", "e"]


def objectives(c: Candidate) -> tuple[float, float, float]:
    assert c.train_time_s is not None
    assert c.cost_usd is not None
    return (c.train_time_s, c.cost_usd, float(c.gpus))


def dominates(p: tuple[float, ...], q: tuple[float, ...]) -> bool:
    return all(a <= b for a, b in zip(p, q, strict=True)) and p != q


@pytest.fixture(scope="module")
def two_accelerators() -> SearchResult:
    spec = make_spec("llama-3-8b", seq_len=8192, global_batch=512, tokens="1T")
    return search_training(spec, [H100, A100], gpu_counts=[8, 16, 32, 64, 128], top_k=1000)


def test_pareto_front_is_exactly_the_non_dominated_candidates(
    two_accelerators: SearchResult,
) -> None:
    pool = two_accelerators.top  # top_k covers the whole pool: one per accelerator × count
    assert len(pool) == 10
    front = two_accelerators.pareto
    members = {id(c) for c in front}
    outside = [c for c in pool if id(c) not in members]
    assert front
    assert outside  # both halves of the property are exercised
    assert all(c in pool for c in front)
    for m in front:
        assert not any(dominates(objectives(o), objectives(m)) for o in pool), m
    for o in outside:
        assert any(dominates(objectives(m), objectives(o)) for m in front), o


def test_top_is_sorted_by_time_with_one_layout_per_accelerator_and_count(
    two_accelerators: SearchResult,
) -> None:
    times = [objectives(c)[0] for c in two_accelerators.top]
    assert times == sorted(times)
    keys = [(c.accelerator, c.gpus) for c in two_accelerators.top]
    assert sorted(keys) == sorted({(a, n) for a in (H100, A100) for n in (8, 16, 32, 64, 128)})


# --- constraints --------------------------------------------------------------------------

COUNTS = [8, 16, 32, 64, 128]


@pytest.fixture(scope="module")
def spec_8b() -> TrainingSpec:
    return make_spec("llama-3-8b", seq_len=8192, global_batch=512, tokens="1T")


@pytest.fixture(scope="module")
def unconstrained(spec_8b: TrainingSpec) -> SearchResult:
    return search_training(spec_8b, [H100], gpu_counts=COUNTS, top_k=100)


def test_max_gpus_removes_exactly_the_larger_counts(
    spec_8b: TrainingSpec, unconstrained: SearchResult
) -> None:
    limited = search_training(
        spec_8b, [H100], gpu_counts=COUNTS, constraints=Constraints(max_gpus=32), top_k=100
    )
    assert {c.gpus for c in unconstrained.top} == set(COUNTS)
    assert limited.top
    assert all(c.gpus <= 32 for c in limited.top)
    assert limited.top == [c for c in unconstrained.top if c.gpus <= 32]
    assert all(c.gpus <= 32 for c in limited.pareto)


def test_deadline_keeps_exactly_the_configurations_on_time(
    spec_8b: TrainingSpec, unconstrained: SearchResult
) -> None:
    times = sorted(c.train_time_s for c in unconstrained.top if c.train_time_s is not None)
    assert len(times) == len(COUNTS)
    deadline = (times[1] + times[2]) / 2
    on_time = search_training(
        spec_8b,
        [H100],
        gpu_counts=COUNTS,
        constraints=Constraints(deadline_s=deadline),
        top_k=100,
    )
    # Per GPU count the fastest layout is kept unless it is late, and then all are late.
    assert on_time.top == [
        c for c in unconstrained.top if c.train_time_s is not None and c.train_time_s <= deadline
    ]
    assert len(on_time.top) == 2
    assert on_time.rejected["misses the deadline"] > 0
    assert all(c.train_time_s is not None and c.train_time_s <= deadline for c in on_time.pareto)


def test_impossible_deadline_leaves_nothing_and_says_why(spec_8b: TrainingSpec) -> None:
    result = search_training(
        spec_8b, [H100], gpu_counts=COUNTS, constraints=Constraints(deadline_s=3600), top_k=100
    )
    assert result.candidates_evaluated > 0
    assert result.top == []
    assert result.pareto == []
    assert result.rejected["misses the deadline"] > 0
    fitting = result.candidates_evaluated - result.rejected["does not fit in GPU memory"]
    assert result.rejected["misses the deadline"] == fitting


def test_budget_keeps_exactly_the_configurations_within_it(
    spec_8b: TrainingSpec, unconstrained: SearchResult
) -> None:
    costs = sorted(c.cost_usd for c in unconstrained.top if c.cost_usd is not None)
    assert len(costs) == len(COUNTS)
    budget = (costs[0] + costs[1]) / 2
    within = search_training(
        spec_8b,
        [H100],
        gpu_counts=COUNTS,
        constraints=Constraints(budget_usd=budget),
        top_k=100,
    )
    assert within.top == [
        c for c in unconstrained.top if c.cost_usd is not None and c.cost_usd <= budget
    ]
    assert len(within.top) == 1
    assert within.rejected["over budget"] > 0


def test_without_a_token_budget_the_search_ranks_by_step_time() -> None:
    spec = make_spec("llama-3-8b", seq_len=8192, global_batch=512)
    result = search_training(spec, [H100], gpu_counts=COUNTS, top_k=100)
    assert all(c.train_time_s is None and c.cost_usd is None for c in result.top)
    steps = [c.step_time_s for c in result.top]
    assert steps == sorted(steps)
    assert len(steps) == len(COUNTS)
