"""Queue ETAs in the replay alone (`eta.estimate_starts`) and as the snapshot stores them
(`eta_refresh.eta_kind`): a job that can never start as things are is told apart from one
merely beyond the horizon and from one the last refresh has not seen."""

from __future__ import annotations

from gpufleet.control.eta_refresh import NEVER_PREFIX, eta_kind

from .test_eta import HOUR, NOW, eta, make_cluster, pending, running


def test_a_job_no_available_node_can_hold_is_never_not_beyond_the_horizon() -> None:
    """A 2x8 gang on two 8-GPU nodes, one of them down: it never starts, and the replay says
    so; a job that fits the node left starts now."""
    gang = pending("gang", submitted_s=NOW - 20, workers=2, runtime_estimate_s=HOUR)
    small = pending("small", submitted_s=NOW - 10, gpus=4, runtime_estimate_s=HOUR)
    r = eta(make_cluster(2), [], [gang, small], unavailable={"h-1"})
    assert r.start_s == {"gang": None, "small": NOW}
    assert r.never == {"gang"}
    assert eta(make_cluster(2), [], [gang, small]).start_s["gang"] == NOW  # both nodes up


def test_a_job_behind_work_longer_than_the_horizon_is_not_never() -> None:
    r = eta(
        make_cluster(),
        [running("busy", expected_end_s=NOW + 2 * HOUR)],
        [pending("next", runtime_estimate_s=HOUR)],
        horizon_s=HOUR,
    )
    assert r.start_s == {"next": None}
    assert r.never == frozenset()


def test_a_down_node_with_a_job_on_it_frees_nothing_in_the_replay() -> None:
    """A job still running on an unavailable node keeps its GPUs to its end, and the node
    takes nothing after: the next job waits for the other node's job (2 h), not this
    one's (1 h)."""
    cluster = make_cluster(2)
    run = [
        running("on-drained", node="h-1", expected_end_s=NOW + HOUR),
        running("elsewhere", node="h-0", expected_end_s=NOW + 2 * HOUR),
    ]
    r = eta(cluster, run, [pending("next", runtime_estimate_s=HOUR)], unavailable={"h-1"})
    assert r.start_s["next"] == NOW + 2 * HOUR
    r = eta(cluster, run, [pending("next", runtime_estimate_s=HOUR)])
    assert r.start_s["next"] == NOW + HOUR


def test_the_stored_etas_say_which_kind_of_answer_each_job_has() -> None:
    etas: dict[str, float | None] = {"1": NOW, "2": None, "3": None, NEVER_PREFIX + "3": None}
    assert [eta_kind(etas, j) for j in (1, 2, 3, 4)] == ["at", "beyond", "never", "unknown"]
