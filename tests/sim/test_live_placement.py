"""A live start's running jobs hold what they ask for (`sched.held_as_asked`).

A running 3g.40gb job listed on a 1g.10gb slice, on a whole GPU or on a slice id of a GPU
without MIG, or a 0.25-GPU job on a whole GPU or a 0.5 share, was accepted: the run
charged and counted its placement while its request said otherwise, and with the debug
checks on it ended in a `ConservationError` traceback. Each is now a user error naming the
job, what it asks, what it holds and what to list, raised before anything is allocated;
the placements the scheduler itself would give still load and run (and conserve).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpufleet.cluster import Cluster, Node
from gpufleet.errors import UserError
from gpufleet.sched.framework import InvalidPlacementError, Placement
from gpufleet.sim.conservation import check
from gpufleet.sim.engine import InitialRun, SimConfig, Simulation, simulate
from gpufleet.sim.setup import open_teams
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload

A100 = "a100-sxm4-80gb"
NOW = 10_000.0
HOUR = 3600.0
BALANCED = (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))
S3 = "mig-0/gpu0/mig:3g.40gb#0"
S1 = "mig-0/gpu0/mig:1g.10gb#0"


def _cluster() -> Cluster:
    """A node of whole GPUs, one that shares GPUs by fraction, one cut into MIG slices."""
    return Cluster(
        ("node",),
        (
            Node("whole-0", A100, 8),
            Node("share-0", A100, 8, fractions=True),
            Node("mig-0", A100, 8, mig=(BALANCED,) * 8),
        ),
    )


def _initial(ask: Mapping[str, Any], *placements: Placement) -> InitialRun:
    trace = TraceJob("r", "t", NOW - HOUR, 2 * HOUR, **ask)
    return InitialRun(trace, placements, A100, started_s=NOW - HOUR, remaining_s=HOUR)


def _simulation(initial: InitialRun, profile: str = "default") -> Simulation:
    cluster = _cluster()
    later = Workload((TraceJob("p", "t", NOW + 60.0, HOUR, gpus=1),), CleaningReport("t", 1, 1))
    teams = open_teams(cluster, later)
    return Simulation(
        cluster, teams, later, SimConfig(profile=profile), initial=[initial], start_s=NOW
    )


MIG: Mapping[str, Any] = {"mig_profile": "3g.40gb"}
QUARTER: Mapping[str, Any] = {"gpu_fraction": 0.25}
PROFILE_FIX = "list exactly one 3g.40gb slice of a MIG-enabled GPU"
SHARE_FIX = "list exactly one GPU of a node that shares GPUs, with fraction 0.25"


@pytest.mark.parametrize(
    ("ask", "placement", "holds", "fix"),
    [
        (MIG, Placement("mig-0", mig_slices=(S1,)), f"slice {S1}, a 1g.10gb slice", PROFILE_FIX),
        (MIG, Placement("whole-0", gpus=(0,)), "whole GPU whole-0/gpu0", PROFILE_FIX),
        (
            MIG,
            Placement("whole-0", mig_slices=("whole-0/gpu0/mig:3g.40gb#0",)),
            "but whole-0/gpu0 is not MIG-enabled",
            PROFILE_FIX,
        ),
        (
            MIG,
            Placement("mig-0", mig_slices=(S3, "mig-0/gpu1/mig:3g.40gb#0")),
            f"slice {S3} and slice mig-0/gpu1/mig:3g.40gb#0",
            PROFILE_FIX,
        ),
        (QUARTER, Placement("share-0", gpus=(0,)), "whole GPU share-0/gpu0", SHARE_FIX),
        (QUARTER, Placement("share-0", gpu=0, milli=500), "0.5 of share-0/gpu0", SHARE_FIX),
        (QUARTER, Placement("mig-0", mig_slices=(S1,)), f"slice {S1}", SHARE_FIX),
        (
            {"gpu_fraction": 0.3},
            Placement("share-0", gpu=0, milli=300),
            "0.3 of share-0/gpu0; the job asks 0.3 of a GPU, placed in eighths as 0.375",
            "with fraction 0.375",
        ),
        (
            {"gpus": 8},
            Placement("whole-0", gpus=(0, 1, 2, 3)),
            "4 whole GPUs on whole-0 (0, 1, 2, 3); the job asks 8 x 1 = 8 whole GPUs",
            "list exactly its GPUs",
        ),
    ],
    ids=[
        "slice of another profile",
        "slice job on a whole GPU",
        "slice id on a GPU without MIG",
        "two slices",
        "share job on a whole GPU",
        "share of another size",
        "share job on a slice",
        "share not in eighths",
        "whole GPUs short of the request",
    ],
)
def test_a_running_job_holding_other_than_its_request_is_a_user_error(
    ask: Mapping[str, Any], placement: Placement, holds: str, fix: str
) -> None:
    with pytest.raises(InvalidPlacementError) as caught:
        _simulation(_initial(ask, placement))
    message = str(caught.value)
    assert message.startswith("initial run r: the placement holds ")
    assert holds in message
    assert fix in message
    assert isinstance(caught.value, UserError)  # the CLI's exit 2, nothing written


def test_a_worker_split_over_two_nodes_is_a_user_error() -> None:
    """As a job spec says it: a 4-GPU worker's GPUs are on one node."""
    split = _initial(
        {"gpus": 4}, Placement("whole-0", gpus=(0, 1)), Placement("share-0", gpus=(0, 1))
    )
    with pytest.raises(InvalidPlacementError, match="node whole-0 holds 2 of its GPUs"):
        _simulation(split)


@pytest.mark.parametrize(
    ("ask", "placement"),
    [
        (MIG, Placement("mig-0", mig_slices=(S3,))),
        (QUARTER, Placement("share-0", gpu=0, milli=250)),
    ],
    ids=["slice", "share"],
)
def test_under_a_whole_gpu_profile_a_slice_or_share_job_holds_one_whole_gpu(
    ask: Mapping[str, Any], placement: Placement
) -> None:
    """k8s-default runs slices and fractions on one whole GPU: a running one listed on its
    slice or share is not what that profile gives it."""
    with pytest.raises(InvalidPlacementError) as caught:
        _simulation(_initial(ask, placement), profile="k8s-default")
    message = str(caught.value)
    assert "which profile k8s-default (whole GPUs only) runs on one whole GPU" in message
    assert message.endswith("list exactly one whole GPU")


@pytest.mark.parametrize(
    ("profile", "ask", "placement", "held"),
    [
        ("default", MIG, Placement("mig-0", mig_slices=(S3,)), 0.429),
        ("default", QUARTER, Placement("share-0", gpu=0, milli=250), 0.25),
        ("default", {"gpu_fraction": 0.3}, Placement("share-0", gpu=0, milli=375), 0.375),
        ("k8s-default", MIG, Placement("whole-0", gpus=(0,)), 1.0),
        ("k8s-default", QUARTER, Placement("share-0", gpus=(3,)), 1.0),
    ],
    ids=["slice", "share", "share in eighths", "slice on a whole GPU", "share on a whole GPU"],
)
def test_running_slice_and_share_jobs_placed_as_the_profile_places_them_run(
    profile: str, ask: Mapping[str, Any], placement: Placement, held: float
) -> None:
    result = _simulation(_initial(ask, placement), profile=profile).run()
    assert check(result) == []
    record = next(j for j in result.metrics.jobs if j.name == "r")
    assert record.gpus == pytest.approx(held, abs=1e-3)
    assert record.end_s == pytest.approx(NOW + HOUR)


def test_a_refused_start_allocates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check runs before any running job is placed: a valid one listed first is not
    allocated in a half-built run."""

    def placed(self: Simulation, r: InitialRun) -> None:
        raise AssertionError(f"{r.trace.name} was placed before the placements were checked")

    monkeypatch.setattr(Simulation, "_place_initial", placed)
    good = InitialRun(
        TraceJob("g", "t", NOW - HOUR, 2 * HOUR, gpus=8),
        (Placement("whole-0", gpus=tuple(range(8))),),
        A100,
        started_s=NOW - HOUR,
        remaining_s=HOUR,
    )
    bad = _initial(QUARTER, Placement("share-0", gpus=(0,)))
    cluster = _cluster()
    later = Workload((), CleaningReport("t", 0, 0))
    teams = open_teams(cluster, later, extra_teams=["t"])
    with pytest.raises(InvalidPlacementError, match="initial run r"):
        simulate(cluster, teams, later, SimConfig(), initial=[good, bad], start_s=NOW)
