"""Cluster state scenarios: expansion from a spec, allocate/release, illegal moves, branches."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from gpufleet.cluster import (
    MILLI,
    AllocationError,
    BranchError,
    Cluster,
    InvalidClusterError,
    MigSlice,
    Node,
    Share,
    StaleViewError,
    State,
    Whole,
    expand_group,
    to_milli,
)
from gpufleet.cluster.bench import bench_allocate_release
from gpufleet.errors import UnknownNameError
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.kinds import load_spec

EXAMPLES = Path(__file__).parents[2] / "examples"
H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def lab() -> Cluster:
    """Two leaves of H100 in block b1, MIG A100s and fractional L4s in block b2."""
    spec = ClusterSpec.model_validate(
        {
            "topology_levels": ["block", "leaf", "node"],
            "node_groups": [
                {
                    "name": "h100",
                    "count": 4,
                    "accelerator": H100,
                    "topology": {"block": "b1", "leaf": ["l1", "l2"]},
                    "capacity": "reserved",
                    "labels": {"pool": "train"},
                },
                {
                    "name": "a100",
                    "count": 2,
                    "accelerator": A100,
                    "topology": "b2/l3",
                    "mig_layout": "all-balanced",
                },
                {
                    "name": "l4",
                    "count": 2,
                    "accelerator": "l4",
                    "gpus_per_node": 4,
                    "topology": "b2/l4",
                    "capacity": "spot",
                    "fractions": True,
                },
            ],
        }
    )
    return Cluster.from_spec(spec)


@pytest.fixture
def state() -> State:
    return State(lab())


# -- the cluster description ---------------------------------------------------------------


def test_from_spec_names_nodes_and_spreads_them_over_listed_leaves() -> None:
    c = lab()
    assert [n.name for n in c.nodes[:4]] == ["h100-0", "h100-1", "h100-2", "h100-3"]
    assert [n.path for n in c.nodes[:4]] == [("b1", "l1")] * 2 + [("b1", "l2")] * 2
    assert c.groups("leaf") == ("b1/l1", "b1/l2", "b2/l3", "b2/l4")
    assert c.groups("block") == ("b1", "b2")
    assert c.group_of("a100-1", "leaf") == "b2/l3"
    assert c.group_of("a100-1", "node") == "a100-1"
    h = c.node("h100-0")
    assert (h.capacity, dict(h.labels), h.fractions) == ("reserved", {"pool": "train"}, False)
    assert c.node("l4-1").capacity == "spot"
    assert c.gpu_count == 4 * 8 + 2 * 8 + 2 * 4


def test_example_cluster_files_expand() -> None:
    for name in ("cluster.yaml", "sched-cluster.yaml"):
        spec = load_spec(EXAMPLES / name)
        assert isinstance(spec, ClusterSpec)
        c = Cluster.from_spec(spec)
        assert c.gpu_count == spec.total_gpus
        assert State(c).free_total(H100) == sum(
            g.count * g.gpus_per_node for g in spec.node_groups if g.accelerator == H100
        )


def test_mig_slices_are_enumerated_with_readable_ids() -> None:
    c = lab()
    ids = [s for s in c.slices() if s.startswith("a100-0/gpu5/")]
    assert ids == [
        "a100-0/gpu5/mig:1g.10gb#0",
        "a100-0/gpu5/mig:1g.10gb#1",
        "a100-0/gpu5/mig:2g.20gb#0",
        "a100-0/gpu5/mig:3g.40gb#0",
    ]
    info = c.slice_info("a100-0/gpu5/mig:3g.40gb#0")
    assert (info.node, info.gpu, info.profile, info.index) == ("a100-0", 5, "3g.40gb", 0)
    assert (info.compute_slices, info.memory_bytes) == (3, 40 * 10**9)
    for bad in ("a100-0/gpu5/mig:3g.40gb#1", "a100-0/gpu9/mig:3g.40gb#0", "h100-0/gpu0/mig:x#0"):
        with pytest.raises(UnknownNameError):
            c.slice_index(bad)


def test_node_is_one_scaleup_domain_by_default() -> None:
    c = lab()
    assert c.domain_of("h100-2", 7) == "h100-2"
    assert len(c.domain_members("h100-2")) == 8


def test_domains_that_are_nodes_are_answered_from_the_node_index() -> None:
    # each H100 node is one NVLink domain: the state keeps no second copy of its counters
    c = lab()
    assert c.domains_are_nodes(H100)
    s = State(c)
    s.allocate("j", Whole("h100-1", (0, 1, 2)))
    assert s.free_in_domain("h100-1") == s.free_gpus("h100-1") == 5
    assert s.worker_room_in_domain("h100-1", 2) == 2
    assert list(s.domains_with_free(H100, 6)) == list(s.nodes_with_free(H100, 6))
    s.release_all("j")
    assert s.free_in_domain("h100-1") == 8


def test_nvl72_domain_spans_eighteen_four_gpu_nodes() -> None:
    nodes = expand_group("gb", "gb200", 4, [("r1",)] * 20, domain_gpus=72)
    c = Cluster(("rack", "node"), tuple(nodes))
    assert c.domain_of("gb-0", 0) == c.domain_of("gb-17", 3) == "gb/nvl0"
    assert c.domain_of("gb-18", 0) == "gb/nvl1"
    assert len(c.domain_members("gb/nvl0")) == 72
    assert State(c).free_in_domain("gb/nvl1") == 8


def test_multi_node_domain_never_straddles_two_leaves() -> None:
    paths = [("l1",)] * 3 + [("l2",)] * 3
    c = Cluster(("leaf", "node"), tuple(expand_group("gb", "gb200", 4, paths, domain_gpus=16)))
    assert [c.domain_of(f"gb-{i}", 0) for i in range(6)] == [
        "gb/nvl0",
        "gb/nvl0",
        "gb/nvl0",
        "gb/nvl1",
        "gb/nvl1",
        "gb/nvl1",
    ]


def test_pcie_cards_form_nvlink_pairs_inside_a_node() -> None:
    spec = ClusterSpec.model_validate(
        {"node_groups": [{"name": "p", "count": 1, "accelerator": "h100-pcie-80gb"}]}
    )
    c = Cluster.from_spec(spec)
    assert [c.domain_of("p-0", g) for g in range(8)] == [f"p-0/nvl{g // 2}" for g in range(8)]
    s = State(c)
    s.allocate("j", Whole("p-0", (0, 2)))
    assert [s.free_in_domain(f"p-0/nvl{i}") for i in range(4)] == [1, 1, 2, 2]
    assert list(s.domains_with_free("h100-pcie-80gb", 2)) == ["p-0/nvl2", "p-0/nvl3"]
    assert not c.domains_are_nodes("h100-pcie-80gb")  # pairs keep counters of their own


def test_node_group_without_topology_sits_under_placeholder_groups() -> None:
    spec = ClusterSpec.model_validate(
        {"node_groups": [{"name": "x", "count": 2, "accelerator": H100}]}
    )
    c = Cluster.from_spec(spec)
    assert c.groups("leaf") == ("-/-",)


@pytest.mark.parametrize(
    ("levels", "nodes", "message"),
    [
        pytest.param(("leaf",), (Node("a", H100, 8, ()),), "end with 'node'", id="no-node-level"),
        pytest.param(
            ("leaf", "leaf", "node"), (Node("a", H100, 8, ("x", "y")),), "repeat", id="level-twice"
        ),
        pytest.param(
            ("leaf", "node"),
            (Node("a", H100, 8, ("l",)), Node("a", H100, 8, ("l",))),
            "used twice",
            id="duplicate-node",
        ),
        pytest.param(("leaf", "node"), (Node("a", H100, 8, ()),), "expected 1", id="short-path"),
        pytest.param(
            ("node",),
            (
                Node("a", H100, 2, (), domains=("d", "d")),
                Node("b", A100, 2, (), domains=("d", "d")),
            ),
            "mixes",
            id="domain-mixes-accelerators",
        ),
        pytest.param(
            ("node",),
            (Node("a", A100, 1, (), mig=((("3g.40gb", 3),),)),),
            "at most 2 fit",
            id="mig-layout-too-big",
        ),
        pytest.param(
            ("node",),
            (Node("a", A100, 1, (), mig=((("3G.40GB", 1),),)),),
            "canonical",
            id="mig-profile-spelling",
        ),
    ],
)
def test_invalid_clusters_are_refused(
    levels: tuple[str, ...], nodes: tuple[Node, ...], message: str
) -> None:
    with pytest.raises(InvalidClusterError, match=message):
        Cluster(levels, nodes)


def test_node_checks_per_gpu_lists() -> None:
    with pytest.raises(InvalidClusterError, match="domains lists 1 GPUs"):
        Node("a", H100, 2, (), domains=("d",))
    with pytest.raises(InvalidClusterError, match="gpus must be >= 1"):
        Node("a", H100, 0, ())


# -- whole GPUs and the indexes ------------------------------------------------------------


def test_allocate_and_release_whole_gpus_keep_every_index_in_step(state: State) -> None:
    assert state.free_total(H100) == 32
    assert state.count_nodes_with_free(H100, 8) == 4
    state.allocate("train", Whole("h100-0", (0, 1, 2, 3, 4, 5)), Whole("h100-2", (0,)))
    assert state.free_gpus("h100-0") == 2
    assert state.free_gpu_ids("h100-0") == (6, 7)
    assert list(state.nodes_with_free(H100, 1)) == ["h100-0", "h100-2", "h100-1", "h100-3"]
    assert list(state.nodes_with_free(H100, 8)) == ["h100-1", "h100-3"]
    assert state.free_in_group("leaf", "b1/l1", H100) == 10
    assert state.free_in_group("block", "b1", H100) == 25
    assert state.free_in_group("node", "h100-2", H100) == 7
    assert list(state.groups_with_free("leaf", H100, 11)) == ["b1/l2"]
    assert list(state.groups_with_free("node", H100, 8)) == ["h100-1", "h100-3"]
    assert state.free_in_domain("h100-0") == 2
    assert state.free_total(H100) == 25

    state.release("train", Whole("h100-0", (0, 1, 2, 3, 4, 5)), Whole("h100-2", (0,)))
    assert state.free_total(H100) == 32
    assert state.jobs() == ()
    assert list(state.groups_with_free("leaf", H100, 16)) == ["b1/l1", "b1/l2"]


def test_queries_for_an_accelerator_the_cluster_lacks_are_empty(state: State) -> None:
    assert list(state.nodes_with_free("b200-sxm-192gb", 1)) == []
    assert state.free_in_group("block", "b1", "l4") == 0
    assert list(state.groups_with_free("leaf", "b200-sxm-192gb")) == []
    assert state.count_free_slices(H100, "3g.40gb") == 0


def test_unknown_names_raise_with_suggestions(state: State) -> None:
    with pytest.raises(UnknownNameError, match="unknown node 'h100-O'; did you mean"):
        state.free_gpus("h100-O")
    with pytest.raises(UnknownNameError, match="did you mean 'leaf'"):
        state.free_in_group("leaff", "b1/l1", H100)
    with pytest.raises(UnknownNameError, match="leaf group"):
        state.free_in_group("leaf", "l1", H100)


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        pytest.param((Whole("h100-0", (0,)),), "held by first", id="double-booked-gpu"),
        pytest.param((Whole("h100-1", (0, 0)),), "repeat", id="same-gpu-twice-in-a-claim"),
        pytest.param((Whole("h100-1", (8,)),), "GPUs 0..7", id="gpu-index-out-of-range"),
        pytest.param((Whole("h100-1", ()),), "at least one", id="empty-claim"),
        pytest.param((Whole("a100-0", (0,)),), "MIG-partitioned", id="whole-gpu-of-mig-gpu"),
        pytest.param((Whole("l4-0", (1,)),), "shared by fractions", id="whole-gpu-in-shared-use"),
        pytest.param(
            (MigSlice("a100-0/gpu0/mig:3g.40gb#0"),), "held by first", id="double-booked-slice"
        ),
        pytest.param((Share("l4-0", 1, 800),), "already shared", id="fraction-overflow"),
        pytest.param((Share("l4-0", 0, 1),), "held whole", id="share-of-whole-held-gpu"),
        pytest.param((Share("h100-1", 0, 500),), "does not allow", id="share-on-plain-node"),
        pytest.param((Share("l4-0", 2, 0),), "1..1000", id="zero-share"),
        pytest.param((Share("l4-0", 2, 0.5),), "to_milli", id="float-share"),  # type: ignore[arg-type]
        pytest.param(
            (Whole("h100-1", (0, 1)), Whole("h100-0", (0,))), "held by first", id="gang-half-fits"
        ),
    ],
)
def test_illegal_allocations_raise_and_change_nothing(
    state: State, claims: tuple[Whole | MigSlice | Share, ...], message: str
) -> None:
    state.allocate(
        "first",
        Whole("h100-0", (0,)),
        MigSlice("a100-0/gpu0/mig:3g.40gb#0"),
        Whole("l4-0", (0,)),
        Share("l4-0", 1, 250),
    )
    before, version = state.dump(), state.version
    with pytest.raises(AllocationError, match=message):
        state.allocate("second", *claims)
    assert state.dump() == before
    assert state.version == version
    assert state.free_gpus("h100-1") == 8


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        pytest.param((Whole("h100-0", (1,)),), "held by nobody", id="gpu-never-held"),
        pytest.param((Whole("h100-0", (0,)),), "held by other", id="gpu-of-another-job"),
        pytest.param((MigSlice("a100-0/gpu0/mig:1g.10gb#0"),), "nobody", id="slice-never-held"),
        pytest.param((Share("l4-0", 1, 500),), "holds 250/1000", id="more-than-the-share"),
        pytest.param(
            (Whole("h100-1", (3,)), Whole("h100-0", (0,))), "held by other", id="half-of-a-gang"
        ),
    ],
)
def test_releasing_what_a_job_does_not_hold_raises(
    state: State, claims: tuple[Whole | MigSlice | Share, ...], message: str
) -> None:
    state.allocate("other", Whole("h100-0", (0,)))
    state.allocate("mine", Whole("h100-1", (3,)), Share("l4-0", 1, 250))
    before = state.dump()
    with pytest.raises(AllocationError, match=message):
        state.release("mine", *claims)
    assert state.dump() == before


def test_job_id_must_be_a_string(state: State) -> None:
    with pytest.raises(AllocationError, match="job id"):
        state.allocate("", Whole("h100-0", (0,)))


# -- MIG slices and fractions ---------------------------------------------------------------


def test_slices_by_profile(state: State) -> None:
    assert state.count_free_slices(A100, "1g.10gb") == 2 * 8 * 2
    first = next(state.free_slices(A100, "3g.40gb"))
    assert first == "a100-0/gpu0/mig:3g.40gb#0"
    state.allocate("chat", MigSlice(first))
    assert state.count_free_slices(A100, "3g.40gb") == 15
    assert next(state.free_slices(A100, "3g.40gb")) == "a100-0/gpu1/mig:3g.40gb#0"
    assert first not in state.free_slices_on("a100-0")
    assert len(state.free_slices_on("a100-0")) == 8 * 4 - 1
    assert state.free_gpus("a100-0") == 0  # MIG GPUs are never free as whole GPUs
    assert state.usage("chat").slices == {(A100, "3g.40gb"): 1}
    state.release_job("chat")
    assert state.count_free_slices(A100, "3g.40gb") == 16


def test_fractions_share_a_gpu_up_to_one(state: State) -> None:
    assert state.free_milli("l4-0", 0) == MILLI
    assert state.free_milli("h100-0", 0) == 0  # fractions not allowed there
    state.allocate("a", Share("l4-0", 0, to_milli(0.25)))
    state.allocate("b", Share("l4-0", 0, to_milli("5/8")))
    assert state.free_milli("l4-0", 0) == 125
    assert state.free_gpus("l4-0") == 3  # a shared GPU is not free as a whole GPU
    assert state.free_in_group("leaf", "b2/l4", "l4") == 7
    # best fit for fractions: the fullest GPU that still has room comes first
    assert next(state.gpus_with_free_milli("l4", 100)) == ("l4-0", 0)
    assert next(state.gpus_with_free_milli("l4", 200)) == ("l4-0", 1)
    state.allocate("a", Share("l4-0", 0, 125))
    assert state.holdings("a").shares == (("l4-0", 0, 375),)
    with pytest.raises(AllocationError, match="already shared"):
        state.allocate("c", Share("l4-0", 0, 1))
    state.release("a", Share("l4-0", 0, 375))
    state.release("b", Share("l4-0", 0, 625))
    assert state.free_gpus("l4-0") == 4
    assert state.jobs() == ()


def test_to_milli_rounds_up_and_is_exact_for_eighths() -> None:
    assert [to_milli(Fraction(k, 8)) for k in range(1, 9)] == [125 * k for k in range(1, 9)]
    assert to_milli(0.1) == 100
    assert to_milli(Fraction(1, 3)) == 334
    assert to_milli(1) == MILLI
    for bad in (0, 1.5, -0.25, True):
        with pytest.raises(ValueError, match="fraction"):
            to_milli(bad)


def test_holdings_round_trip_through_claims(state: State) -> None:
    state.allocate(
        "j",
        Whole("h100-2", (5, 1)),
        Whole("h100-0", (3,)),
        MigSlice("a100-1/gpu2/mig:1g.10gb#1"),
        Share("l4-1", 3, 500),
    )
    held = state.holdings("j")
    assert held.gpus == (("h100-0", 3), ("h100-2", 1), ("h100-2", 5))
    assert held.claims() == (
        Whole("h100-0", (3,)),
        Whole("h100-2", (1, 5)),
        MigSlice("a100-1/gpu2/mig:1g.10gb#1"),
        Share("l4-1", 3, 500),
    )
    state.release("j", *held.claims())
    assert state.holdings("j").empty


def test_usage_by_team(state: State) -> None:
    state.allocate("research/a", Whole("h100-0", (0, 1)))
    state.allocate("research/b", Whole("h100-1", (0,)), Share("l4-0", 0, 250))
    state.allocate("prod/c", MigSlice("a100-0/gpu0/mig:2g.20gb#0"))
    usage = state.usage_by(lambda job: job.split("/")[0])
    assert usage["research"].gpus == {H100: 3}
    assert usage["research"].milli == {"l4": 250}
    assert usage["prod"].slices == {(A100, "2g.20gb"): 1}
    assert state.jobs_on("h100-0") == ("research/a",)
    assert state.jobs_on("l4-0") == ("research/b",)


# -- branches and snapshots ----------------------------------------------------------------


def test_branch_rolls_back_unless_committed(state: State) -> None:
    state.allocate("base", Whole("h100-0", (0,)))
    before, version = state.dump(), state.version
    with state.branch() as b:
        b.allocate("x", Whole("h100-0", (1, 2)), MigSlice("a100-0/gpu0/mig:3g.40gb#0"))
        b.release_job("base")
        b.allocate("y", Share("l4-0", 0, 500))
        assert b.free_gpus("h100-0") == 6
        assert b.changes == 4
    assert state.dump() == before
    assert state.version == version
    assert state.free_gpus("h100-0") == 7

    with state.branch() as b:
        b.allocate("x", Whole("h100-0", (1,)))
        b.commit()
    assert state.holdings("x").gpus == (("h100-0", 1),)


def test_branch_rolls_back_when_the_block_raises(state: State) -> None:
    before = state.dump()

    def failing_what_if() -> None:
        with state.branch() as b:
            b.allocate("x", Whole("h100-0", (1,)))
            raise RuntimeError("policy bug")

    with pytest.raises(RuntimeError, match="policy bug"):
        failing_what_if()
    assert state.dump() == before


def test_nested_commit_merges_into_the_parent_which_can_still_undo_it(state: State) -> None:
    with state.branch() as outer:
        outer.allocate("a", Whole("h100-0", (0,)))
        with outer.branch() as inner:
            inner.allocate("b", Whole("h100-0", (1,)))
            inner.commit()
        with outer.branch() as inner:
            inner.allocate("c", Whole("h100-0", (2,)))
        assert outer.jobs() == ("a", "b")
    assert state.jobs() == ()


def test_branch_misuse_raises(state: State) -> None:
    with state.branch() as outer:
        with pytest.raises(BranchError, match="innermost"):
            state.allocate("x", Whole("h100-0", (0,)))
        with pytest.raises(BranchError, match="innermost"):
            state.branch()
        with outer.branch() as inner:
            with pytest.raises(BranchError, match="nested"):
                outer.allocate("x", Whole("h100-0", (0,)))
            with pytest.raises(BranchError, match="nested"):
                outer.free_gpus("h100-0")
            inner.allocate("x", Whole("h100-0", (0,)))
        outer.commit()
    with pytest.raises(BranchError, match="closed"):
        outer.allocate("x", Whole("h100-0", (0,)))
    with pytest.raises(BranchError, match="closed"):
        outer.free_gpus("h100-0")
    assert state.jobs() == ()  # the inner branch rolled back before the commit


def test_snapshot_is_read_only_and_goes_stale(state: State) -> None:
    snap = state.snapshot()
    assert snap.free_gpus("h100-0") == 8
    with snap.what_if() as w:
        w.allocate("x", Whole("h100-0", (0, 1)))
        assert w.free_gpus("h100-0") == 6
        with pytest.raises(StaleViewError):
            snap.free_gpus("h100-0")
        with pytest.raises(BranchError, match="never commits"):
            w.commit()
        with w.branch() as deeper:  # nested what-ifs may merge into the what-if
            deeper.release("x", Whole("h100-0", (1,)))
            deeper.commit()
        assert w.free_gpus("h100-0") == 7
    assert snap.current
    assert snap.free_gpus("h100-0") == 8
    state.allocate("y", Whole("h100-0", (0,)))
    assert not snap.current
    with pytest.raises(StaleViewError, match="take a new snapshot"):
        snap.free_gpus("h100-0")
    with pytest.raises(StaleViewError):
        snap.what_if()


def test_a_what_if_inside_a_driver_branch_still_cannot_commit(state: State) -> None:
    with state.branch() as b:
        b.allocate("x", Whole("h100-0", (0,)))
        snap = state.snapshot()
        with snap.what_if() as w, pytest.raises(BranchError, match="never commits"):
            w.commit()
        b.commit()
    assert state.jobs() == ("x",)


def test_a_query_result_fails_loudly_if_the_state_changes_while_it_is_read(state: State) -> None:
    nodes = state.nodes_with_free(H100, 1)
    first = next(nodes)
    state.allocate("x", Whole(first, (0,)))
    with pytest.raises(StaleViewError, match="materialise"):
        next(nodes)
    # materialised results are safe to act on
    for node in list(state.nodes_with_free(H100, 8)):
        state.allocate(f"fill-{node}", Whole(node, tuple(range(8))))
    assert state.count_nodes_with_free(H100, 8) == 0


def test_micro_benchmark_runs() -> None:
    result = bench_allocate_release(nodes=40, pairs=200)
    assert result.pairs_per_s > 0
    assert result.placed_pairs_per_s > 0
