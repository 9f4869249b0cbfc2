"""The scoring placement plugins — binpack, spread and fgd — called directly on small clusters.

Scenarios: which node, GPU or slice each picks and why; fgd's fragmentation
argument (Weng et al., ATC '23) against binpack's; gangs all or nothing with
reasons; required topology; spot; fractions; MIG; purity. Hypothesis properties
over random small clusters: every answer uses only free GPUs, slices and shares,
gives exactly `workers` × `gpus_per_worker`, and waits exactly when a brute-force
search finds no placement; spread and fgd pick for each worker what a greedy over
every node would (fgd's ΔF measured on the state through a what-if), and each
plugin puts a share where a scan of every GPU would. GPUFLEET_PROPERTY_SCALE
multiplies max_examples.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cluster import (
    Branch,
    Capacity,
    Cluster,
    MigSlice,
    Node,
    Share,
    State,
    StateView,
    Whole,
)
from gpufleet.sched.fgd import Fgd
from gpufleet.sched.framework import Placed, Placement, PlacementPlugin
from gpufleet.sched.requests import Request, requests_for
from gpufleet.sched.scoring import BinPack, Spread
from gpufleet.sched.scoring_frame import MILLI_PER_EIGHTH, PRIOR_GPUS, Shape
from gpufleet.specs.jobs import JobSpec

from .scenarios import A100, H100, cluster, job, leaves

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))

BINPACK, SPREAD, FGD = BinPack(), Spread(), Fgd()
PLUGINS: list[PlacementPlugin] = [BINPACK, SPREAD, FGD]
_held = itertools.count()


def hold(state: State, node: str, gpus: range | list[int]) -> None:
    """Another job holds these whole GPUs."""
    state.allocate(f"held-{next(_held)}", Whole(node, tuple(gpus)))


def request_of(state: StateView, spec: JobSpec) -> Request:
    return requests_for(spec, list(state.cluster.accelerators))[0]


def place(plugin: PlacementPlugin, state: State, spec: JobSpec) -> Placed:
    """Ask the plugin, checking on the way that it did not touch the state."""
    before = (state.version, state.dump())
    placed = plugin.place(state, spec, request_of(state, spec))
    assert (state.version, state.dump()) == before
    return placed


def nodes(placed: Placed) -> list[str]:
    assert placed.status.ok, placed.status.reason
    return [p.node for p in placed.placements]


def observed(*shapes: tuple[int, int]) -> Fgd:
    """fgd after seeing (workers, gpus per worker) requests."""
    return FGD.observe([Request(H100, "gpus", w, gpus_per_worker=g) for w, g in shapes])


# -- whole GPUs: which node ---------------------------------------------------------------


def test_binpack_puts_a_worker_on_the_fullest_node_that_still_fits_it() -> None:
    _, state = cluster(*leaves(3))
    hold(state, "h-1", range(5))  # 3 free
    hold(state, "h-2", range(7))  # 1 free: too few
    placed = place(BINPACK, state, job("j", gpus=2))
    assert [(p.node, p.gpus) for p in placed.placements] == [("h-1", (5, 6))]


def test_spread_puts_a_worker_on_the_emptiest_node() -> None:
    _, state = cluster(*leaves(3))
    hold(state, "h-0", range(5))
    hold(state, "h-2", range(7))
    placed = place(SPREAD, state, job("j", gpus=2))
    assert [(p.node, p.gpus) for p in placed.placements] == [("h-1", (0, 1))]


def test_spread_sends_each_worker_of_a_gang_to_the_then_emptiest_node() -> None:
    _, state = cluster(*leaves(3))
    hold(state, "h-2", [0, 1])  # 6 free
    assert nodes(place(SPREAD, state, job("g", gpus=4, workers=2))) == ["h-0", "h-1"]
    assert nodes(place(BINPACK, state, job("g", gpus=4, workers=2))) == ["h-2", "h-0"]


def test_binpack_fills_a_node_before_opening_the_next() -> None:
    _, state = cluster(*leaves(2))
    placed = place(BINPACK, state, job("g", gpus=2, workers=4))
    assert [(p.node, p.gpus) for p in placed.placements] == [
        ("h-0", (0, 1)),
        ("h-0", (2, 3)),
        ("h-0", (4, 5)),
        ("h-0", (6, 7)),
    ]


# -- fgd: fragmentation, not fullness ----------------------------------------------------


def test_fgd_keeps_a_whole_8_gpu_node_free_when_the_workload_is_8_gpu_jobs() -> None:
    # h-0: an idle 8-GPU node; w-0: a 16-GPU node with 9 free. One GPU is asked for.
    _, state = cluster(*leaves(1), *leaves(1, gpus=16, group="w"))
    hold(state, "w-0", range(7))
    one = job("one", gpus=1)
    # binpack takes the node with fewer free GPUs and breaks the only idle 8-GPU node ...
    assert nodes(place(BINPACK, state, one)) == ["h-0"]
    # ... fgd, told the workload is 8-GPU jobs, takes the 9th free GPU of w-0, which no
    # 8-GPU job could use anyway: ΔF(h-0) = +7 GPUs of fragments, ΔF(w-0) = 0.
    eights = observed((3, 8))
    assert nodes(place(eights, state, one)) == ["w-0"]
    assert eights.fragmentation_gpus(state, "h-0") == 0
    # told it is 1-GPU jobs, nothing is ever fragmented, so the tie goes by node order
    assert nodes(place(observed((5, 1)), state, one)) == ["h-0"]

    def eight_gpu_holes_after(plugin: PlacementPlugin) -> int:
        (p,) = place(plugin, state, one).placements
        with state.branch() as b:
            b.allocate("one", *p.claims())
            return sum(b.free_gpus(n) // 8 for n in b.nodes_with_free(H100, 8))

    assert eight_gpu_holes_after(BINPACK) == 1
    assert eight_gpu_holes_after(eights) == 2


def test_fgd_leaves_pairs_whole_when_the_workload_is_2_gpu_jobs() -> None:
    _, state = cluster(*leaves(2))
    hold(state, "h-0", range(6))  # 2 free
    hold(state, "h-1", range(5))  # 3 free
    one = job("one", gpus=1)
    assert nodes(place(BINPACK, state, one)) == ["h-0"]  # leaves 1 + 3: one pair
    assert nodes(place(observed((1, 2)), state, one)) == ["h-1"]  # leaves 2 + 2: two pairs
    assert nodes(place(FGD, state, one)) == ["h-1"]  # the uniform prior agrees


def test_fgd_updates_its_own_copy_of_the_free_counts_between_workers_of_a_gang() -> None:
    _, state = cluster(*leaves(2))
    for n in ("h-0", "h-1"):
        hold(state, n, range(5))  # 3 free each
    gang = job("g", gpus=1, workers=2)
    # the first worker makes h-0 odd; the second then fragments less on h-1
    assert nodes(place(observed((1, 2)), state, gang)) == ["h-0", "h-1"]
    assert nodes(place(BINPACK, state, gang)) == ["h-0", "h-0"]


def test_fgd_observes_shape_popularity_weighted_by_workers() -> None:
    assert FGD.distribution == {Shape("gpus", gpus=k): 0.25 for k in PRIOR_GPUS}
    assert FGD.observe([]).distribution == FGD.distribution
    learnt = FGD.observe(
        [
            Request(H100, "gpus", 3, gpus_per_worker=8),
            Request(H100, "fraction", 1, eighths=2),
            Request(A100, "mig", 1, mig_profile="3g.40gb"),
        ]
    )
    assert learnt.distribution == {
        Shape("gpus", gpus=8): 0.6,
        Shape("fraction", milli=250): 0.2,
        Shape("mig", mig_profile="3g.40gb"): 0.2,
    }
    assert FGD.distribution == {Shape("gpus", gpus=k): 0.25 for k in PRIOR_GPUS}  # unchanged
    assert str(Shape("fraction", milli=250)) == "250/1000 of a GPU"


def test_binpack_and_spread_observe_nothing() -> None:
    reqs = [Request(H100, "gpus", 1, gpus_per_worker=8)]
    assert BINPACK.observe(reqs) is BINPACK
    assert SPREAD.observe(reqs) is SPREAD


# -- gangs: all or nothing ---------------------------------------------------------------


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_4x8_gang_on_3_free_nodes_waits_and_says_how_many_workers_fit(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(*leaves(4))
    hold(state, "h-3", [0])
    placed = place(plugin, state, job("pretrain", gpus=8, workers=4))
    assert placed.placements == ()
    assert placed.status.code == "wait"
    assert placed.status.plugin == plugin.name
    assert placed.status.reason == (
        "waiting: room for 3 of 4 workers of 8 h100-sxm5-80gb GPUs on single nodes "
        "(31 free h100-sxm5-80gb GPUs in all)"
    )


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_gang_that_fits_exactly_takes_every_free_gpu(plugin: PlacementPlugin) -> None:
    _, state = cluster(*leaves(3))
    hold(state, "h-1", range(4))
    placed = place(plugin, state, job("g", gpus=4, workers=5))
    got = sorted((p.node, g) for p in placed.placements for g in p.gpus)
    assert got == sorted((n, g) for n in ("h-0", "h-1", "h-2") for g in state.free_gpu_ids(n))


# -- required topology -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (BINPACK, ["h-1", "h-1"]),  # tightest leaf first
        (SPREAD, ["h-2", "h-3"]),  # emptiest leaf, then emptiest nodes
        (FGD, ["h-1", "h-1"]),  # both leaves add no fragments; tie: tightest leaf
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_required_leaf_keeps_every_worker_in_one_leaf(
    plugin: PlacementPlugin, expected: list[str]
) -> None:
    _, state = cluster(*leaves(2, 2))  # l1: h-0, h-1; l2: h-2, h-3
    hold(state, "h-0", range(8))
    spec = job("g", gpus=4, workers=2, topology={"required": "leaf"})
    assert nodes(place(plugin, state, spec)) == expected


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_required_leaf_too_small_everywhere_waits_with_the_closest_leaf(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(*leaves(2, 2))
    hold(state, "h-0", range(4))
    hold(state, "h-2", range(4))
    placed = place(plugin, state, job("g", gpus=8, workers=2, topology={"required": "leaf"}))
    assert placed.placements == ()
    assert placed.status.reason == (
        "waiting: no leaf has 16 free h100-sxm5-80gb GPUs for 2×8 (most free in one leaf: "
        "12; at most 1 of 2 workers fit in one leaf)"
    )


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_required_leaf_with_enough_but_scattered_gpus_says_fragmented(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(*leaves(2))
    hold(state, "h-0", range(4))
    hold(state, "h-1", range(4))
    placed = place(plugin, state, job("g", gpus=8, topology={"required": "leaf"}))
    assert placed.status.code == "wait"
    assert "free GPUs are fragmented" in placed.status.reason
    assert "at most 0 of 1 workers fit in one leaf" in placed.status.reason


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_required_level_unknown_to_the_cluster_is_unschedulable(plugin: PlacementPlugin) -> None:
    _, state = cluster(*leaves(1))
    placed = place(plugin, state, job("g", gpus=1, topology={"required": "rack"}))
    assert placed.status.code == "unschedulable"
    assert "topology level 'rack' is not in this cluster" in placed.status.reason


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_required_group_ignores_nodes_of_another_accelerator(plugin: PlacementPlugin) -> None:
    # one leaf holding an idle A100 node and an H100 node with 4 free
    _, state = cluster(*leaves(1, acc=A100, group="a"), *leaves(1))
    hold(state, "h-0", range(4))
    spec = job("g", gpus=4, workers=2, accelerators=[H100], topology={"required": "leaf"})
    placed = place(plugin, state, spec)
    assert placed.status.code == "wait"
    assert "at most 1 of 2 workers" in placed.status.reason


# -- spot --------------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_job_that_may_not_use_spot_skips_the_otherwise_preferred_spot_node(
    plugin: PlacementPlugin,
) -> None:
    c, state = cluster(*leaves(1, capacity="spot", group="s"), *leaves(1, group="h"))
    hold(state, "s-0", range(6))  # binpack (and fgd) would prefer s-0 ...
    hold(state, "h-0", range(1))  # ... and spread too
    chat = job("chat", kind="inference", gpus=2)
    assert not chat.spot_ok
    assert plugin.filter_node(chat, c.node("s-0")).code == "unschedulable"
    assert nodes(place(plugin, state, chat)) == ["h-0"]
    train = job("train", kind="training", gpus=2, checkpoint_interval_s=600)
    assert nodes(place(plugin, state, train)) == ["s-0" if plugin is not SPREAD else "h-0"]


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_only_spot_capacity_left_waits_and_says_spot_is_excluded(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(*leaves(1, capacity="spot", group="s"))
    placed = place(plugin, state, job("chat", kind="inference", gpus=1))
    assert placed.status.code == "wait"
    assert placed.status.reason.endswith("; spot nodes excluded (this job may not run on spot)")


# -- fractions ---------------------------------------------------------------------------


def _shared_gpus() -> State:
    """One fraction node: gpu0 has 625/1000 free, gpu1 500/1000, gpu2 is idle."""
    _, state = cluster(*leaves(1, gpus=3, fractions=True))
    state.allocate("a", Share("h-0", 0, 375))
    state.allocate("b", Share("h-0", 1, 500))
    return state


@pytest.mark.parametrize(
    ("plugin", "gpu"),
    [
        (BINPACK, 1),  # the fullest GPU with room: 500 -> 375, no longer fits a half
        (SPREAD, 2),  # the emptiest: the idle GPU
        # half-GPU workload: gpu1 would drop below a half (+375 of fragments);
        # gpu0 (625 -> 500) still fits one, and ties gpu2 on node order
        (FGD.observe([Request(H100, "fraction", 1, eighths=4)]), 0),
    ],
    ids=["binpack", "spread", "fgd"],
)
def test_a_fraction_goes_to_the_gpu_each_plugin_scores_best(
    plugin: PlacementPlugin, gpu: int
) -> None:
    state = _shared_gpus()
    placed = place(plugin, state, job("nb", gpu_fraction=0.125))
    assert placed.placements == (Placement("h-0", gpu=gpu, milli=125),)


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_fraction_too_big_for_every_shared_gpu_waits(plugin: PlacementPlugin) -> None:
    _, state = cluster(*leaves(1, gpus=1, fractions=True))
    state.allocate("a", Share("h-0", 0, 625))
    placed = place(plugin, state, job("nb", gpu_fraction=0.5))
    assert placed.status.reason == "waiting: no h100-sxm5-80gb GPU has 500/1000 free to share"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_fraction_never_lands_on_spot_for_a_job_that_may_not_use_it(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(*leaves(1, gpus=1, fractions=True, capacity="spot", group="s"))
    placed = place(plugin, state, job("nb", kind="inference", gpu_fraction=0.25))
    assert "spot capacity" in placed.status.reason


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_fraction_skips_spot_gpus_and_takes_the_best_on_demand_one(
    plugin: PlacementPlugin,
) -> None:
    # the spot node's GPUs are the emptiest and the fullest; only h-0 may be used
    _, state = cluster(
        *leaves(1, gpus=2, fractions=True, capacity="spot", group="s"),
        *leaves(1, gpus=2, fractions=True),
    )
    state.allocate("a", Share("s-0", 0, 750))
    state.allocate("b", Share("h-0", 0, 250))
    state.allocate("c", Share("h-0", 1, 500))
    placed = place(plugin, state, job("nb", kind="inference", gpu_fraction=0.25))
    (p,) = placed.placements
    # fgd under the prior (whole-GPU shapes only): either GPU strands the same; node order
    assert (p.node, p.gpu) == ("h-0", 1 if plugin is BINPACK else 0)


def test_fgd_prefers_whole_gpu_nodes_without_fractions_when_fractions_are_popular() -> None:
    # taking a whole GPU of the fraction node removes capacity quarter-GPU jobs could use
    _, state = cluster(*leaves(1, fractions=True, group="f"), *leaves(1, group="h"))
    quarters = FGD.observe([Request(H100, "fraction", 1, eighths=2)])
    assert nodes(place(quarters, state, job("j", gpus=1))) == ["h-0"]
    assert nodes(place(BINPACK, state, job("j", gpus=1))) == ["f-0"]


# -- MIG ---------------------------------------------------------------------------------

SEVEN_SMALL = (("1g.10gb", 7),)
ONE_BIG_FOUR_SMALL = (("3g.40gb", 1), ("1g.10gb", 4))
THREE_SLICES = (("3g.40gb", 1), ("2g.20gb", 2))


def _mig_nodes(*layouts: tuple[tuple[str, int], ...]) -> tuple[Cluster, State]:
    return cluster(
        *(Node(f"a-{i}", A100, 1, ("b1", "l1"), mig=(lay,)) for i, lay in enumerate(layouts))
    )


def test_fgd_takes_a_slice_of_a_used_mig_gpu_and_keeps_the_idle_one_re_layoutable() -> None:
    _, state = _mig_nodes(SEVEN_SMALL, ONE_BIG_FOUR_SMALL)
    state.allocate("x", MigSlice("a-0/gpu0/mig:1g.10gb#0"))  # a-0: 6 free, a-1: 5 free, idle
    small = job("s", mig_profile="1g.10gb")
    # binpack counts free slices and breaks the idle GPU
    assert place(BINPACK, state, small).placements[0].mig_slices == ("a-1/gpu0/mig:1g.10gb#0",)
    # fgd: on the used GPU nothing new is stranded; on the idle one the 3g slice would be
    # left fixed, a fragment for 1g jobs
    learnt = FGD.observe([Request(A100, "mig", 1, mig_profile="1g.10gb")])
    for plugin in (learnt, FGD):  # without MIG shapes observed: the request's own profile
        assert place(plugin, state, small).placements[0].mig_slices == ("a-0/gpu0/mig:1g.10gb#1",)


@pytest.mark.parametrize(
    ("plugin", "slice_"),
    [
        (BINPACK, "a-0/gpu0/mig:3g.40gb#0"),  # the GPU with the fewest free slices
        (SPREAD, "a-1/gpu0/mig:3g.40gb#0"),  # the node with the most free slices
        (FGD, "a-0/gpu0/mig:3g.40gb#0"),  # a used GPU adds no fragments
    ],
    ids=["binpack", "spread", "fgd"],
)
def test_a_mig_slice_goes_where_each_plugin_scores_best(
    plugin: PlacementPlugin, slice_: str
) -> None:
    _, state = _mig_nodes(THREE_SLICES, THREE_SLICES)
    state.allocate("x", MigSlice("a-0/gpu0/mig:2g.20gb#0"))
    (p,) = place(plugin, state, job("chat", kind="inference", mig_profile="3g.40gb")).placements
    assert (p.node, p.mig_slices) == (slice_.partition("/")[0], (slice_,))


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_mig_slices_run_out_and_the_reason_names_the_profile(plugin: PlacementPlugin) -> None:
    _, state = _mig_nodes(THREE_SLICES)
    state.allocate("x", MigSlice("a-0/gpu0/mig:3g.40gb#0"))
    placed = place(plugin, state, job("chat", mig_profile="3g.40gb"))
    assert placed.status.reason == "waiting: no free 3g.40gb MIG slice on a100-sxm4-80gb"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_mig_slices_on_spot_only_wait_for_a_job_that_may_not_use_spot(
    plugin: PlacementPlugin,
) -> None:
    _, state = cluster(Node("a-0", A100, 1, ("b1", "l1"), capacity="spot", mig=(THREE_SLICES,)))
    placed = place(plugin, state, job("chat", kind="inference", mig_profile="3g.40gb"))
    assert "spot capacity" in placed.status.reason


# -- purity --------------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_placing_never_changes_the_state_a_snapshot_stays_current(plugin: PlacementPlugin) -> None:
    _, state = cluster(
        *leaves(2, fractions=True), Node("a-0", A100, 1, ("b1", "l1"), mig=(THREE_SLICES,))
    )
    hold(state, "h-0", range(3))
    state.allocate("s", Share("h-1", 0, 250))
    snap = state.snapshot()
    specs = [
        job("g", gpus=2, workers=3, accelerators=[H100]),
        job("r", gpus=4, workers=2, accelerators=[H100], topology={"required": "leaf"}),
        job("f", gpu_fraction=0.25, accelerators=[H100]),
        job("m", mig_profile="2g.20gb", accelerators=[A100]),
    ]
    for spec in specs:
        assert plugin.place(snap, spec, request_of(snap, spec)).status.ok
        assert snap.current


# -- property ------------------------------------------------------------------------------

PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
CAPACITIES: list[Capacity] = ["on-demand", "reserved", "spot"]


@st.composite
def busy_states(draw: st.DrawFn) -> State:
    """1-9 nodes over 1-3 leaves: H100 and A100 nodes (some taking fractions) and MIG A100s,
    any of them spot, with random whole GPUs, shares and slices already held."""
    nodes: list[Node] = []
    fractions_on = draw(st.sampled_from(["some", "all", "none"]))
    for leaf in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 3))):
            name = f"n{len(nodes)}"
            path = ("b1", f"l{leaf}")
            capacity = draw(st.sampled_from(CAPACITIES))
            kind = draw(st.sampled_from(["h100", "h100", "a100-mig", "a100-mig", "a100"]))
            if kind == "a100-mig":
                lays = st.sampled_from([SEVEN_SMALL, ONE_BIG_FOUR_SMALL, THREE_SLICES])
                layouts = tuple(draw(lays) for _ in range(2))
                nodes.append(Node(name, A100, 2, path, capacity=capacity, mig=layouts))
            else:
                acc = H100 if kind == "h100" else A100
                gpus = draw(st.sampled_from([2, 4, 8]))
                fractions = fractions_on == "all" or (
                    fractions_on == "some" and draw(st.booleans())
                )
                nodes.append(Node(name, acc, gpus, path, capacity=capacity, fractions=fractions))
    state = State(Cluster(("block", "leaf", "node"), tuple(nodes)))
    for node in nodes:
        if node.mig:
            free = list(state.free_slices_on(node.name))
            for sid in draw(st.lists(st.sampled_from(free), unique=True)):
                state.allocate(f"x-{sid}", MigSlice(sid))
            continue
        held = draw(st.lists(st.integers(0, node.gpus - 1), unique=True, max_size=node.gpus))
        if held:
            state.allocate(f"x-{node.name}", Whole(node.name, tuple(sorted(held))))
        if node.fractions:
            for g in sorted(set(range(node.gpus)) - set(held)):
                eighths = draw(st.sampled_from([0, 0, 0, 1, 2, 4, 6, 8]))
                if eighths:
                    state.allocate(f"s-{node.name}-{g}", Share(node.name, g, eighths * 125))
    return state


@st.composite
def asks(draw: st.DrawFn) -> tuple[JobSpec, Request]:
    """A job (any kind, maybe spot-tolerant, maybe a required level) and its request."""
    base: dict[str, Any] = {"name": "j", "team": "t"}
    base["kind"] = draw(st.sampled_from(["training", "inference", "batch"]))
    if draw(st.booleans()):
        base["checkpoint_interval_s"] = 600
    what = draw(st.sampled_from(["gpus", "gpus", "fraction", "mig"]))
    acc = draw(st.sampled_from([H100, H100, A100]))
    request: Request
    if what == "gpus":
        per, workers = draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(1, 4))
        base |= {"gpus": per, "workers": workers}
        level = draw(st.sampled_from([None, None, "leaf", "node", "block"]))
        if level:
            base["topology"] = {"required": level}
        request = Request(acc, "gpus", workers, gpus_per_worker=per)
    elif what == "fraction":
        eighths = draw(st.sampled_from([1, 2, 4, 7]))
        base["gpu_fraction"] = eighths / 8
        request = Request(acc, "fraction", 1, eighths=eighths)
    else:
        profile = draw(st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb", "3g.40gb", "7g.80gb"]))
        base["mig_profile"] = profile
        request = Request(A100, "mig", 1, mig_profile=profile)
    return JobSpec.model_validate(base), request


SEEN = st.lists(
    st.one_of(
        st.builds(
            lambda w, g: Request(H100, "gpus", w, gpus_per_worker=g),
            st.integers(1, 3),
            st.sampled_from([1, 2, 3, 4, 8, 16]),
        ),
        st.builds(lambda e: Request(H100, "fraction", 1, eighths=e), st.integers(1, 8)),
        st.builds(lambda p: Request(A100, "mig", 1, mig_profile=p), st.sampled_from(PROFILES)),
    ),
    max_size=6,
)
ANY_PLUGIN: st.SearchStrategy[PlacementPlugin] = st.one_of(
    st.sampled_from(PLUGINS), SEEN.map(FGD.observe)
)


def _may_use(spec: JobSpec, node: Node, acc: str) -> bool:
    return node.accelerator == acc and (node.capacity != "spot" or spec.spot_ok)


def _feasible(state: State, spec: JobSpec, request: Request) -> bool:
    """Brute force: could any complete placement exist?"""
    c = state.cluster
    acc = request.accelerator
    allowed = [n for n in c.nodes if _may_use(spec, n, acc)]
    if request.kind == "mig":
        return any(
            c.slice_info(sid).profile == request.mig_profile
            for n in allowed
            for sid in state.free_slices_on(n.name)
        )
    if request.kind == "fraction":
        milli = request.eighths * MILLI_PER_EIGHTH
        return any(state.free_milli(n.name, g) >= milli for n in allowed for g in range(n.gpus))
    per = request.gpus_per_worker
    level = spec.topology.required
    groups: dict[str, list[Node]] = {}
    for n in allowed:
        groups.setdefault(c.group_of(n.name, level) if level else "", []).append(n)
    return any(
        sum(state.free_gpus(n.name) // per for n in members) >= request.workers
        for members in groups.values()
    )


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(busy_states(), asks(), ANY_PLUGIN)
def test_every_placement_uses_only_free_capacity_and_is_complete(
    state: State, ask: tuple[JobSpec, Request], plugin: PlacementPlugin
) -> None:
    spec, request = ask
    c = state.cluster
    before = (state.version, state.dump())
    placed = plugin.place(state, spec, request)
    assert (state.version, state.dump()) == before

    assert placed.status.ok == _feasible(state, spec, request)
    if not placed.status.ok:
        assert placed.placements == ()
        if placed.status.code == "unschedulable":  # a share or a slice no GPU can ever give
            assert placed.status.reason.startswith("cannot run: ")
            same = [n for n in c.nodes if n.accelerator == request.accelerator]
            if request.kind == "fraction":
                assert not any(n.fractions for n in same)
            else:
                assert request.kind == "mig"
                assert not any(any(n.mig) for n in same)
            return
        assert placed.status.code == "wait"
        assert placed.status.reason.startswith("waiting: ")
        assert placed.status.plugin == plugin.name
        return

    for p in placed.placements:
        assert _may_use(spec, c.node(p.node), request.accelerator)
    if request.kind == "gpus":
        assert len(placed.placements) == request.workers
        used = [(p.node, g) for p in placed.placements for g in p.gpus]
        assert len(used) == len(set(used)) == request.total_gpus
        for p in placed.placements:
            assert len(p.gpus) == request.gpus_per_worker
            assert set(p.gpus) <= set(state.free_gpu_ids(p.node))
            assert not p.mig_slices
            assert p.gpu is None
            assert not p.milli
        level = spec.topology.required
        if level:
            assert len({c.group_of(p.node, level) for p in placed.placements}) == 1
    elif request.kind == "fraction":
        (p,) = placed.placements
        assert p.gpu is not None
        assert p.milli == request.eighths * MILLI_PER_EIGHTH
        assert state.free_milli(p.node, p.gpu) >= p.milli
    else:
        (p,) = placed.placements
        (sid,) = p.mig_slices
        assert sid in set(state.free_slices(request.accelerator, request.mig_profile or ""))
        assert c.slice_info(sid).node == p.node
    with state.branch() as b:  # the whole answer lands at once on the state as it is
        b.allocate(spec.name, *[claim for p in placed.placements for claim in p.claims()])


Score = Callable[[Branch, str, tuple[int, ...]], float]


def _greedy_by_hand(
    state: State, spec: JobSpec, request: Request, score: Score
) -> list[tuple[str, tuple[int, ...]]] | None:
    """Reference: each worker in turn to the allowed node of least `score(branch, node, gpus)`
    over every node of the cluster, ties by node order, allocating as it goes."""
    c = state.cluster
    per = request.gpus_per_worker
    out: list[tuple[str, tuple[int, ...]]] = []
    with state.branch() as b:
        for w in range(request.workers):
            best: tuple[float, int, str, tuple[int, ...]] | None = None
            for i, node in enumerate(c.nodes):
                if not _may_use(spec, node, request.accelerator) or b.free_gpus(node.name) < per:
                    continue
                gpus = b.free_gpu_ids(node.name)[:per]
                key = (score(b, node.name, gpus), i, node.name, gpus)
                if best is None or key < best:
                    best = key
            if best is None:
                return None
            b.allocate(f"w{w}", Whole(best[2], best[3]))
            out.append((best[2], best[3]))
    return out


def _fgd_added(plugin: Fgd) -> Score:
    """ΔF_n of one worker, measured on the state itself through a nested what-if."""

    def added(b: Branch, node: str, gpus: tuple[int, ...]) -> float:
        before = plugin.fragmentation_gpus(b, node)
        with b.branch() as trial:
            trial.allocate("trial", Whole(node, gpus))
            after = plugin.fragmentation_gpus(trial, node)
        return round(after - before, 9)

    return added


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(busy_states(), st.integers(1, 5), st.sampled_from([1, 2, 4]), SEEN, st.booleans())
def test_spread_and_fgd_choose_as_a_worker_by_worker_greedy_over_every_node_would(
    state: State, workers: int, per: int, seen: list[Request], spot_ok: bool
) -> None:
    spec = job("g", gpus=per, workers=workers, kind="batch", allow_spot=spot_ok)
    request = Request(H100, "gpus", workers, gpus_per_worker=per)
    fgd = FGD.observe(seen)
    cases: list[tuple[PlacementPlugin, Score]] = [
        (SPREAD, lambda b, node, gpus: -b.free_gpus(node)),
        (fgd, _fgd_added(fgd)),
    ]
    for plugin, score in cases:
        placed = plugin.place(state, spec, request)
        expected = _greedy_by_hand(state, spec, request, score)
        got = [(p.node, p.gpus) for p in placed.placements] if placed.status.ok else None
        assert got == expected, plugin.name


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(busy_states(), st.sampled_from([1, 2, 3, 4, 7]), SEEN, st.booleans())
def test_each_plugin_puts_a_share_where_a_scan_of_every_gpu_would(
    state: State, eighths: int, seen: list[Request], spot_ok: bool
) -> None:
    c = state.cluster
    milli = eighths * MILLI_PER_EIGHTH
    spec = job("f", gpu_fraction=eighths / 8, kind="batch", allow_spot=spot_ok)
    request = Request(H100, "fraction", 1, eighths=eighths)
    fgd = FGD.observe(seen)

    def added(node: str, gpu: int) -> float:
        before = fgd.fragmentation_gpus(state, node)
        with state.branch() as trial:
            trial.allocate("trial", Share(node, gpu, milli))
            return round(fgd.fragmentation_gpus(trial, node) - before, 9)

    scores: list[tuple[PlacementPlugin, Callable[[str, int], float]]] = [
        (BINPACK, state.free_milli),
        (SPREAD, lambda n, g: -state.free_milli(n, g)),
        (fgd, added),
    ]
    room = [
        (n.name, g)
        for n in c.nodes
        if _may_use(spec, n, H100)
        for g in range(n.gpus)
        if state.free_milli(n.name, g) >= milli
    ]
    for plugin, score in scores:
        placed = plugin.place(state, spec, request)
        best = min(room, key=lambda ng: (score(*ng), c.gpu_id(*ng)), default=None)
        got = (placed.placements[0].node, placed.placements[0].gpu) if placed.status.ok else None
        assert got == best, plugin.name
