"""decide() policies beyond placement: EASY backfill, quota reclaim, strict FIFO, fair share,
Tiresias, guaranteed-first, MIG re-layout proposals — scenario tables with narrative ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpufleet.cluster import Node, Whole
from gpufleet.sched.apply import apply
from gpufleet.sched.decide import decide
from gpufleet.sched.fairshare import DecayedUsage
from gpufleet.sched.framework import Placement
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

from .scenarios import A100, H100, PLENTY, cluster, job, leaves, running, team, teams

ALL8 = list(range(8))
HOUR = 3600.0
NOW = 2 * HOUR


def ran(name: str, node: str, gpus: list[int], **kw: Any) -> JobSpec:
    """A running job started at 0 with a runtime estimate (default 3 h: ends at 3 h)."""
    kw.setdefault("started_s", 0.0)
    kw.setdefault("runtime_estimate_s", 3 * HOUR)
    return running(name, node, gpus, **kw)


COHORT = teams(
    team("research", {H100: 16}, "ml"),
    team("prod", {H100: 16}, "ml"),
)


@dataclass
class Case:
    id: str
    nodes: list[Node]
    pending: list[JobSpec]
    running: list[JobSpec] = field(default_factory=list)
    teams: TeamsSpec = PLENTY
    profile: str = "default"
    now_s: float = NOW
    history: DecayedUsage | None = None
    admitted: dict[str, list[str]] = field(default_factory=dict)  # job -> nodes used
    preempted: list[str] = field(default_factory=list)
    reserved: dict[str, list[str]] = field(default_factory=dict)  # job -> nodes
    reserved_start_s: dict[str, float] = field(default_factory=dict)
    pending_reason: dict[str, str] = field(default_factory=dict)  # job -> reason fragment
    order: list[str] | None = None  # expected admission order (dict order of `admitted`)


CASES = [
    # -- EASY backfill
    Case(
        "backfill: the blocked gang gets a reservation on the nodes that free first",
        leaves(3),
        [job("big", gpus=8, workers=2, submitted_s=1)],
        running=[
            ran("ends-3h", "h-0", ALL8),
            ran("ends-5h", "h-1", ALL8, runtime_estimate_s=5 * HOUR),
            ran("ends-4h", "h-2", ALL8, runtime_estimate_s=4 * HOUR),
        ],
        reserved={"big": ["h-0", "h-2"]},
        reserved_start_s={"big": 4 * HOUR},
        pending_reason={"big": "reserved 16 h100-sxm5-80gb GPUs on h-0, h-2 from ~2 h"},
    ),
    Case(
        "backfill: a short job may use the reserved GPUs when it ends before the reservation",
        leaves(2),
        [
            job("big", gpus=8, workers=2, submitted_s=1),
            job("short", gpus=4, submitted_s=2, runtime_estimate_s=HOUR / 2),
        ],
        running=[ran("r", "h-0", [0, 1, 2, 3])],  # ends at 3 h: big reserved from 3 h
        admitted={"short": ["h-0"]},
        reserved={"big": ["h-0", "h-1"]},
    ),
    Case(
        "backfill: a long job may not delay the reservation and is told why",
        leaves(2),
        [
            job("big", gpus=8, workers=2, submitted_s=1),
            job("long", gpus=4, submitted_s=2, runtime_estimate_s=10 * HOUR),
        ],
        running=[ran("r", "h-0", [0, 1, 2, 3])],
        reserved={"big": ["h-0", "h-1"]},
        pending_reason={"long": "a 16-GPU reservation for job 'big' starts in ~60 min"},
    ),
    Case(
        "backfill: a job without a runtime estimate may not jump the reservation",
        leaves(2),
        [job("big", gpus=8, workers=2, submitted_s=1), job("open-ended", gpus=1, submitted_s=2)],
        running=[ran("r", "h-0", [0, 1, 2, 3])],
        reserved={"big": ["h-0", "h-1"]},
        pending_reason={"open-ended": "reservation for job 'big'"},
    ),
    Case(
        "backfill: jobs that avoid the reserved nodes start now, whatever their length",
        leaves(3),
        [
            job("big", gpus=8, workers=2, submitted_s=1),
            job("elsewhere", gpus=2, submitted_s=2, runtime_estimate_s=10 * HOUR),
        ],
        running=[ran("r0", "h-0", ALL8), ran("r1", "h-1", [0, 1, 2, 3]), ran("r2", "h-2", [0, 1])],
        admitted={"elsewhere": ["h-2"]},
        reserved={"big": ["h-0", "h-1"]},
    ),
    Case(
        "backfill: running jobs without estimates give no reservation, and the reason says so",
        leaves(1),
        [job("big", gpus=8, submitted_s=1), job("small", gpus=4, submitted_s=2)],
        running=[running("r", "h-0", [0, 1, 2, 3], started_s=0.0)],
        admitted={"small": ["h-0"]},
        pending_reason={"big": "no reservation yet: the running jobs' estimated ends never free"},
    ),
    Case(
        "backfill: a job blocked by quota gets no reservation; the next one blocked by room does",
        leaves(2),
        [
            job("over-quota", gpus=8, workers=2, team="prod", submitted_s=0),
            job("big", gpus=8, workers=2, submitted_s=1),
        ],
        running=[ran("r", "h-0", [0], team="prod")],
        teams=teams(team("research", {H100: 16}), team("prod", {H100: 8})),
        reserved={"big": ["h-0", "h-1"]},
        pending_reason={"over-quota": "team prod quota 1/8"},
    ),
    Case(
        "best-effort FIFO: no reservation, so the small job takes the room",
        leaves(2),
        [
            job("big", gpus=8, workers=2, submitted_s=1),
            job("long", gpus=4, submitted_s=2, runtime_estimate_s=10 * HOUR),
        ],
        running=[ran("r", "h-0", [0, 1, 2, 3])],
        profile="fifo",
        admitted={"long": ["h-0"]},
    ),
    # -- strict FIFO
    Case(
        "strict FIFO: the blocked head holds back every later job",
        leaves(1),
        [job("big", gpus=8, submitted_s=1), job("small", gpus=1, submitted_s=2)],
        running=[ran("r", "h-0", [0])],
        profile="strict-fifo",
        pending_reason={"small": "strict FIFO, job 'big' ahead of it cannot start yet"},
    ),
    Case(
        "strict FIFO: a job waiting on its own team's quota blocks only its team",
        leaves(2),
        [
            job("capped", gpus=8, team="prod", submitted_s=1),
            job("prod-next", gpus=1, team="prod", submitted_s=2),
            job("research-next", gpus=1, submitted_s=3),
        ],
        teams=teams(team("research", {H100: 8}), team("prod", {H100: 4})),
        profile="strict-fifo",
        admitted={"research-next": ["h-0"]},
        pending_reason={"prod-next": "'capped' ahead of it"},
    ),
    # -- quota reclaim
    Case(
        "reclaim: a team within its guarantee takes back GPUs a cohort member borrows",
        leaves(4),
        [job("mine", gpus=8, team="research")],
        running=[
            ran(f"p{i}", f"h-{i}", ALL8, team="prod", last_checkpoint_s=NOW - 60 * (i + 1))
            for i in range(4)
        ],
        teams=COHORT,
        admitted={"mine": ["h-0"]},  # p0: least work since its checkpoint
        preempted=["p0"],
    ),
    Case(
        "reclaim: even a borrower that just started (no minimum runtime against a guarantee)",
        leaves(2),
        [job("mine", gpus=8, team="research")],
        running=[ran("p0", "h-0", ALL8, team="prod"), ran("p1", "h-1", ALL8, team="prod")],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        now_s=60.0,
        admitted={"mine": ["h-0"]},
        preempted=["p0"],
    ),
    Case(
        "reclaim: a guarantee lent out comes back by reclaim even while other GPUs are free",
        leaves(4),  # h-2 and h-3 free, but the cohort owns only 16 GPUs and holds 16
        [job("mine", gpus=8, team="research")],
        running=[ran("p0", "h-0", ALL8, team="prod"), ran("p1", "h-1", ALL8, team="prod")],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        preempted=["p0"],
        admitted={"mine": ["h-0"]},
    ),
    Case(
        "reclaim: a cohort never takes a guarantee owed to a team outside it",
        leaves(4),
        [job("mine", gpus=8, team="research"), job("theirs", gpus=8, workers=2, team="solo")],
        running=[ran("p0", "h-0", ALL8, team="prod"), ran("p1", "h-1", ALL8, team="prod")],
        teams=teams(
            team("research", {H100: 8}, "ml"),
            team("prod", {H100: 8}, "ml"),
            team("solo", {H100: 16}),
        ),
        preempted=["p0"],
        admitted={"mine": ["h-0"], "theirs": ["h-2", "h-3"]},
    ),
    Case(
        "reclaim: victims give back what is owed, not just room (two borrowers for 16)",
        leaves(4),
        [job("mine", gpus=8, workers=2, team="research")],
        running=[
            ran("p0", "h-0", ALL8, team="prod", last_checkpoint_s=NOW - 60),
            ran("p1", "h-1", ALL8, team="prod", last_checkpoint_s=NOW - 120),
            ran("p2", "h-2", ALL8, team="prod", last_checkpoint_s=NOW - 180),
        ],
        teams=teams(team("research", {H100: 16}, "ml"), team("prod", {H100: 8}, "ml")),
        preempted=["p0", "p1"],
        admitted={"mine": ["h-0", "h-1"]},
    ),
    Case(
        "reclaim: never a non-preemptible borrower",
        leaves(2),
        [job("mine", gpus=8, team="research")],
        running=[
            ran("p0", "h-0", ALL8, team="prod", preemptible=False),
            ran("p1", "h-1", ALL8, team="prod", preemptible=False),
        ],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        reserved={"mine": ["h-0"]},
        pending_reason={"mine": "room for 0 of 1"},
    ),
    Case(
        "reclaim: a team within its guarantee does not evict another team within its own",
        leaves(2),
        [job("mine", gpus=8, team="research")],
        running=[
            ran("p0", "h-0", ALL8, team="prod"),
            ran("o0", "h-1", ALL8, team="other"),
        ],
        teams=teams(
            team("research", {H100: 8}, "ml"),
            team("prod", {H100: 8}, "ml"),
            team("other", {H100: 8}, "ml"),
        ),
        reserved={"mine": ["h-1"]},  # o0 and p0 end together; o0 sorts first
        pending_reason={"mine": "room for 0 of 1"},
    ),
    Case(
        "reclaim: beyond its guarantee a team may not reclaim",
        leaves(3),
        [job("more", gpus=8, team="research")],
        running=[
            ran("mine", "h-0", ALL8, team="research"),
            ran("p0", "h-1", ALL8, team="prod"),
            ran("p1", "h-2", ALL8, team="prod"),
        ],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        pending_reason={"more": "team research quota 8/8"},
    ),
    Case(
        "guaranteed first: a borrower's job never takes, in this cycle, room a team is owed",
        leaves(1),
        [
            job("borrow", gpus=4, team="prod", submitted_s=0, priority_class="production"),
            job("owed", gpus=8, team="research", submitted_s=5),
        ],
        running=[ran("p0", "h-0", [0, 1, 2, 3], team="prod")],  # borrowed
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 0}, "ml")),
        profile="priority",
        admitted={"owed": ["h-0"]},
        preempted=["p0"],
        pending_reason={"borrow": "team prod quota 0/0"},
    ),
    # -- fair share
    Case(
        "fair share: the team using less goes first, whatever the submission order",
        leaves(1),
        [
            job("heavy-next", gpus=4, team="prod", submitted_s=0),
            job("light", gpus=4, submitted_s=9),
        ],
        running=[ran("p", "h-0", [0, 1, 2, 3], team="prod")],
        admitted={"light": ["h-0"]},
        reserved={"heavy-next": ["h-0"]},
        pending_reason={"heavy-next": "room for 0 of 1"},
    ),
    Case(
        "fair share: decayed past use counts, so last week's heavy user waits",
        leaves(1),
        [job("a", gpus=8, team="prod", submitted_s=0), job("b", gpus=8, submitted_s=9)],
        history=DecayedUsage(at_s=NOW, gpu_s={("prod", H100): 8 * 86_400.0}),
        admitted={"b": ["h-0"]},
    ),
    Case(
        "fair share: a larger weight earns a larger share",
        leaves(2),
        [job("a2", gpus=4, team="prod", submitted_s=0), job("b2", gpus=4, submitted_s=1)],
        running=[
            ran("a1", "h-0", [0, 1, 2, 3, 4, 5], team="prod"),
            ran("b1", "h-1", [0, 1, 2, 3], team="research"),
        ],
        teams=teams(
            team("research", {H100: 1000}),
            team("prod", {H100: 1000}, fair_share_weight=2),
        ),
        admitted={"a2": ["h-1"]},  # prod 6/16 ÷ 2 < research 4/16
        reserved={"b2": ["h-0"]},
    ),
    Case(
        "fair share interleaves teams as it admits: A, B, A, B",
        leaves(1),
        [
            *(job(f"a{i}", gpus=1, team="prod", submitted_s=i) for i in range(2)),
            *(job(f"b{i}", gpus=1, submitted_s=10 + i) for i in range(2)),
        ],
        admitted={"a0": ["h-0"], "b0": ["h-0"], "a1": ["h-0"], "b1": ["h-0"]},
        order=["a0", "b0", "a1", "b1"],
    ),
    # -- Tiresias
    Case(
        "tiresias: the job with the least attained service goes first",
        leaves(1),
        [
            # 62.5 GPU-hours: past the 16 GPU-hour threshold, so the second queue
            job("veteran", gpus=8, submitted_s=0, attained_gpu_s=225_000.0),
            job("newcomer", gpus=8, submitted_s=NOW - 10),
        ],
        profile="tiresias",
        admitted={"newcomer": ["h-0"]},
    ),
    Case(
        "tiresias: a job starved for twice its executed time is promoted",
        leaves(1),
        [
            # second queue (20 GPU-hours), but at 30 h it has waited 27.5 h: more than twice
            # its 2.5 h of running
            job("starved", gpus=8, submitted_s=0, attained_gpu_s=8 * 9000.0),
            job("newcomer", gpus=8, submitted_s=30 * HOUR - 10),
        ],
        now_s=30 * HOUR,
        profile="tiresias",
        admitted={"starved": ["h-0"]},
    ),
]


def _nodes(placements: tuple[Placement, ...]) -> list[str]:
    return [p.node for p in placements]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_policy(case: Case) -> None:
    c, state = cluster(*case.nodes)
    before = (state.dump(), state.version)
    d = decide(
        c,
        state,
        case.running,
        case.pending,
        case.teams,
        profile=case.profile,
        now_s=case.now_s,
        history=case.history,
    )
    assert (state.dump(), state.version) == before
    assert {j: _nodes(p) for j, p in d.admitted.items()} == case.admitted
    if case.order is not None:
        assert list(d.admitted) == case.order
    assert sorted(d.preempted) == sorted(case.preempted)
    assert {j: sorted(set(_nodes(p))) for j, p in d.reserved.items()} == case.reserved
    for name, start in case.reserved_start_s.items():
        assert d.reserved_start_s[name] == start
    assert set(d.pending_reasons) == {j.name for j in case.pending} - set(case.admitted)
    for name, fragment in case.pending_reason.items():
        assert fragment in d.pending_reasons[name], d.pending_reasons[name]


def test_reservation_placement_is_a_whole_gang_on_free_or_freeing_gpus() -> None:
    c, state = cluster(*leaves(3))
    run = [ran("r0", "h-0", ALL8), ran("r1", "h-1", [0, 1, 2, 3], runtime_estimate_s=9 * HOUR)]
    d = decide(c, state, run, [job("big", gpus=8, workers=2)], PLENTY, now_s=NOW)
    (placements,) = d.reserved.values()
    assert [len(p.gpus) for p in placements] == [8, 8]
    assert {p.node for p in placements} == {"h-0", "h-2"}
    assert d.reserved_start_s["big"] == 3 * HOUR


def test_relayout_proposed_when_slices_of_the_wanted_profile_are_missing() -> None:
    a100 = Node("m-0", A100, 2, path=("b1", "l1"), mig=((("1g.10gb", 7),), (("1g.10gb", 7),)))
    c, state = cluster(a100)
    pending = [
        job("chat", kind="inference", mig_profile="3g.40gb", accelerators=[A100]),
    ]
    d = decide(c, state, [], pending, PLENTY)
    assert "chat" in d.pending_reasons
    assert d.relayouts, "a re-layout should be proposed"
    r = d.relayouts[0]
    assert r.node == "m-0"
    assert "chat" in r.serves
    assert not r.drain
    assert any(p == "3g.40gb" for p, _ in r.proposed)


def test_cycle_number_is_echoed() -> None:
    c, state = cluster(*leaves(1))
    assert decide(c, state, [], [], PLENTY, cycle=41).cycle == 41


def test_without_guaranteed_first_the_borrower_takes_the_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control for the guaranteed-first case: the same queue under plain priority order."""
    from gpufleet.sched import registry
    from gpufleet.specs.profiles import Profile

    plain = Profile("priority", "topology-best-fit", guaranteed_first=False)
    monkeypatch.setattr(registry, "PROFILES", {**registry.PROFILES, "plain": plain})
    (case,) = [c for c in CASES if c.id.startswith("guaranteed first")]
    c, state = cluster(*case.nodes)
    d = decide(c, state, case.running, case.pending, case.teams, profile="plain", now_s=NOW)
    assert list(d.admitted) == ["borrow"]
    assert not d.preempted


def test_a_job_taking_either_flavor_uses_its_own_quota_before_borrowing() -> None:
    """H100 comes first in the cluster, but research would have to borrow it; A100 is its own."""
    from gpufleet.cluster import expand_group

    nodes = [
        *leaves(1),
        *expand_group("a", A100, 8, [("b1", "l2")]),
    ]
    c, state = cluster(*nodes)
    t = teams(
        team("research", {H100: 0, A100: 8}, "ml"),
        team("prod", {H100: 8, A100: 0}, "ml"),
    )
    d = decide(c, state, [], [job("either", gpus=8, accelerators=[H100, A100])], t)
    assert d.flavors["either"] == A100


def test_a_short_share_may_land_on_a_reserved_gpu() -> None:
    """Found by the event-sequence property: un-reserving must cover a share's GPU too."""
    c, state = cluster(*leaves(1, gpus=2, fractions=True))
    pending = [
        job("big", gpus=2, submitted_s=1),
        job("sip", gpu_fraction=0.125, submitted_s=2, runtime_estimate_s=60.0, kind="batch"),
    ]
    r = ran("r", "h-0", [0])
    d = decide(c, state, [r], pending, PLENTY, now_s=NOW)
    assert d.reserved_start_s["big"] == 3 * HOUR
    (p,) = d.admitted["sip"]
    assert p.gpu == 1
    state.allocate("r", Whole("h-0", (0,)))
    run, wait = apply(state, d, {"r": r}, {j.name: j for j in pending}, NOW)  # applies cleanly
    assert set(run) == {"r", "sip"}
    assert set(wait) == {"big"}
