"""decide(): scenario tables with narrative ids — gangs, topology, best fit, quotas, MIG,
fractions, spot, running jobs, purity and queue order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpufleet.cluster import Node
from gpufleet.errors import UnknownNameError
from gpufleet.sched.decide import decide
from gpufleet.sched.framework import PHASES, InvalidPlacementError, Placement
from gpufleet.sched.registry import QUEUE_ORDERS, resolve
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec

from .scenarios import A100, H100, PLENTY, cluster, job, leaves, running, team, teams


@dataclass
class Case:
    id: str
    nodes: list[Node]
    pending: list[JobSpec]
    running: list[JobSpec] = field(default_factory=list)
    teams: TeamsSpec = PLENTY
    profile: str = "default"
    admitted: dict[str, list[str]] = field(default_factory=dict)  # job -> nodes used
    pending_reason: dict[str, str] = field(default_factory=dict)  # job -> reason fragment


CASES = [
    Case(
        "a 4x8 gang on 3 free nodes waits and holds nothing",
        leaves(4),
        [job("pretrain", gpus=8, workers=4)],
        running=[running("r", "h-3", list(range(8)))],
        pending_reason={"pretrain": "room for 3 of 4 workers of 8"},
    ),
    Case(
        "a 4x8 gang with one node partly busy still waits: never 3 workers and a half",
        leaves(4),
        [job("pretrain", gpus=8, workers=4)],
        running=[running("r", "h-3", [0])],
        pending_reason={"pretrain": "room for 3 of 4"},
    ),
    Case(
        "a gang fills exactly four free nodes",
        leaves(4),
        [job("pretrain", gpus=8, workers=4)],
        admitted={"pretrain": ["h-0", "h-1", "h-2", "h-3"]},
    ),
    Case(
        "required leaf: the gang goes to the tightest leaf that holds it whole",
        leaves(4, 4),
        [job("pretrain", gpus=8, workers=3, topology={"required": "leaf"})],
        running=[running("r", "h-0", [0, 1, 2, 3, 4, 5, 6, 7])],
        admitted={"pretrain": ["h-1", "h-2", "h-3"]},
    ),
    Case(
        "required leaf: no leaf has room enough, the reason names the biggest",
        leaves(5, 4),
        [job("pretrain", gpus=8, workers=5, topology={"required": "leaf"})],
        running=[running("r", "h-0", list(range(8)))],
        pending_reason={
            "pretrain": "no leaf has 40 free h100-sxm5-80gb GPUs for 5×8 (most "
            "free in one leaf: 32)"
        },
    ),
    Case(
        "without a requirement the same gang spans leaves",
        leaves(4, 4),
        [job("pretrain", gpus=8, workers=5)],
        admitted={"pretrain": ["h-0", "h-1", "h-2", "h-3", "h-4"]},
    ),
    Case(
        "no constraint: a 2-node gang packs into the leaf that holds it whole",
        leaves(3, 3),
        [job("pair", gpus=8, workers=2)],
        running=[
            running("r1", "h-1", list(range(8))),
            running("r2", "h-2", list(range(8))),
            running("r3", "h-3", [0, 1, 2, 3]),
        ],
        admitted={"pair": ["h-4", "h-5"]},
    ),
    Case(
        "required node: 4x2 all on one node",
        leaves(2),
        [job("tp", gpus=2, workers=4, topology={"required": "node"})],
        running=[running("r", "h-0", [0])],
        admitted={"tp": ["h-1"] * 4},
    ),
    Case(
        "best fit: a 4-GPU job takes the half-used node, the empty one stays whole",
        leaves(2),
        [job("small", gpus=4)],
        running=[running("r", "h-0", [0, 1, 2, 3])],
        admitted={"small": ["h-0"]},
    ),
    Case(
        "packing: a 2x2 gang on one node rather than two holes of 2",
        leaves(3),
        [job("pair", gpus=2, workers=2)],
        running=[
            running("r0", "h-0", [0, 1, 2, 3, 4, 5]),
            running("r1", "h-1", [0, 1, 2, 3, 4, 5]),
        ],
        admitted={"pair": ["h-2", "h-2"]},
    ),
    Case(
        "a later small job is not blocked by a big one that does not fit (best-effort FIFO)",
        leaves(3),
        [job("big", gpus=8, workers=3, submitted_s=0), job("small", gpus=8, submitted_s=1)],
        running=[running("r", "h-2", list(range(8)))],
        admitted={"small": ["h-0"]},
        pending_reason={"big": "room for 2 of 3"},
    ),
    Case(
        "jobs ahead of you are counted in the reason",
        leaves(1),
        [
            job("a", gpus=8, submitted_s=0),
            job("b", gpus=8, submitted_s=1),
            job("c", gpus=8, submitted_s=2),
        ],
        admitted={"a": ["h-0"]},
        pending_reason={"b": "room for 0 of 1", "c": "; 1 job ahead of you"},
    ),
    Case(
        "priority: a production job submitted later goes first",
        leaves(1),
        [
            job("batch", gpus=8, submitted_s=0),
            job("prod", gpus=8, submitted_s=5, priority_class="production"),
        ],
        admitted={"prod": ["h-0"]},
        pending_reason={"batch": "room for 0 of 1"},
    ),
    Case(
        "fifo profile: the earlier job goes first whatever its priority",
        leaves(1),
        [
            job("batch", gpus=8, submitted_s=0),
            job("prod", gpus=8, submitted_s=5, priority_class="production"),
        ],
        profile="fifo",
        admitted={"batch": ["h-0"]},
    ),
    # -- quotas
    Case(
        "quota: within guaranteed",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        teams=teams(team("research", {H100: 16})),
        admitted={"a": ["h-0", "h-1"]},
    ),
    Case(
        "quota: over guaranteed with no cohort waits",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        teams=teams(team("research", {H100: 8})),
        pending_reason={"a": "team research quota 0/8 h100-sxm5-80gb in use, no cohort to borrow"},
    ),
    Case(
        "quota: borrow idle quota from a cohort peer",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        admitted={"a": ["h-0", "h-1"]},
    ),
    Case(
        "quota: the peer's GPUs are busy, nothing to lend",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        running=[running("p", "h-3", list(range(8)), team="prod")],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        pending_reason={
            "a": "team research quota 0/8 h100-sxm5-80gb in use, it may take 8 more now: 8 free "
            "of its guarantee and 0 that cohort ml can still lend it (this job needs 16)"
        },
    ),
    Case(
        "quota: lending limit keeps half of the peer's quota",
        leaves(4),
        [job("a", gpus=8, workers=2), job("b", gpus=4, submitted_s=1)],
        teams=teams(
            team("research", {H100: 4}, "ml"),
            team("prod", {H100: 16}, "ml", lending_limit={H100: 8}),
        ),
        pending_reason={
            "a": "it may take 8 more now: 0 free of its guarantee and 8 that cohort ml can "
            "still lend it (this job needs 16)"
        },
        admitted={"b": ["h-0"]},
    ),
    Case(
        "quota: borrowing limit caps the team",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        teams=teams(
            team("research", {H100: 8}, "ml", borrowing_limit={H100: 4}),
            team("prod", {H100: 32}, "ml"),
        ),
        pending_reason={"a": "capped at 12 with borrowing"},
    ),
    Case(
        "quota: running jobs count against the team",
        leaves(4),
        [job("a", gpus=8)],
        running=[running("r", "h-0", list(range(8)))],
        teams=teams(team("research", {H100: 8})),
        pending_reason={"a": "quota 8/8 h100-sxm5-80gb in use"},
    ),
    Case(
        "quota: a guarantee lent out is not made up from GPUs the cohort does not own",
        leaves(4),
        [job("a", gpus=8)],
        running=[
            running("p0", "h-0", list(range(8)), team="prod", preemptible=False),
            running("p1", "h-1", list(range(8)), team="prod", preemptible=False),
        ],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        pending_reason={"a": "within its guarantee but other teams of cohort ml hold 8 of it"},
    ),
    Case(
        "quota: beyond its guarantee, a team waits when its cohort's quota is borrowed",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        running=[
            running("p0", "h-0", list(range(8)), team="prod"),
            running("p1", "h-1", list(range(8)), team="prod"),
        ],
        teams=teams(team("research", {H100: 8}, "ml"), team("prod", {H100: 8}, "ml")),
        pending_reason={
            "a": "it may take 0 more now: 0 free of its guarantee (8 of it held by other "
            "teams) and 0 that cohort ml can still lend it (this job needs 16)"
        },
    ),
    Case(
        "quota: borrowing is off, guarantee only",
        leaves(4),
        [job("a", gpus=8, workers=2)],
        teams=teams(
            {
                "name": "research",
                "cohort": "ml",
                "quotas": [{"flavor": H100, "guaranteed_gpus": 8, "borrowing": False}],
            },
            team("prod", {H100: 8}, "ml"),
        ),
        pending_reason={"a": "capped at 8 with borrowing"},
    ),
    Case(
        "quota: a team without quota for the flavor cannot use it",
        leaves(2),
        [job("a", gpus=1)],
        teams=teams(team("research", {A100: 8})),
        pending_reason={"a": "team research has no quota for h100-sxm5-80gb"},
    ),
    Case(
        "quota: a team not in the teams file",
        leaves(2),
        [job("a", gpus=1, team="ghosts", priority_class="standard")],
        pending_reason={"a": "team ghosts is not in the teams file"},
    ),
    Case(
        "quota: the second flavor is used when the first has no quota",
        [*leaves(1), *leaves(1, acc=A100, group="a")],
        [job("a", gpus=8)],
        teams=teams(team("research", {A100: 8})),
        admitted={"a": ["a-0"]},
    ),
    # -- spot
    Case(
        "spot: checkpointed training may use spot",
        leaves(1, capacity="spot", group="s"),
        [job("t", kind="training", gpus=8, checkpoint_interval_s=3600)],
        admitted={"t": ["s-0"]},
    ),
    Case(
        "spot: inference never lands on spot, even when allowed",
        leaves(1, capacity="spot", group="s"),
        [job("chat", kind="inference", gpus=1, allow_spot=True)],
        pending_reason={"chat": "spot nodes excluded"},
    ),
    Case(
        "spot: inference goes to the on-demand node next to a spot one",
        [*leaves(1, capacity="spot", group="s"), *leaves(1)],
        [job("chat", kind="inference", gpus=1)],
        admitted={"chat": ["h-0"]},
    ),
    # -- fractions
    Case(
        "fraction: best fit onto the GPU already half shared",
        leaves(1, gpus=2, fractions=True),
        [job("nb", kind="interactive", gpu_fraction=0.25)],
        running=[
            job(
                "r",
                gpu_fraction=0.5,
                state="running",
                placement=[{"node": "h-0", "gpus": [1], "fraction": 0.5}],
            )
        ],
        admitted={"nb": ["h-0"]},
    ),
    Case(
        "fraction: no node allows fractions",
        leaves(1),
        [job("nb", kind="interactive", gpu_fraction=0.25)],
        pending_reason={"nb": "cannot run: no h100-sxm5-80gb GPU is shared by fractions here"},
    ),
]


def _nodes(placements: tuple[Placement, ...]) -> list[str]:
    return [p.node for p in placements]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_scenario(case: Case) -> None:
    c, state = cluster(*case.nodes)
    before = (state.dump(), state.version)
    d = decide(c, state, case.running, case.pending, case.teams, profile=case.profile)
    assert (state.dump(), state.version) == before
    assert {j: _nodes(p) for j, p in d.admitted.items()} == case.admitted
    assert set(d.pending_reasons) == {j.name for j in case.pending} - set(case.admitted)
    for name, fragment in case.pending_reason.items():
        assert fragment in d.pending_reasons[name]
        assert d.pending_reasons[name].startswith(("waiting", "cannot run"))
    assert list(d.timings_s) == list(PHASES)
    assert not d.preempted
    assert not d.reserved


def test_fraction_placement_details() -> None:
    c, state = cluster(*leaves(1, gpus=2, fractions=True))
    r = job(
        "r",
        gpu_fraction=0.5,
        state="running",
        placement=[{"node": "h-0", "gpus": [1], "fraction": 0.5}],
    )
    d = decide(c, state, [r], [job("nb", gpu_fraction=0.3)], PLENTY)
    assert d.admitted["nb"] == (Placement("h-0", gpu=1, milli=375),)


def test_mig_slice_placement() -> None:
    layout = (("3g.40gb", 2),)
    nodes = [Node("a-0", A100, 2, ("b1", "l1"), mig=(layout, layout))]
    c, state = cluster(*nodes)
    d = decide(
        c,
        state,
        [],
        [job("chat", kind="inference", mig_profile="3g.40gb"), job("big", mig_profile="7g.80gb")],
        PLENTY,
    )
    (p,) = d.admitted["chat"]
    assert p.node == "a-0"
    assert p.mig_slices == ("a-0/gpu0/mig:3g.40gb#0",)
    assert d.flavors["chat"] == A100
    assert "no a100-sxm4-80gb GPU is cut into 7g.80gb MIG slices" in d.pending_reasons["big"]


def test_mig_slices_run_out() -> None:
    layout = (("3g.40gb", 2),)
    c, state = cluster(Node("a-0", A100, 1, ("b1", "l1"), mig=(layout,)))
    pending = [job(f"j{i}", mig_profile="3g.40gb", submitted_s=i) for i in range(3)]
    d = decide(c, state, [], pending, PLENTY, profile="fifo")
    assert sorted(d.admitted) == ["j0", "j1"]
    assert "no free 3g.40gb" in d.pending_reasons["j2"]


def test_gang_holds_whole_gpus_per_worker() -> None:
    c, state = cluster(*leaves(2))
    d = decide(c, state, [], [job("g", gpus=4, workers=3)], PLENTY)
    placements = d.admitted["g"]
    assert [len(p.gpus) for p in placements] == [4, 4, 4]
    used = [(p.node, g) for p in placements for g in p.gpus]
    assert len(set(used)) == 12


def test_running_jobs_occupy_their_gpus() -> None:
    c, state = cluster(*leaves(2))
    r = running("r", "h-0", list(range(8)))
    d = decide(c, state, [r], [job("a", gpus=8), job("b", gpus=8, submitted_s=1)], PLENTY)
    assert _nodes(d.admitted["a"]) == ["h-1"]
    assert "b" in d.pending_reasons
    assert state.dump() == {}


def test_running_jobs_already_in_the_state_are_not_allocated_twice() -> None:
    c, state = cluster(*leaves(2))
    r = running("r", "h-0", list(range(8)))
    state.allocate("r", *[pc for p in [Placement("h-0", tuple(range(8)))] for pc in p.claims()])
    d = decide(c, state, [r], [job("a", gpus=8)], PLENTY)
    assert _nodes(d.admitted["a"]) == ["h-1"]


ONE_GPU = {"gpus": 1}
SHARE = {"gpu_fraction": 0.5}  # (a whole-GPU job placed on other than its GPUs: its spec refuses)


@pytest.mark.parametrize(
    ("ask", "placement", "message"),
    [
        (ONE_GPU, [{"node": "h-0", "gpus": [9]}], "GPUs 0..7"),
        (ONE_GPU, [{"node": "nope", "gpus": [0]}], "unknown node"),
        (SHARE, [{"node": "h-0", "gpus": [0, 1], "fraction": 0.5}], "exactly one GPU"),
        (SHARE, [{"node": "h-0"}], "names no GPUs"),
    ],
    ids=["gpu index out of range", "unknown node", "fraction on two GPUs", "empty placement"],
)
def test_invalid_running_placement_is_a_user_error(
    ask: dict[str, object], placement: list[dict[str, object]], message: str
) -> None:
    c, state = cluster(*leaves(1))
    r = job("r", state="running", placement=placement, **ask)
    with pytest.raises(InvalidPlacementError, match=message):
        decide(c, state, [r], [], PLENTY)
    assert state.dump() == {}


def test_two_running_jobs_on_the_same_gpu_is_a_user_error() -> None:
    c, state = cluster(*leaves(1))
    a, b = running("a", "h-0", [0, 1]), running("b", "h-0", [1])
    with pytest.raises(InvalidPlacementError, match="running job b"):
        decide(c, state, [a, b], [], PLENTY)
    assert state.dump() == {}


def test_decide_on_a_snapshot_leaves_it_current() -> None:
    c, state = cluster(*leaves(2))
    state.allocate("x", *Placement("h-0", (0,)).claims())
    snap = state.snapshot()
    before = state.dump()
    d = decide(c, snap, [], [job("a", gpus=8), job("b", gpus=8)], PLENTY)
    assert snap.current
    assert state.dump() == before
    assert len(d.admitted) == 1


def test_unknown_profile_and_priority_class() -> None:
    c, state = cluster(*leaves(1))
    with pytest.raises(UnknownNameError, match="fifo"):
        decide(c, state, [], [], PLENTY, profile="fif")
    with pytest.raises(UnknownNameError, match="priority class"):
        decide(c, state, [], [job("a", gpus=1, priority_class="urgent")], PLENTY)


def test_profiles_name_registered_plugins() -> None:
    for name, profile in PROFILES.items():
        assert profile.queue_order in QUEUE_ORDERS
        resolved = resolve(name)
        assert resolved.queue_order.name == profile.queue_order
        assert resolved.placement.name == profile.placement
        assert tuple(p.name for p in resolved.preemptions) == profile.preemption


def test_unknown_required_level_is_a_reason() -> None:
    c, state = cluster(*leaves(1))
    d = decide(c, state, [], [job("a", gpus=8, topology={"required": "rack"})], PLENTY)
    assert "topology level 'rack' is not in this cluster" in d.pending_reasons["a"]


def test_pending_reasons_read_as_a_plain_mapping_and_survive_pickling() -> None:
    """Reasons are worded when read (a simulator reads none); to a reader they are a
    mapping of job to sentence like any other, equal to the dict of the same sentences."""
    import pickle

    c, state = cluster(*leaves(2))
    pending = [job("big", gpus=8, workers=2), job("small", gpus=1)]
    held = [running("r", "h-0", [0])]
    d = decide(c, state.snapshot(), held, pending, PLENTY, profile="fifo")
    assert "big" in d.pending_reasons
    assert "small" not in d.pending_reasons  # admitted
    reasons = dict(d.pending_reasons)
    assert reasons["big"].startswith("waiting: ")
    assert d.pending_reasons == reasons
    assert pickle.loads(pickle.dumps(d)).pending_reasons == reasons
