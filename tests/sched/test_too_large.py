"""A whole-GPU gang the cluster could never hold, even empty, "cannot run" (`sched.too_large`):
it does not wait for room, weigh quota, evict, or take the EASY reservation that the job
behind it needs."""

from __future__ import annotations

from gpufleet.sched.decide import decide
from gpufleet.sched.waits import TooLarge

from .scenarios import H100, PLENTY, cluster, job, leaves, running

HOUR = 3600.0


def _busy_first_node(**kw: object) -> list:
    return [running("a", "h-0", list(range(8)), started_s=0.0, runtime_estimate_s=HOUR, **kw)]


def test_a_gang_larger_than_the_cluster_cannot_run_and_leaves_the_reservation() -> None:
    """Two 8-GPU nodes, one busy for an hour: `c` (3 x 8) never fits, `b` (2 x 8) fits in an
    hour. With `c` first in line, `b` still gets the reservation (c took it and said the
    running jobs had no estimates), and `c` is not counted as a job ahead of it."""
    c, state = cluster(*leaves(2))
    pending = [
        job("c", gpus=8, workers=3, submitted_s=0.0),
        job("b", gpus=8, workers=2, submitted_s=10.0),
    ]
    d = decide(c, state, _busy_first_node(), pending, PLENTY, profile="default", now_s=60.0)
    assert d.pending_reasons["c"] == (
        "cannot run: 3 workers of 8 h100-sxm5-80gb GPUs, but this cluster's h100-sxm5-80gb "
        "nodes hold at most 2 such workers (each worker on one node)"
    )
    assert d.reserved_start_s == {"b": HOUR}
    assert d.pending_reasons["b"].startswith("waiting: room for 1 of 2 workers")
    assert "ahead of you" not in d.pending_reasons["b"]  # c is in no one's way


def test_a_gang_that_fits_the_cluster_waits() -> None:
    c, state = cluster(*leaves(2))
    d = decide(
        c,
        state,
        _busy_first_node(),
        [job("b", gpus=8, workers=2, submitted_s=10.0)],
        PLENTY,
        now_s=60.0,
    )
    assert "cannot run" not in d.pending_reasons["b"]


def test_workers_larger_than_any_node() -> None:
    c, state = cluster(*leaves(4))
    d = decide(c, state, [], [job("w", gpus=16)], PLENTY)
    (why,) = d.pending_reasons.waits("w")
    assert why == TooLarge(H100, 1, 16, 0)


def test_a_required_level_bounds_the_gang_by_its_largest_group() -> None:
    """Leaves of 2 and 3 nodes: 4 workers in one leaf never fit, 3 do (now, on the empty
    cluster)."""
    c, state = cluster(*leaves(2, 3))
    pending = [
        job("four", gpus=8, workers=4, topology={"required": "leaf"}),
        job("three", gpus=8, workers=3, topology={"required": "leaf"}),
    ]
    d = decide(c, state, [], pending, PLENTY)
    assert "three" in d.admitted
    assert d.pending_reasons["four"] == (
        "cannot run: 4 workers of 8 h100-sxm5-80gb GPUs, but no leaf of this cluster holds "
        "more than 3 (each worker on one node)"
    )


def test_spot_nodes_count_only_for_jobs_that_may_use_them() -> None:
    c, state = cluster(*leaves(1), *leaves(1, capacity="spot", group="s"))
    pending = [
        job("firm", gpus=8, workers=2, allow_spot=False),
        job("flex", gpus=8, workers=2, allow_spot=True),
    ]
    d = decide(c, state, [], pending, PLENTY)
    assert "flex" in d.admitted
    assert d.pending_reasons["firm"].startswith("cannot run: 2 workers of 8")
    assert d.pending_reasons["firm"].endswith("(this job may not run on spot)")


def test_another_accelerator_the_job_accepts_makes_it_wait_not_cannot_run() -> None:
    """The part that can never run goes after the wait (`reasons._distinct`), and a job that
    cannot run anywhere has no place in line."""
    c, state = cluster(*leaves(1), *leaves(2, acc="a100-sxm4-80gb", group="a"))
    held = [running("r", "a-0", list(range(8)), started_s=0.0, runtime_estimate_s=HOUR)]
    pending = [job("x", gpus=8, workers=2), job("y", gpus=8, workers=2, accelerators=[H100])]
    d = decide(c, state, held, pending, PLENTY, now_s=60.0)
    assert d.pending_reasons["x"].startswith("waiting: room for 1 of 2 workers of 8 a100")
    assert "h100-sxm5-80gb nodes hold at most 1 such workers" in d.pending_reasons["x"]
    assert d.pending_reasons["y"].startswith("cannot run: ")
    assert "ahead of you" not in d.pending_reasons["y"]
