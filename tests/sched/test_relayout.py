"""MIG re-layout proposals: small clusters cut the "wrong" way for the queue's demand.

Most scenarios use A100 80GB nodes cut 7×1g.10gb per GPU and pending 3g.40gb
requests, the case the proposals exist for. The clock is `NOW`; running jobs'
expected ends are given relative to it.
"""

from __future__ import annotations

import pytest

from gpufleet.catalog.mig import check_layout, mig_profiles_for
from gpufleet.cluster import Cluster, MigSlice, Node, Snapshot, State, slice_id
from gpufleet.sched.framework import Relayout
from gpufleet.sched.relayout import propose
from gpufleet.sched.requests import Request

from .scenarios import A100, H100

NOW = 1000.0
ALL_1G: tuple[tuple[str, int], ...] = (("1g.10gb", 7),)
BALANCED: tuple[tuple[str, int], ...] = (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))


def mig_node(name: str, gpus: int = 1, layout: tuple[tuple[str, int], ...] = ALL_1G) -> Node:
    return Node(name, A100, gpus, ("b1",), mig=(layout,) * gpus)


def cluster(*nodes: Node) -> State:
    return State(Cluster(("block", "node"), nodes))


def wants(profile: str, accelerator: str = A100, workers: int = 1) -> Request:
    return Request(accelerator, "mig", workers, mig_profile=profile)


def pending(n: int, profile: str = "3g.40gb", prefix: str = "chat") -> list[tuple[str, Request]]:
    return [(f"{prefix}-{i}", wants(profile)) for i in range(n)]


def hold(
    state: State, job: str, node: str, gpu: int, *, profile: str = "1g.10gb", k: int = 0
) -> None:
    state.allocate(job, MigSlice(slice_id(node, gpu, profile, k)))


def where(p: Relayout) -> tuple[str, int]:
    return p.node, p.gpu


def test_an_idle_gpu_is_recut_for_pending_3g_jobs_without_drain() -> None:
    state = cluster(mig_node("a100-0"))
    (p,) = propose(state, pending(2), {}, NOW)
    assert where(p) == ("a100-0", 0)
    assert p.accelerator == A100
    assert p.current == ALL_1G
    assert p.proposed == (("3g.40gb", 2),)
    assert p.drain == ()
    assert p.drain_s == 0.0
    assert p.serves == ("chat-0", "chat-1")
    assert p.reason == (
        "repartition a100-0 GPU 0 from 7×1g.10gb to 2×3g.40gb "
        "for 2 pending 3g.40gb jobs (chat-0, chat-1); idle, no drain"
    )


def test_one_pending_job_gets_the_layout_that_keeps_most_of_the_current_cut() -> None:
    # all-balanced (2×1g + 2g + 3g) and all-3g.40gb both serve one job; balanced changes
    # 7 slices, all-3g 9, so the GPU keeps two of its 1g.10gb instances.
    state = cluster(mig_node("a100-0"))
    (p,) = propose(state, pending(1), {}, NOW)
    assert dict(p.proposed) == dict(BALANCED)
    assert p.serves == ("chat-0",)
    assert "for 1 pending 3g.40gb job (chat-0)" in p.reason


def test_a_busy_gpu_is_proposed_with_its_drain_list_and_the_latest_end() -> None:
    state = cluster(mig_node("a100-0"))
    hold(state, "notebook-b", "a100-0", 0, k=1)
    hold(state, "notebook-a", "a100-0", 0, k=0)
    ends = {"notebook-a": NOW + 100.0, "notebook-b": NOW + 300.0}
    (p,) = propose(state, pending(2), ends, NOW)
    assert p.drain == ("notebook-a", "notebook-b")
    assert p.drain_s == pytest.approx(300.0)
    assert p.serves == ("chat-0", "chat-1")
    assert p.reason.endswith("drain 2 jobs first (notebook-a, notebook-b), free in about 300 s")


@pytest.mark.parametrize(
    "ends",
    [
        pytest.param({"notebook-a": NOW + 100.0, "notebook-b": None}, id="end-is-none"),
        pytest.param({"notebook-a": NOW + 100.0}, id="end-not-given"),
    ],
)
def test_a_drain_with_an_unknown_end_has_no_drain_time(ends: dict[str, float | None]) -> None:
    state = cluster(mig_node("a100-0"))
    hold(state, "notebook-a", "a100-0", 0, k=0)
    hold(state, "notebook-b", "a100-0", 0, k=1)
    (p,) = propose(state, pending(1), ends, NOW)
    assert p.drain == ("notebook-a", "notebook-b")
    assert p.drain_s is None
    assert "end of at least one unknown" in p.reason


def test_a_job_already_past_its_expected_end_drains_in_zero_seconds() -> None:
    state = cluster(mig_node("a100-0"))
    hold(state, "overrun", "a100-0", 0)
    (p,) = propose(state, pending(1), {"overrun": NOW - 50.0}, NOW)
    assert p.drain == ("overrun",)
    assert p.drain_s == 0.0


def test_idle_gpus_are_preferred_over_busy_ones() -> None:
    state = cluster(mig_node("a100-0", gpus=3))
    hold(state, "notebook", "a100-0", 0)  # GPU 0 busy, ends soon
    hold(state, "tenant", "a100-0", 2)  # GPU 2 busy, ends later
    ends = {"notebook": NOW + 10.0, "tenant": NOW + 5000.0}
    proposals = propose(state, pending(6), ends, NOW)
    assert [where(p) for p in proposals] == [("a100-0", 1), ("a100-0", 0), ("a100-0", 2)]
    assert [p.serves for p in proposals] == [
        ("chat-0", "chat-1"),
        ("chat-2", "chat-3"),
        ("chat-4", "chat-5"),
    ]
    # Only as many GPUs as the demand needs: one pending job re-cuts the idle GPU alone.
    (only,) = propose(state, pending(1), ends, NOW)
    assert where(only) == ("a100-0", 1)
    assert only.drain == ()


def test_busy_gpus_go_by_soonest_drain_and_unknown_ends_last() -> None:
    state = cluster(mig_node("a100-0", gpus=3))
    hold(state, "mystery", "a100-0", 0)
    hold(state, "long", "a100-0", 1)
    hold(state, "short", "a100-0", 2)
    ends = {"long": NOW + 900.0, "short": NOW + 60.0}
    proposals = propose(state, pending(6), ends, NOW)
    assert [p.drain for p in proposals] == [("short",), ("long",), ("mystery",)]
    assert [p.drain_s for p in proposals] == [pytest.approx(60.0), pytest.approx(900.0), None]


def test_proposals_are_capped() -> None:
    state = cluster(mig_node("a100-0", gpus=8))
    demand = pending(16)
    assert len(propose(state, demand, {}, NOW)) == 8
    capped = propose(state, demand, {}, NOW, max_proposals=3)
    assert [where(p) for p in capped] == [("a100-0", 0), ("a100-0", 1), ("a100-0", 2)]
    assert [job for p in capped for job in p.serves] == [f"chat-{i}" for i in range(6)]
    assert propose(state, demand, {}, NOW, max_proposals=0) == ()
    with pytest.raises(ValueError, match="max_proposals"):
        propose(state, demand, {}, NOW, max_proposals=-1)


def test_the_default_cap_is_sixteen_proposals() -> None:
    state = cluster(*(mig_node(f"a100-{i}", gpus=8) for i in range(3)))
    assert len(propose(state, pending(60), {}, NOW)) == 16


@pytest.mark.parametrize("profile", [p.profile for p in mig_profiles_for(A100)])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_every_proposed_layout_passes_the_catalog_check(profile: str, n: int) -> None:
    state = cluster(
        mig_node("a100-0", gpus=2, layout=BALANCED), mig_node("a100-1", gpus=2, layout=ALL_1G)
    )
    hold(state, "notebook", "a100-0", 0)
    proposals = propose(state, pending(n, profile), {"notebook": NOW + 60.0}, NOW)
    for p in proposals:
        assert check_layout(A100, dict(p.proposed)) == []
        assert dict(p.proposed).get(profile, 0) - dict(p.current).get(profile, 0) >= len(p.serves)
    served = [job for p in proposals for job in p.serves]
    assert len(served) == len(set(served))


def test_demand_for_a_profile_the_accelerator_lacks_yields_nothing() -> None:
    state = cluster(mig_node("a100-0"))
    assert propose(state, [("big", wants("3g.71gb"))], {}, NOW) == ()  # an H200 profile
    assert propose(state, [("odd", wants("5g.50gb"))], {}, NOW) == ()  # no such profile


def test_demand_for_an_accelerator_the_cluster_lacks_yields_nothing() -> None:
    state = cluster(mig_node("a100-0"))
    assert propose(state, [("chat", wants("3g.40gb", accelerator=H100))], {}, NOW) == ()


def test_no_demand_no_proposals() -> None:
    state = cluster(mig_node("a100-0", gpus=8))
    assert propose(state, [], {}, NOW) == ()


def test_requests_that_are_not_for_mig_slices_are_ignored() -> None:
    state = cluster(mig_node("a100-0"))
    unplaced = [
        ("train", Request(A100, "gpus", 2, gpus_per_worker=8)),
        ("share", Request(A100, "fraction", 1, eighths=2)),
    ]
    assert propose(state, unplaced, {}, NOW) == ()


def test_whole_gpus_are_never_proposed_for_partitioning() -> None:
    state = cluster(Node("a100-0", A100, 8, ("b1",)))
    assert propose(state, pending(2), {}, NOW) == ()


def test_a_gpu_with_a_free_slice_of_a_demanded_profile_is_left_alone() -> None:
    # chat-0 is pending although a 3g.40gb slice is free (say its team is out of quota):
    # re-cutting that GPU would take the slice it is waiting for.
    state = cluster(mig_node("a100-0", layout=BALANCED), mig_node("a100-1"))
    proposals = propose(state, pending(2), {}, NOW)
    assert [where(p) for p in proposals] == [("a100-1", 0)]
    # The same holds for another demanded profile: free 1g.10gb slices while a 1g job waits.
    demand = [*pending(2), ("tiny", wants("1g.10gb"))]
    assert propose(state, demand, {}, NOW) == ()


def test_a_held_slice_of_the_demanded_profile_is_not_counted_as_new_capacity() -> None:
    # The 3g.40gb slice frees up when its holder ends anyway; all-3g.40gb adds only one.
    state = cluster(mig_node("a100-0", layout=BALANCED))
    hold(state, "chat-old", "a100-0", 0, profile="3g.40gb")
    (p,) = propose(state, pending(2), {"chat-old": NOW + 30.0}, NOW)
    assert p.proposed == (("3g.40gb", 2),)
    assert p.drain == ("chat-old",)
    assert p.serves == ("chat-0",)


def test_a_job_acceptable_on_two_accelerators_is_served_once() -> None:
    h100 = Node("h100-0", H100, 1, ("b1",), mig=(ALL_1G,))
    state = cluster(mig_node("a100-0"), h100)
    unplaced = [("chat", wants("3g.40gb")), ("chat", wants("3g.40gb", accelerator=H100))]
    (p,) = propose(state, unplaced, {}, NOW)
    assert p.serves == ("chat",)
    assert p.accelerator == A100


def test_profiles_are_matched_case_insensitively_and_jobs_counted_once() -> None:
    state = cluster(mig_node("a100-0"))
    unplaced = [("chat", wants("3G.40GB")), ("chat", wants("3g.40gb"))]
    (p,) = propose(state, unplaced, {}, NOW)
    assert p.serves == ("chat",)


def test_a_multi_worker_request_is_served_only_where_all_its_slices_fit() -> None:
    state = cluster(mig_node("a100-0"))
    unplaced = [("wide", wants("3g.40gb", workers=3)), ("narrow", wants("3g.40gb", workers=2))]
    (p,) = propose(state, unplaced, {}, NOW)
    assert p.serves == ("narrow",)


def test_proposing_leaves_the_view_unchanged_and_is_deterministic() -> None:
    state = cluster(mig_node("a100-0", gpus=4), mig_node("a100-1", gpus=4, layout=BALANCED))
    hold(state, "notebook", "a100-0", 1)
    hold(state, "chat-old", "a100-1", 2, profile="3g.40gb")
    version, dump = state.version, state.dump()
    snapshot = Snapshot(state)
    demand = [*pending(5), *pending(3, "2g.20gb", prefix="dev")]
    ends = {"notebook": NOW + 5.0, "chat-old": None}
    first = propose(snapshot, demand, ends, NOW)
    assert first == propose(snapshot, demand, ends, NOW)
    assert first == propose(state, demand, ends, NOW)
    assert snapshot.current
    assert state.version == version
    assert state.dump() == dump
    gpus = [where(p) for p in first]
    assert len(gpus) == len(set(gpus))
