"""decide() with priority preemption: scenario tables with narrative ids, and a property.

Priority classes here: critical 2000 (non-preemptible), production 1000
(non-preemptible), standard 500 and opportunistic 100 (both preemptible). The
clock is `NOW` = one hour in, so a job started at 0 is past the minimum runtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cluster import Cluster, Node, State
from gpufleet.sched import registry
from gpufleet.sched.decide import decide
from gpufleet.sched.framework import Placement
from gpufleet.sched.preempt import MIN_RUNTIME_S, lost_work_gpu_s
from gpufleet.sched.waits import WOULD_NOT_HELP
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import Profile
from gpufleet.specs.teams import TeamsSpec

from .scenarios import H100, cluster, job, leaves, running

NOW = 3600.0
SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))

CLASSES = [
    {"name": "critical", "value": 2000, "preemptible": False},
    {"name": "production", "value": 1000, "preemptible": False},
    {"name": "standard", "value": 500, "preemptible": True},
    {"name": "opportunistic", "value": 100, "preemptible": True},
]
VALUE = {c["name"]: c["value"] for c in CLASSES}
TEAMS = TeamsSpec.model_validate(
    {
        "kind": "teams",
        "priority_classes": CLASSES,
        "teams": [
            {"name": "research", "quota": {H100: 1000}},
            {"name": "prod", "quota": {H100: 1000}},
        ],
    }
)
ALL8 = list(range(8))


def old(name: str, node: str, gpus: list[int], **kw: Any) -> JobSpec:
    """A running job started at 0, opportunistic unless told otherwise."""
    kw.setdefault("priority_class", "opportunistic")
    kw.setdefault("started_s", 0.0)
    return running(name, node, gpus, **kw)


def urgent(name: str = "urgent", gpus: int = 8, **kw: Any) -> JobSpec:
    kw.setdefault("priority_class", "production")
    return job(name, gpus=gpus, team="prod", **kw)


@dataclass
class Case:
    id: str
    nodes: list[Node]
    pending: list[JobSpec]
    running: list[JobSpec] = field(default_factory=list)
    admitted: dict[str, list[str]] = field(default_factory=dict)  # job -> nodes used
    preempted: list[str] = field(default_factory=list)
    pending_reason: dict[str, str] = field(default_factory=dict)  # job -> reason fragment
    profile: str = "priority"


# FIFO order with priority preemption: not a shipped profile, but it lets a low-priority job
# be admitted before a higher-priority one in the same cycle.
FIFO_PREEMPT = Profile("fifo", "topology-best-fit", preemption=("priority",))


@pytest.fixture(autouse=True)
def _fifo_preempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PROFILES", {**registry.PROFILES, "fifo-preempt": FIFO_PREEMPT})


CASES = [
    Case(
        "an urgent job evicts the victim with the least work since its last checkpoint",
        leaves(2),
        [urgent()],
        running=[
            old("fresh-ckpt", "h-0", ALL8, last_checkpoint_s=3000.0),  # 8 × 600 s lost
            old("no-ckpt", "h-1", ALL8),  # 8 × 3600 s lost
        ],
        admitted={"urgent": ["h-0"]},
        preempted=["fresh-ckpt"],
    ),
    Case(
        "at equal lost work one 8-GPU victim is preferred to two 4-GPU ones",
        leaves(2),
        [urgent()],
        running=[
            old("small-a", "h-0", [0, 1, 2, 3]),  # 4 × 3600 s
            old("small-b", "h-0", [4, 5, 6, 7]),  # 4 × 3600 s
            old("big", "h-1", ALL8, last_checkpoint_s=1800.0),  # 8 × 1800 s
        ],
        admitted={"urgent": ["h-1"]},
        preempted=["big"],
    ),
    Case(
        "a cheap victim that frees nothing useful is spared after the search",
        leaves(2),
        [urgent()],
        running=[
            old("pinned", "h-0", [0, 1, 2, 3, 4, 5], preemptible=False),
            old("tiny", "h-0", [6, 7], last_checkpoint_s=3500.0),  # cheapest, but h-0 stays short
            old("whole", "h-1", ALL8),
        ],
        admitted={"urgent": ["h-1"]},
        preempted=["whole"],
    ),
    Case(
        "a gang needing two nodes evicts the two cheapest whole-node victims",
        leaves(3),
        [urgent(workers=2)],
        running=[
            old("a", "h-0", ALL8, last_checkpoint_s=3000.0),
            old("b", "h-1", ALL8),
            old("c", "h-2", ALL8, last_checkpoint_s=2000.0),
        ],
        admitted={"urgent": ["h-0", "h-2"]},
        preempted=["a", "c"],
    ),
    Case(
        "a job that fits in free GPUs evicts nobody",
        leaves(2),
        [urgent()],
        running=[old("r", "h-0", ALL8)],
        admitted={"urgent": ["h-1"]},
    ),
    Case(
        "never a non-preemptible job",
        leaves(1),
        [urgent()],
        running=[old("keep", "h-0", ALL8, preemptible=False)],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "never a job of a non-preemptible priority class, even for a higher one",
        leaves(1),
        [urgent(priority_class="critical")],
        running=[old("prod-job", "h-0", ALL8, priority_class="production")],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "never a job of equal priority",
        leaves(1),
        [urgent(priority_class="standard")],
        running=[old("peer", "h-0", ALL8, priority_class="standard")],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "never a job of higher priority",
        leaves(1),
        [urgent(priority_class="opportunistic")],
        running=[old("better", "h-0", ALL8, priority_class="standard")],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "never a job younger than the minimum runtime",
        leaves(1),
        [urgent()],
        running=[old("young", "h-0", ALL8, started_s=NOW - MIN_RUNTIME_S + 1)],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "a running job with no start time is never evicted (its runtime is unknown)",
        leaves(1),
        [urgent()],
        running=[old("unknown-age", "h-0", ALL8, started_s=None)],
        pending_reason={"urgent": "room for 0 of 1"},
    ),
    Case(
        "no eviction when even all victims would not make room",
        leaves(3),  # the third node's job may not be evicted
        [urgent(workers=3)],
        running=[
            old("a", "h-0", ALL8),
            old("b", "h-1", ALL8),
            old("c", "h-2", ALL8, priority_class="critical"),
        ],
        pending_reason={"urgent": f"(0 free h100-sxm5-80gb GPUs in all); {WOULD_NOT_HELP}"},
    ),
    Case(
        "jobs admitted earlier in the cycle are never victims",
        leaves(1),
        [
            job("early", gpus=8, priority_class="opportunistic", submitted_s=0),
            urgent(priority_class="standard", submitted_s=1),
        ],
        admitted={"early": ["h-0"]},
        pending_reason={"urgent": "room for 0 of 1"},
        profile="fifo-preempt",
    ),
]


def _nodes(placements: tuple[Placement, ...]) -> list[str]:
    return [p.node for p in placements]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scenario(case: Case) -> None:
    c, state = cluster(*case.nodes)
    before = (state.dump(), state.version)
    d = decide(c, state, case.running, case.pending, TEAMS, now_s=NOW, profile=case.profile)
    assert (state.dump(), state.version) == before
    assert {j: _nodes(p) for j, p in d.admitted.items()} == case.admitted
    assert sorted(d.preempted) == sorted(case.preempted)
    assert set(d.pending_reasons) == {j.name for j in case.pending} - set(case.admitted)
    for name, fragment in case.pending_reason.items():
        assert fragment in d.pending_reasons[name]
    if not case.preempted:
        for reason in d.pending_reasons.values():
            if "room for 0 of 3" not in reason:
                assert WOULD_NOT_HELP not in reason


def test_reason_names_preemptor_priorities_lost_work_and_grace() -> None:
    c, state = cluster(*leaves(1))
    victim = old("victim", "h-0", ALL8, last_checkpoint_s=NOW - 225.0)
    d = decide(c, state, [victim], [urgent()], TEAMS, now_s=NOW)
    assert {n: e.text() for n, e in d.preempted.items()} == {
        "victim": "preempted by job 'urgent' (priority 1000 > 100): frees 8 h100-sxm5-80gb GPUs; "
        "lost work 0.5 GPU-h since last checkpoint; grace period 120 s"
    }
    assert _nodes(d.admitted["urgent"]) == ["h-0"]


def test_grace_period_covers_the_victims_checkpoint_time() -> None:
    c, state = cluster(*leaves(1))
    victim = old("victim", "h-0", ALL8, checkpoint_time_s=300)
    d = decide(c, state, [victim], [urgent()], TEAMS, now_s=NOW)
    assert "since start" in d.preempted["victim"].text()
    assert d.preempted["victim"].text().endswith("grace period 300 s")
    assert d.preempted["victim"].grace_s == 300


def test_evicted_gpus_no_longer_count_against_the_victims_team() -> None:
    """After the eviction research uses 0 of its 8: a later job waits on room, not quota."""
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": CLASSES,
            "teams": [
                {"name": "research", "quota": {H100: 8}},
                {"name": "prod", "quota": {H100: 8}},
            ],
        }
    )
    c, state = cluster(*leaves(1))
    pending = [urgent(), job("next", gpus=8, priority_class="opportunistic", submitted_s=5)]
    d = decide(c, state, [old("r0", "h-0", ALL8)], pending, teams, now_s=NOW, profile="priority")
    assert list(d.preempted) == ["r0"]
    assert list(d.admitted) == ["urgent"]
    assert "quota" not in d.pending_reasons["next"]
    assert "room for 0 of 1" in d.pending_reasons["next"]
    assert WOULD_NOT_HELP not in d.pending_reasons["next"]  # the preemptor is no candidate


def test_lost_work() -> None:
    j = old("r", "h-0", ALL8, started_s=100.0)
    assert lost_work_gpu_s(j, 8000, 200.0) == 800.0
    j2 = old("r", "h-0", ALL8, started_s=100.0, last_checkpoint_s=150.0)
    assert lost_work_gpu_s(j2, 4000, 200.0) == 200.0


def test_profile_without_preemption_evicts_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = dict(registry.PROFILES)
    profiles["no-preempt"] = Profile("priority", "topology-best-fit", preemption=())
    monkeypatch.setattr(registry, "PROFILES", profiles)
    c, state = cluster(*leaves(1))
    d = decide(
        c, state, [old("v", "h-0", ALL8)], [urgent()], TEAMS, now_s=NOW, profile="no-preempt"
    )
    assert not d.preempted
    assert "urgent" in d.pending_reasons


# -- property ----------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Cluster, State, list[JobSpec], list[JobSpec]]:
    nodes = [
        Node(f"n{i}", H100, draw(st.sampled_from([4, 8])), ("b1", f"l{i % 2}"))
        for i in range(draw(st.integers(1, 4)))
    ]
    c = Cluster(("block", "leaf", "node"), tuple(nodes))
    state = State(c)
    classes = list(VALUE)
    runs: list[JobSpec] = []
    for node in nodes:
        free = list(range(node.gpus))
        while free and draw(st.booleans()):
            k = draw(st.integers(1, len(free)))
            taken, free = free[:k], free[k:]
            kw: dict[str, Any] = {
                "team": draw(st.sampled_from(["research", "prod"])),
                "priority_class": draw(st.sampled_from(classes)),
                "preemptible": draw(st.booleans()),
                "started_s": draw(st.sampled_from([0.0, 1000.0, 3500.0])),
            }
            if draw(st.booleans()):
                kw["last_checkpoint_s"] = draw(st.sampled_from([1200.0, 3000.0]))
            runs.append(running(f"r{len(runs)}", node.name, taken, **kw))
    pending: list[JobSpec] = []
    for i in range(draw(st.integers(1, 4))):
        pending.append(
            job(
                f"p{i}",
                team=draw(st.sampled_from(["research", "prod"])),
                gpus=draw(st.sampled_from([1, 2, 4, 8])),
                workers=draw(st.integers(1, 2)),
                priority_class=draw(st.sampled_from(classes)),
                submitted_s=i,
            )
        )
    return c, state, runs, pending


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(worlds())
def test_preemption_properties(world: tuple[Cluster, State, list[JobSpec], list[JobSpec]]) -> None:
    c, state, runs, pending = world
    before = (state.dump(), state.version)
    d = decide(c, state, runs, pending, TEAMS, now_s=NOW)
    assert (state.dump(), state.version) == before

    by_name = {j.name: j for j in runs}
    assert set(d.preempted) <= set(by_name)
    pending_by_name = {j.name: j for j in pending}
    for name, reason in d.preempted.items():
        victim = by_name[name]
        cls = victim.priority_class or "standard"
        assert victim.preemptible
        assert cls in ("standard", "opportunistic")
        preemptor = pending_by_name[reason.preemptor]
        assert preemptor.name in d.admitted
        assert VALUE[cls] < VALUE[preemptor.priority_class or "standard"]
        assert victim.started_s is not None
        assert NOW - victim.started_s >= MIN_RUNTIME_S
        assert reason.text().startswith(f"preempted by job '{preemptor.name}'")
    assert set(d.admitted) | set(d.pending_reasons) == {j.name for j in pending}

    # releasing the victims and applying the admissions double-books nothing (allocate raises)
    with state.branch() as b:
        for r in runs:
            b.allocate(r.name, *[cl for p in r.placement for cl in _claims(p)])
        for name in d.preempted:
            b.release_job(name)
        for name, placements in d.admitted.items():
            b.allocate(name, *[cl for p in placements for cl in p.claims()])


def _claims(p: Any) -> tuple[Any, ...]:
    return Placement(p.node, tuple(p.gpus)).claims()


def test_an_eviction_is_data_a_driver_words_without_parsing() -> None:
    """The control plane has its own grace and hides the preemptor from the victim's team:
    both come from the Eviction's fields, and the full sentence is unchanged otherwise."""
    c, state = cluster(*leaves(1))
    victim = old("victim", "h-0", ALL8, last_checkpoint_s=NOW - 225.0)
    e = decide(c, state, [victim], [urgent()], TEAMS, now_s=NOW).preempted["victim"]
    assert (e.preemptor, e.kind, e.grace_s) == ("urgent", "priority", 120.0)
    assert e.text(grace_s=45).endswith("; grace period 45 s")
    assert e.text(grace_s=45).replace("45 s", "120 s") == e.text() == str(e)
    public = e.public_text(grace_s=45)
    assert public == (
        "preempted by a higher-priority job; frees 8 h100-sxm5-80gb GPUs; "
        "lost work 0.5 GPU-h since last checkpoint; grace period 45 s"
    )
    assert "urgent" not in public
