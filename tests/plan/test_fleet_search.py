"""The size search: bisection against brute force, on predicates and on real simulations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet_search import Bisection, Evaluator, runner, smallest_passing
from gpufleet.plan.fleet_setup import make_variant, prepare_candidate

from .fleet_cases import spec, tiny


@settings(max_examples=300, deadline=None)
@given(
    low=st.integers(1, 40),
    span=st.integers(0, 200),
    threshold_at=st.floats(0, 1.2),
    guess_at=st.floats(0, 1.5),
)
def test_bisection_finds_the_threshold_of_any_monotone_predicate(
    low: int, span: int, threshold_at: float, guess_at: float
) -> None:
    high = low + span
    threshold = low + round(threshold_at * (span + 1))  # may lie above high: nothing passes
    guess = max(1, round(low + guess_at * span))
    calls: list[int] = []

    def passes(n: int) -> bool:
        calls.append(n)
        return n >= threshold

    found = smallest_passing(passes, low, high, guess)
    assert found == (threshold if threshold <= high else None)
    assert len(calls) == len(set(calls)), "a size was evaluated twice"
    # bracketing by ×1.5 / ×2/3 then halving: logarithmic in the range
    assert len(calls) <= 4 * math.ceil(math.log2(span + 2)) + 4


@pytest.mark.parametrize(
    ("bounds", "guess", "passing", "answer", "order"),
    [
        pytest.param((1, 64), 10, 17, 17, [10, 15, 23, 19, 17, 16], id="up-then-halve"),
        pytest.param((1, 64), 40, 17, 17, [40, 26, 17, 11, 14, 15, 16], id="down-then-halve"),
        pytest.param((4, 64), 10, 1, 4, [10, 6, 4], id="floor-passes"),
        pytest.param((1, 20), 10, 99, None, [10, 15, 20], id="nothing-passes"),
    ],
)
def test_bisection_paths(
    bounds: tuple[int, int], guess: int, passing: int, answer: int | None, order: list[int]
) -> None:
    search = Bisection(*bounds, guess)
    while (n := search.next()) is not None:
        search.record(n, n >= passing)
    assert search.answer == answer
    assert search.order == order


def test_bisection_refuses_empty_bounds() -> None:
    with pytest.raises(ValueError, match="bad bounds"):
        Bisection(5, 4, 4)


def test_bisection_agrees_with_a_brute_force_scan_of_simulations() -> None:
    """The tiny case simulated at every size from the floor up: the scan is monotone, and
    the bisection (same seeds, same evaluator) stops at its first passing size."""
    plan = spec(tiny(horizon="36h", warmup="4h"))
    c = prepare_candidate(plan, "h100-sxm5-80gb", [], Assumptions())
    v = make_variant(plan, c, [], profile="default")
    with runner(1) as run:
        ev = Evaluator(plan, run, [0, 1, 2])
        sizes = list(range(c.min_nodes, c.min_nodes + 7))
        ev.evaluate([(v, n) for n in sizes])
        scan = [ev.points[(v.key, n)].passed for n in sizes]
        assert scan == sorted(scan), f"not monotone: {scan}"
        assert any(scan), "the case should have a passing size inside the scan"
        assert not all(scan), "the case should have a failing size inside the scan"
        first = sizes[scan.index(True)]
        search = Bisection(c.min_nodes, sizes[-1], c.min_nodes + 5)
        while (n := search.next()) is not None:
            search.record(n, ev.point(v, n).passed)
    assert search.answer == first


def test_more_nodes_never_hurt_in_the_tiny_case(tmp_path: Path) -> None:
    """Monotonicity sanity: the same work on a larger cluster is spread thinner (allocation
    falls) and waits no longer at the largest size than at the smallest."""
    from gpufleet.plan.fleet import sweep

    result = sweep(spec(tiny(horizon="36h", warmup="4h")), tmp_path, [2, 4, 8], seeds=2)
    alloc = [p.allocation.mean or 0.0 for p in result.points]
    assert alloc == sorted(alloc, reverse=True)
    assert alloc[0] > alloc[-1]
    for team in range(2):
        waits = [p.teams[team].wait_p95_s for p in result.points]
        assert waits[0] is not None
        assert waits[-1] is not None
        assert (waits[-1].mean or 0.0) <= (waits[0].mean or 0.0)
    assert result.simulations == 6
    assert result.cpu_s > 0


def test_a_known_failing_size_still_tries_the_guess_first() -> None:
    """The +arrivals search knows the base answer's size minus one fails; it starts at the
    base answer, not at 1.5 × the failing size."""
    search = Bisection(1, 64, 35, fail=34)
    while (n := search.next()) is not None:
        search.record(n, n >= 39)
    assert search.answer == 39
    assert search.order == [35, 53, 44, 39, 37, 38]
