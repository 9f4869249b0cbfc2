"""Priority preemption within a team's own quota (issue 24): a job beyond its team's quota
evicts the team's own lower-priority jobs (past the minimum runtime) when the profile
preempts by priority, and the Kueue export of each profile says the same."""

from __future__ import annotations

import pytest

from export.scenarios import SCENARIOS
from gpufleet.export.kueue import preemption
from gpufleet.sched.decide import decide
from gpufleet.sched.preempt import MIN_RUNTIME_S
from gpufleet.specs.profiles import PROFILES

from .scenarios import H100, cluster, job, leaves, running, team, teams

NOW_S = 10_000.0


def _decided(profile: str, ran_s: float, cls: str = "opportunistic") -> dict[str, str]:
    c, state = cluster(*leaves(1))
    quota = teams(team("research", {H100: 8}))
    low = running(
        "low", "h-0", list(range(8)), team="research", priority_class=cls, started_s=NOW_S - ran_s
    )
    high = job("high", gpus=8, team="research", priority_class="production", submitted_s=NOW_S)
    d = decide(c, state.snapshot(), [low], [high], quota, profile=profile, now_s=NOW_S)
    assert ("high" in d.admitted) == bool(d.preempted)
    return {name: e.text() for name, e in d.preempted.items()}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_live_and_kueue_export_agree_on_preemption_within_a_team(profile: str) -> None:
    live = bool(_decided(profile, ran_s=900.0))
    scenario = SCENARIOS["h100-no-mig"]
    fleet = type(scenario)(scenario.cluster, scenario.teams, profile=profile).fleet()
    exported = preemption(fleet, [])["withinClusterQueue"] == "LowerPriority"
    assert live == exported, (profile, live, exported)


def test_the_minimum_runtime_and_non_preemptible_classes_protect_a_team_s_own_jobs() -> None:
    assert _decided("default", ran_s=900.0) == {
        "low": "preempted by job 'high' (priority 1000 > 100): frees 8 h100-sxm5-80gb GPUs; "
        "lost work 2 GPU-h since start; grace period 120 s"
    }
    assert _decided("default", ran_s=MIN_RUNTIME_S - 1) == {}
    assert _decided("default", ran_s=900.0, cls="production") == {}  # not preemptible


def test_only_the_team_s_own_jobs_yield_to_its_quota() -> None:
    """Another team's lower-priority job does not make room in this team's quota."""
    c, state = cluster(*leaves(2))
    quota = teams(team("research", {H100: 8}), team("prod", {H100: 8}))
    own = running("own", "h-0", list(range(8)), team="research", priority_class="standard",
                  started_s=0.0)  # fmt: skip
    other = running("other", "h-1", list(range(8)), team="prod", priority_class="opportunistic",
                    started_s=0.0)  # fmt: skip
    high = job("high", gpus=8, team="research", priority_class="production", submitted_s=NOW_S)
    d = decide(c, state.snapshot(), [own, other], [high], quota, profile="default", now_s=NOW_S)
    assert set(d.preempted) == {"own"}


def test_the_fast_lowest_evictable_agrees_with_the_ranked_list() -> None:
    """`PreemptContext.lowest_evictable` writes `_evictable`'s rule out for speed."""
    from gpufleet.sched.preempt import PreemptContext

    quota = teams(
        team("research", {H100: 8}), team("prod", {H100: 8}, default_priority="opportunistic")
    )
    running_jobs = [
        running("a", "h-0", [0], team="research", priority_class="standard"),
        running("b", "h-0", [1], team="research", priority_class="opportunistic"),
        running("c", "h-0", [2], team="research", priority_class="production"),
        running("d", "h-0", [3], team="prod"),  # the team's default class
        running("e", "h-0", [4], team="prod", priority_class="standard", preemptible=False),
        running("f", "h-0", [5], team="ghost", priority_class="standard"),  # no such team
    ]
    ctx = PreemptContext(running_jobs, {}, quota, lambda _: {}, None, NOW_S)  # type: ignore[arg-type]
    ranked: dict[str, int] = {}
    for j, cls in ctx.evictable_by_priority[1]:
        ranked.setdefault(j.team, cls.value)
    assert ctx.lowest_evictable == ranked == {"research": 100, "prod": 100, "ghost": 500}
