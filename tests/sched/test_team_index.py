"""The per-teams lookups every cycle reads (`sched.team_index`), and the shared whole-GPU
placements (`framework.whole_placement`)."""

from __future__ import annotations

import gc

import pytest

from gpufleet.cluster import Whole
from gpufleet.errors import UnknownNameError
from gpufleet.sched import team_index as ti
from gpufleet.sched.framework import Placed, Placement, whole_claims, whole_placed, whole_placement
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

H100 = "h100-sxm5-80gb"


def teams(**team: object) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": [{"name": "high", "value": 1000}, {"name": "low", "value": 10}],
            "teams": [
                {"name": "a", "quota": {H100: 16}, "default_priority": "low", **team},
                {"name": "b", "quota": {H100: 8}, "cohort": "c", "default_priority": "high"},
            ],
        }
    )


def spec(team: str, **kw: object) -> JobSpec:
    return JobSpec.model_validate({"name": "j", "team": team, "gpus": 1, **kw})


def test_the_index_is_built_once_per_teams_object_and_goes_with_it() -> None:
    t = teams()
    first = ti.team_index(t)
    assert ti.team_index(t) is first
    assert ti.team_index(teams()) is not first  # an equal but distinct object: its own index
    key = id(t)
    del t, first
    gc.collect()
    assert key not in ti._INDEXES


def test_quotas_priorities_and_fixed_limits_read_as_the_teams_say() -> None:
    t = teams(quota={H100: 16}, borrowing_limit={H100: 4})
    index = ti.team_index(t)
    assert index.quota("a", H100) == t.teams[0].quota_for(H100)
    assert index.quota("a", "a100-sxm4-80gb") is None
    assert index.quota("nobody", H100) is None
    assert index.max_priority == 1000
    assert index.weights == {"a": 1.0, "b": 1.0}
    assert index.priority(spec("a")) == 10  # the team's default class
    assert index.priority(spec("b")) == 1000
    assert index.priority(spec("a", priority_class="high")) == 1000
    assert index.priority(spec("nobody")) == 0
    # a team without a cohort never borrows: its guarantee, capped; one in a cohort moves
    assert index.fixed_limit(t.teams[0], H100) == (True, 16_000)
    assert index.fixed_limit(t.teams[1], H100) == (False, None)


def test_an_unknown_priority_class_names_the_job_and_suggests() -> None:
    index = ti.team_index(teams())
    with pytest.raises(UnknownNameError, match=r"priority class \(job j\) 'hihg'.*high"):
        index.priority(spec("a", priority_class="hihg"))


def test_shared_whole_gpu_placements_equal_built_ones() -> None:
    p = whole_placement("n1", (0, 1))
    assert p == Placement("n1", (0, 1))
    assert whole_placement("n1", (0, 1)) is p
    assert whole_claims("n1", (0, 1)) == (Whole("n1", (0, 1)),) == p.claims()
    assert whole_placed("n1", (0, 1)) == Placed((p,))
    # a placement built with a list of GPUs still gives its claims
    assert Placement("n1", [2, 3]).claims() == (Whole("n1", (2, 3)),)  # type: ignore[arg-type]
