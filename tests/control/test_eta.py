"""Queue ETAs: a forward simulation of the live queue on the simulator's own engine."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpufleet.cluster import Cluster
from gpufleet.control.eta import EtaResult, RunningJob, estimate_starts
from gpufleet.sched.framework import InvalidPlacementError, Placement
from gpufleet.sim.engine import InitialRun, SimConfig, simulate
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"
HOUR = 3600.0
NOW = 1_700_000_000.0  # a live clock: epoch seconds
CYCLE = 10.0  # the engine's default cycle interval: an ETA is exact within one cycle


def make_cluster(nodes: int = 1, *, leaves: int = 1) -> Cluster:
    """`nodes` 8-GPU H100 nodes spread over `leaves` leaves of one block (h-0, h-1, ...)."""
    topology = {"block": "b1", "leaf": [f"l{i + 1}" for i in range(leaves)]}
    group = {"name": "h", "count": nodes, "accelerator": H100, "topology": topology}
    return Cluster.from_spec(
        ClusterSpec.model_validate({"kind": "cluster", "node_groups": [group]})
    )


def make_teams(quota_gpus: int = 100_000, *names: str) -> TeamsSpec:
    teams = [{"name": n, "quota": {H100: quota_gpus}} for n in names or ("a",)]
    return TeamsSpec.model_validate({"kind": "teams", "teams": teams})


def pending(name: str, submitted_s: float = NOW - 60, **kw: Any) -> JobSpec:
    kw.setdefault("team", "a")
    kw.setdefault("gpus", 8)
    return JobSpec.model_validate({"name": name, "submitted_s": submitted_s, **kw})


def running(
    name: str,
    node: str = "h-0",
    gpus: tuple[int, ...] = tuple(range(8)),
    *,
    started_s: float = NOW - HOUR,
    expected_end_s: float | None = None,
    **kw: Any,
) -> RunningJob:
    kw.setdefault("team", "a")
    kw.setdefault("gpus", len(gpus))
    spec = JobSpec.model_validate(
        {
            "name": name,
            "state": "running",
            "started_s": started_s,
            "submitted_s": started_s,
            "placement": [{"node": node, "gpus": list(gpus)}],
            **kw,
        }
    )
    return RunningJob(spec, H100, started_s, expected_end_s)


def eta(
    cluster: Cluster,
    run: list[RunningJob],
    wait: list[JobSpec],
    teams: TeamsSpec | None = None,
    **kw: Any,
) -> EtaResult:
    return estimate_starts(cluster, teams or make_teams(), run, wait, now_s=NOW, **kw)


def test_an_empty_cluster_starts_a_job_now() -> None:
    r = eta(make_cluster(), [], [pending("j", runtime_estimate_s=HOUR)])
    assert r.start_s == {"j": NOW}
    assert r.assumed_runtime == frozenset()
    assert r.wall_s > 0


def test_a_full_cluster_starts_the_next_job_when_the_running_one_is_expected_to_end() -> None:
    r = eta(
        make_cluster(),
        [running("busy", expected_end_s=NOW + 2 * HOUR)],
        [pending("next", runtime_estimate_s=HOUR)],
    )
    start = r.start_s["next"]
    assert start is not None
    assert NOW + 2 * HOUR <= start <= NOW + 2 * HOUR + CYCLE


def test_fifo_chain_of_whole_node_jobs_follows_the_submission_order_not_the_list_or_names() -> None:
    """Three 1-h, 8-GPU jobs on one 8-GPU node: now, +1 h, +2 h, in submission order."""
    jobs = [
        pending("a-last", submitted_s=NOW - 10, runtime_estimate_s=HOUR),
        pending("c-first", submitted_s=NOW - 30, runtime_estimate_s=HOUR),
        pending("b-second", submitted_s=NOW - 20, runtime_estimate_s=HOUR),
    ]
    r = eta(make_cluster(), [], jobs, profile="fifo")
    assert r.start_s["c-first"] == NOW
    assert r.start_s["b-second"] == pytest.approx(NOW + HOUR, abs=CYCLE)
    assert r.start_s["a-last"] == pytest.approx(NOW + 2 * HOUR, abs=CYCLE)


def test_a_job_that_never_fits_has_no_eta_and_does_not_hold_up_the_rest() -> None:
    jobs = [
        pending("too-big", submitted_s=NOW - 30, gpus=16, runtime_estimate_s=HOUR),
        pending("elsewhere", submitted_s=NOW - 20, accelerators=[A100], runtime_estimate_s=HOUR),
        pending("fits", submitted_s=NOW - 10, gpus=4, runtime_estimate_s=HOUR),
    ]
    r = eta(make_cluster(), [], jobs)
    assert r.start_s == {"too-big": None, "elsewhere": None, "fits": NOW}


def test_the_scheduler_sees_the_jobs_own_spec_a_topology_constraint_included() -> None:
    """A 2-node gang required within one leaf never starts on two leaves of one node each,
    though the GPUs are free: the ETA honours what a trace job could not carry."""
    cluster = make_cluster(2, leaves=2)
    free = pending("free", workers=2, runtime_estimate_s=HOUR)
    tied = pending("tied", workers=2, topology={"required": "leaf"}, runtime_estimate_s=HOUR)
    assert eta(cluster, [], [free]).start_s == {"free": NOW}
    assert eta(cluster, [], [tied]).start_s == {"tied": None}


def test_a_job_beyond_the_horizon_has_no_eta() -> None:
    r = eta(
        make_cluster(),
        [running("busy", expected_end_s=NOW + 2 * HOUR)],
        [pending("next", runtime_estimate_s=HOUR)],
        horizon_s=HOUR,
    )
    assert r.start_s == {"next": None}


def test_unknown_runtimes_are_assumed_and_reported() -> None:
    """A running job with no expected end and no estimate runs the default from now; a
    pending job with no estimate runs the default; both are listed as assumed."""
    r = eta(
        make_cluster(),
        [running("busy")],
        [pending("first", submitted_s=NOW - 20), pending("second", submitted_s=NOW - 10)],
        profile="fifo",
    )
    assert r.assumed_runtime == {"busy", "first", "second"}
    assert r.start_s["first"] == pytest.approx(NOW + HOUR, abs=CYCLE)
    assert r.start_s["second"] == pytest.approx(NOW + 2 * HOUR, abs=CYCLE)
    half = eta(make_cluster(), [running("busy")], [pending("next")], default_runtime_s=HOUR / 2)
    assert half.start_s["next"] == pytest.approx(NOW + HOUR / 2, abs=CYCLE)


def test_a_running_jobs_estimate_counts_from_its_start_and_an_overdue_one_ends_soon() -> None:
    half_done = running("busy", started_s=NOW - HOUR / 2, runtime_estimate_s=HOUR)
    r = eta(make_cluster(), [half_done], [pending("next", runtime_estimate_s=HOUR)])
    assert r.start_s["next"] == pytest.approx(NOW + HOUR / 2, abs=CYCLE)
    assert r.assumed_runtime == frozenset()
    overdue = running("busy", started_s=NOW - 2 * HOUR, runtime_estimate_s=HOUR)
    r = eta(make_cluster(), [overdue], [pending("next", runtime_estimate_s=HOUR)])
    assert r.start_s["next"] == pytest.approx(NOW + 60, abs=CYCLE)


def test_running_jobs_count_against_their_teams_quota() -> None:
    """Team a may hold 8 GPUs and holds them: its next job waits for them though a whole
    node is free; team b's job starts now."""
    teams = make_teams(8, "a", "b")
    r = eta(
        make_cluster(2),
        [running("busy", expected_end_s=NOW + HOUR)],
        [pending("a-next", runtime_estimate_s=HOUR), pending("b-next", team="b", gpus=4)],
        teams,
    )
    assert r.start_s["b-next"] == NOW
    assert r.start_s["a-next"] == pytest.approx(NOW + HOUR, abs=CYCLE)


def test_the_same_queue_gives_the_same_etas() -> None:
    run = [running("busy", expected_end_s=NOW + 900, gpus=(0, 1, 2, 3))]
    wait = [
        pending(
            f"j{i}", submitted_s=NOW - 100 + i, gpus=1 + i % 8, runtime_estimate_s=600 * (1 + i)
        )
        for i in range(20)
    ]
    first, second = eta(make_cluster(2), run, wait), eta(make_cluster(2), run, wait)
    assert dict(first.start_s) == dict(second.start_s)
    assert first.assumed_runtime == second.assumed_runtime


def test_a_running_multi_worker_job_under_a_pod_by_pod_profile() -> None:
    """k8s-default binds pods one by one; a running gang is still held as one unit."""
    gang = RunningJob(
        JobSpec.model_validate(
            {
                "name": "gang",
                "team": "a",
                "gpus": 8,
                "workers": 2,
                "state": "running",
                "started_s": NOW - 60,
                "placement": [
                    {"node": "h-0", "gpus": list(range(8))},
                    {"node": "h-1", "gpus": list(range(8))},
                ],
            }
        ),
        H100,
        NOW - 60,
        NOW + HOUR,
    )
    r = eta(make_cluster(2), [gang], [pending("next", workers=2)], profile="k8s-default")
    assert r.start_s["next"] == pytest.approx(NOW + HOUR, abs=CYCLE)


def test_invalid_running_placements_are_refused() -> None:
    twice = [running("one", expected_end_s=NOW + HOUR), running("two", expected_end_s=NOW + HOUR)]
    with pytest.raises(InvalidPlacementError, match="two"):
        eta(make_cluster(), twice, [])
    with pytest.raises(InvalidPlacementError, match="nowhere"):
        eta(make_cluster(), [running("lost", node="nowhere")], [])


def test_repeated_names_are_refused() -> None:
    with pytest.raises(ValueError, match="j"):
        eta(make_cluster(2), [running("j", expected_end_s=NOW + HOUR)], [pending("j")])


# -- the engine's live start, directly ------------------------------------------------------


def _trace(name: str, submit_s: float, duration_s: float) -> TraceJob:
    return TraceJob(name, "a", submit_s=submit_s, duration_s=duration_s, gpus=8)


def test_the_engine_starts_from_a_live_state_at_a_later_clock() -> None:
    """An initial run holds its GPUs from the start until its remaining time is up; its
    first start is its real start; a job arriving then waits for it."""
    cluster = make_cluster()
    initial = InitialRun(
        _trace("busy", NOW - HOUR, 2 * HOUR),
        (Placement("h-0", gpus=tuple(range(8))),),
        H100,
        started_s=NOW - HOUR,
        remaining_s=HOUR,
    )
    w = Workload((_trace("next", NOW, HOUR),), CleaningReport("test", 1, 1))
    r = simulate(cluster, make_teams(), w, SimConfig(), initial=[initial], start_s=NOW)
    assert dict(r.first_start_s) == {"busy": NOW - HOUR, "next": NOW + HOUR}
    assert r.metrics.jobs_completed == 2
    assert r.metrics.gpu_allocation_ratio == pytest.approx(1.0)  # full for the 2 h it ran
    assert r.metrics.duration_s == pytest.approx(2 * HOUR)


def test_the_engine_refuses_arrivals_before_its_start() -> None:
    w = Workload((_trace("early", NOW - 1, HOUR),), CleaningReport("test", 1, 1))
    with pytest.raises(ValueError, match="before the start"):
        simulate(make_cluster(), make_teams(), w, SimConfig(), start_s=NOW)


@pytest.mark.slow
def test_two_thousand_pending_jobs_on_a_thousand_nodes_take_seconds_not_minutes() -> None:
    """Not a benchmark: a guard that a large live queue stays interactive (< 10 s)."""
    cluster = make_cluster(1000, leaves=50)
    run = [
        running(
            f"r{i}",
            node=f"h-{i}",
            started_s=NOW - 600 * (i % 7),
            expected_end_s=NOW + 300 * (1 + i % 40),
        )
        for i in range(800)
    ]
    sizes = (1, 2, 4, 8, 8, 8)
    wait = [
        pending(
            f"p{i}",
            submitted_s=NOW - 2000 + i,
            gpus=sizes[i % len(sizes)],
            workers=2 if i % 25 == 0 else 1,
            runtime_estimate_s=None if i % 10 == 0 else 600.0 * (1 + i % 24),
            team=("a", "b", "c", "d")[i % 4],
        )
        for i in range(2000)
    ]
    t0 = time.perf_counter()
    r = eta(cluster, run, wait, make_teams(100_000, "a", "b", "c", "d"))
    elapsed_s = time.perf_counter() - t0
    assert elapsed_s < 10.0
    assert all(start is not None for start in r.start_s.values())
    assert len(r.assumed_runtime) == 200
