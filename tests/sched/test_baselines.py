"""Baseline profiles for the simulator's comparisons (design 0009, "Baseline profiles"):
k8s-default, kueue-like, slurm-like (with the multifactor queue order) and fgd-paper."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.sched.decide import decide
from gpufleet.sched.framework import OrderContext
from gpufleet.sched.orders import DAY_S, Factors, Multifactor, job_gpus
from gpufleet.sched.registry import QUEUE_ORDERS, resolve
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES, Profile

from .scenarios import H100, PLENTY, cluster, job, leaves, running, team, teams

HOUR = 3600.0
NOW = 2 * HOUR
ALL8 = list(range(8))
BASELINES = ("k8s-default", "kueue-like", "slurm-like", "fgd-paper", "tiresias", "fgd")


def ran(name: str, node: str, gpus: list[int], **kw: Any) -> JobSpec:
    """A running job started at 0 with a runtime estimate (default 3 h: ends at 3 h)."""
    kw.setdefault("started_s", 0.0)
    kw.setdefault("runtime_estimate_s", 3 * HOUR)
    return running(name, node, gpus, **kw)


# -- the profiles themselves ----------------------------------------------------------------


@pytest.mark.parametrize("name", BASELINES)
def test_baseline_profiles_resolve(name: str) -> None:
    resolved = resolve(name)
    assert resolved.queue_order.name == PROFILES[name].queue_order
    assert resolved.placement.name == PROFILES[name].placement


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("k8s-default", ("priority", "spread", ("priority",), "best-effort", False)),
        (
            "kueue-like",
            ("priority", "spread", ("quota-reclaim", "priority"), "best-effort", True),
        ),
        ("slurm-like", ("multifactor", "topology-best-fit", ("priority",), "backfill", False)),
        ("fgd-paper", ("fifo", "fgd", (), "best-effort", False)),
    ],
)
def test_baseline_plugin_choices(name: str, expected: tuple[object, ...]) -> None:
    p = PROFILES[name]
    got = (p.queue_order, p.placement, p.preemption, p.head_of_line, p.guaranteed_first)
    assert got == expected


def test_every_profile_says_what_it_does() -> None:
    for name, profile in PROFILES.items():
        assert profile.description.strip(), name


def test_gang_and_whole_gpus_defaults_keep_existing_profiles_unchanged() -> None:
    plain = Profile("fifo", "spread")
    assert plain.gang is True
    assert plain.whole_gpus_only is False
    k8s = PROFILES["k8s-default"]
    assert (k8s.gang, k8s.whole_gpus_only) == (False, True)
    for name, profile in PROFILES.items():
        if name != "k8s-default":
            assert (profile.gang, profile.whole_gpus_only) == (True, False), name


def test_multifactor_is_registered() -> None:
    assert isinstance(QUEUE_ORDERS["multifactor"], Multifactor)


# -- the multifactor factors ----------------------------------------------------------------


def ctx(
    priority: dict[str, int] | None = None,
    now_s: float = 0.0,
    shares: dict[str, float] | None = None,
    **kw: Any,
) -> OrderContext:
    got = shares or {}
    return OrderContext(priority or {}, now_s, lambda t: got.get(t, 0.0), **kw)


def test_factors_follow_slurms_formula() -> None:
    mf = Multifactor()
    j = job("j", gpus=4, submitted_s=0.0)
    c = ctx({"j": 500}, now_s=3.5 * DAY_S, shares={"research": 1.0})
    f = mf.factors(j, c, cluster_gpus=16, top_priority=1000)
    assert f == Factors(age=0.5, fairshare=0.5, job_size=0.25, qos=0.5)
    assert mf.score(f) == pytest.approx(1000 * 0.5 + 10000 * 0.5 + 1000 * 0.25 + 10000 * 0.5)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_orders_scorer_equals_the_score_of_the_factors(data: st.DataObject) -> None:
    """`order` scores with `scorer` (written out for speed): the same float as `score`
    of `factors`, bit for bit, or the order would differ from the one explained."""
    mf = Multifactor(max_age_s=data.draw(st.sampled_from((0.0, 3600.0, 7 * DAY_S))))
    gpus = data.draw(st.sampled_from((None, 1, 3, 8)))
    size = {"gpus": gpus} if gpus else {"gpu_fraction": data.draw(st.sampled_from((0.25, 0.5)))}
    j = job("j", submitted_s=data.draw(st.floats(0, 40 * DAY_S)), **size)
    share = data.draw(st.floats(-1, 5))
    c = ctx(
        {"j": data.draw(st.integers(-10, 2000))},
        now_s=data.draw(st.floats(0, 40 * DAY_S)),
        shares={j.team: share},
    )
    cluster_gpus = data.draw(st.sampled_from((0.0, 7.0, 16.0)))
    top = data.draw(st.sampled_from((0, 100, 1000)))
    want = mf.score(mf.factors(j, c, cluster_gpus=cluster_gpus, top_priority=top))
    got = mf.scorer(c, cluster_gpus=cluster_gpus, top_priority=top, shares={j.team: share})(j)
    assert got == want


def test_age_factor_saturates_at_max_age() -> None:
    mf = Multifactor()
    c = ctx(now_s=30 * DAY_S)
    f = mf.factors(job("j", gpus=1), c, cluster_gpus=8, top_priority=0)
    assert f.age == 1.0
    assert f.qos == 0.0  # no class values: no QOS factor


def test_job_size_counts_fractions_and_not_slices() -> None:
    assert job_gpus(job("g", gpus=8, workers=2)) == 16
    assert job_gpus(job("f", gpu_fraction=0.25)) == 0.25
    assert job_gpus(job("m", mig_profile="1g.10gb")) == 0.0


def test_past_max_age_the_bigger_younger_job_goes_first() -> None:
    """Both have the full age factor: age no longer separates them, size does."""
    jobs = [job("old-small", gpus=1, submitted_s=0.0), job("young-big", gpus=8, submitted_s=DAY_S)]
    c = ctx(now_s=20 * DAY_S, cluster_gpus=16)
    assert [j.name for j in Multifactor().order(jobs, c)] == ["young-big", "old-small"]


def test_cluster_size_and_top_class_fall_back_to_the_queue() -> None:
    """Unknown cluster size: the biggest queued job has size factor 1; unknown top class:
    the highest queued class has QOS factor 1."""
    mf = Multifactor()
    jobs = [job("a", gpus=2), job("b", gpus=8)]
    c = ctx({"a": 100, "b": 400})
    order = list(mf.order(jobs, c))
    assert [j.name for j in order] == ["b", "a"]
    f = mf.factors(jobs[1], c, cluster_gpus=8, top_priority=400)
    assert (f.job_size, f.qos) == (1.0, 1.0)


def test_shares_are_read_once_per_order() -> None:
    """Slurm recomputes priorities periodically, not between two starts of one pass."""
    calls: list[str] = []

    def share(team: str) -> float:
        calls.append(team)
        return 0.0

    jobs = [job(f"j{i}", gpus=1, team="research" if i % 2 else "prod") for i in range(6)]
    list(Multifactor().order(jobs, OrderContext({}, 0.0, share)))
    assert sorted(calls) == ["prod", "research"]


# -- multifactor ordering through decide() ---------------------------------------------------


def admitted(profile: str, nodes: int, pending: list[JobSpec], **kw: Any) -> list[str]:
    c, state = cluster(*leaves(nodes))
    d = decide(
        c,
        state,
        kw.pop("running", []),
        pending,
        kw.pop("teams", PLENTY),
        profile=profile,
        now_s=NOW,
        **kw,
    )
    return sorted(d.admitted)


def test_multifactor_older_job_beats_newer_equal_job() -> None:
    pending = [job("a-newer", gpus=8, submitted_s=HOUR), job("b-older", gpus=8, submitted_s=0)]
    assert admitted("slurm-like", 1, pending) == ["b-older"]


def test_multifactor_team_with_lower_share_beats_heavier_one() -> None:
    """research already holds half the cluster: prod's later job goes first."""
    pending = [
        job("research-next", gpus=8, team="research", submitted_s=0),
        job("prod-next", gpus=8, team="prod", submitted_s=HOUR),
    ]
    held = [running("r", "h-0", ALL8, team="research", started_s=0.0)]
    assert admitted("slurm-like", 2, pending, running=held) == ["prod-next"]
    assert admitted("fifo", 2, pending, running=held) == ["research-next"]  # the control


def test_multifactor_favours_the_bigger_job_when_ages_are_equal() -> None:
    pending = [job("a-small", gpus=4, submitted_s=0), job("b-big", gpus=8, submitted_s=0)]
    assert admitted("slurm-like", 1, pending) == ["b-big"]
    assert admitted("fifo", 1, pending) == ["a-small"]  # the control


def test_multifactor_higher_qos_first() -> None:
    pending = [
        job("standard", gpus=8, submitted_s=0),
        job("urgent", gpus=8, submitted_s=HOUR, priority_class="production"),
    ]
    assert admitted("slurm-like", 1, pending) == ["urgent"]


# -- placement and head of line -------------------------------------------------------------


@pytest.mark.parametrize(("profile", "node"), [("kueue-like", "h-1"), ("k8s-default", "h-1")])
def test_kubernetes_baselines_spread_least_allocated(profile: str, node: str) -> None:
    c, state = cluster(*leaves(2))
    held = [ran("r", "h-0", [0, 1, 2, 3])]
    d = decide(c, state, held, [job("small", gpus=2)], PLENTY, profile=profile, now_s=NOW)
    assert [p.node for p in d.admitted["small"]] == [node]


def test_topology_best_fit_packs_the_same_job() -> None:
    """The control for the spreading test: slurm-like packs next to the running job."""
    c, state = cluster(*leaves(2))
    held = [ran("r", "h-0", [0, 1, 2, 3])]
    d = decide(c, state, held, [job("small", gpus=2)], PLENTY, profile="slurm-like", now_s=NOW)
    assert [p.node for p in d.admitted["small"]] == ["h-0"]


BLOCKED_GANG = [
    job("big", gpus=8, workers=2, submitted_s=1),
    job("long", gpus=4, submitted_s=2, runtime_estimate_s=10 * HOUR),
]


@pytest.mark.parametrize("profile", ["kueue-like", "k8s-default", "fgd-paper"])
def test_best_effort_baselines_never_reserve(profile: str) -> None:
    c, state = cluster(*leaves(2))
    held = [ran("r", "h-0", [0, 1, 2, 3])]
    d = decide(c, state, held, BLOCKED_GANG, PLENTY, profile=profile, now_s=NOW)
    assert not d.reserved
    assert list(d.admitted) == ["long"]  # the small job takes the room the gang waits for


def test_slurm_like_reserves_for_the_blocked_gang() -> None:
    """EASY backfill: the gang gets the reservation, the long job may not delay it."""
    c, state = cluster(*leaves(2))
    held = [ran("r", "h-0", [0, 1, 2, 3])]
    d = decide(c, state, held, BLOCKED_GANG, PLENTY, profile="slurm-like", now_s=NOW)
    assert sorted(p.node for p in d.reserved["big"]) == ["h-0", "h-1"]
    assert d.reserved_start_s["big"] == 3 * HOUR
    assert not d.admitted
    assert "reservation for job 'big'" in d.pending_reasons["long"]


def test_kueue_like_reclaims_a_guarantee_within_the_cohort() -> None:
    c, state = cluster(*leaves(2))
    cohort = teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml"))
    held = [ran("p0", "h-0", ALL8, team="prod"), ran("p1", "h-1", ALL8, team="prod")]
    pending = [job("mine", gpus=8, team="research")]
    d = decide(c, state, held, pending, cohort, profile="kueue-like", now_s=NOW)
    assert list(d.admitted) == ["mine"]
    assert len(d.preempted) == 1


def test_fgd_paper_and_k8s_default_never_preempt_by_quota() -> None:
    """fgd-paper never evicts; k8s-default only by priority, so a reclaim does not happen."""
    c, state = cluster(*leaves(2))
    cohort = teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml"))
    held = [ran("p0", "h-0", ALL8, team="prod"), ran("p1", "h-1", ALL8, team="prod")]
    pending = [job("mine", gpus=8, team="research")]
    for profile in ("fgd-paper", "k8s-default"):
        d = decide(c, state, held, pending, cohort, profile=profile, now_s=NOW)
        assert not d.admitted, profile
        assert not d.preempted, profile
