"""The experiments of docs/experiments/ on small inputs: structure, determinism and sanity.

The full runs (openb fill of six policies, two weeks × three seeds) take tens of seconds
and live in the docs; these use a hand-made trace cluster, a few pods, and one simulated
day, so the file stays well under ten seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpufleet.cluster import Cluster, MigSlice, Node, Share, State, Whole
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched.requests import Request
from gpufleet.sched.scoring import BinPack, Spread
from gpufleet.sim.experiments import (
    FRAGMENTATION_POLICIES,
    fragmentation,
    profile_setup,
    requested_share,
    utilization_claims,
    utilization_scenario,
)
from gpufleet.sim.fit_baselines import (
    BASELINES,
    BestFit,
    DotProduct,
    GpuPacking,
    RandomFit,
    baseline,
)
from gpufleet.sim.fragmentation import arrivals, fill_policy, fill_setup
from gpufleet.sim.workload import CleaningReport, TraceJob, TraceNode, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import OPEN_QUOTA_GPUS

A100 = "a100-sxm4-80gb"
ROW_FIELDS = {
    "arrived_share",
    "allocated_share",
    "held_share",
    "unallocated_gpus",
    "failed_pods",
    "pods_arrived",
    "curve",
    "unallocated_vs_best_baseline",
    "unallocated_vs_best_baseline_end",
}


# -- helpers ----------------------------------------------------------------------------


def trace(*, typed: bool = False) -> Workload:
    """A small openb-like trace: 6 nodes (26 GPUs) of two types, whole and shared pods."""
    nodes = (
        TraceNode("n0", "t-A", 8),
        TraceNode("n1", "t-A", 8),
        TraceNode("n2", "t-A", 4),
        TraceNode("n3", "t-B", 2),
        TraceNode("n4", "t-B", 2),
        TraceNode("n5", "t-B", 2),
    )
    shapes: list[dict[str, Any]] = [
        {"gpus": 1},
        {"gpus": 1},
        {"gpus": 2},
        {"gpus": 8},
        {"gpu_fraction": 0.25},
        {"gpu_fraction": 0.5},
        {"gpu_fraction": 0.81},
        {"gpu_fraction": 0.32},
    ]
    jobs = tuple(
        TraceJob(
            f"p{i}",
            "openb",
            submit_s=float(i),
            duration_s=60.0,
            accelerators=("t-B",) if typed else (),
            **shape,
        )
        for i, shape in enumerate(shapes)
    )
    return Workload(jobs, CleaningReport("test trace", len(jobs), len(jobs)), nodes)


def flat(*nodes: Node) -> Cluster:
    return Cluster(("node",), nodes)


def job(**kw: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "j", "team": "t", "gpus": 1, **kw})


def whole(acc: str, gpus: int, workers: int = 1) -> Request:
    return Request(acc, "gpus", workers, gpus_per_worker=gpus)


def share(acc: str, eighths: int) -> Request:
    return Request(acc, "fraction", 1, eighths=eighths)


# -- the fill experiment ----------------------------------------------------------------


def test_fragmentation_reports_every_policy_with_the_allocation_fields() -> None:
    out = fragmentation(FRAGMENTATION_POLICIES, seed=1, points=5, workload=trace())
    assert out["experiment"] == "fragmentation"
    assert list(out["results"]) == list(FRAGMENTATION_POLICIES)
    assert set(out["timings_s"]) == set(FRAGMENTATION_POLICIES)
    assert out["scenario"]["gpus"] == 26
    assert out["scenario"]["gpu_types_pooled"] is True
    assert out["best_baseline"] in BASELINES
    for row in out["results"].values():
        assert set(row) >= ROW_FIELDS
        assert len(row["curve"]) == 5
        assert row["arrived_share"] >= 1.0
        assert row["arrived_share_end"] >= 1.3
        assert row["allocated_share"] <= row["arrived_share"]
        assert row["allocated_share_end"] <= 1.0
        assert row["unallocated_gpus"] == pytest.approx(26 * (1 - row["allocated_share"]))
        assert row["pods_arrived"] <= row["pods_arrived_end"]
        assert row["failed_pods"] <= row["failed_pods_end"]
    assert out["results"][out["best_baseline"]]["unallocated_vs_best_baseline"] == 1.0


def test_allocation_never_decreases_and_never_exceeds_what_arrived() -> None:
    out = fragmentation(FRAGMENTATION_POLICIES, seed=3, points=12, workload=trace())
    for name, row in out["results"].items():
        curve = row["curve"]
        arrived = [a for a, _ in curve]
        allocated = [b for _, b in curve]
        assert arrived == sorted(arrived), name
        assert allocated == sorted(allocated), name
        assert all(b <= a + 1e-12 for a, b in curve), name
        assert curve[-1] == [row["arrived_share_end"], row["allocated_share_end"]], name


def test_fragmentation_is_deterministic_for_a_seed() -> None:
    policies = ("random-fit", "fgd", "default")
    first = fragmentation(policies, seed=7, points=4, workload=trace())
    again = fragmentation(policies, seed=7, points=4, workload=trace())
    assert first["results"] == again["results"]
    setup = fill_setup(trace())
    assert arrivals(setup, 7) == arrivals(setup, 7)
    assert arrivals(setup, 7) != arrivals(setup, 8)


def test_a_pod_that_names_a_gpu_type_only_lands_on_that_type() -> None:
    out = fragmentation(("best-fit", "random-fit", "default"), points=3, workload=trace(typed=True))
    assert out["scenario"]["gpu_types_pooled"] is False
    for row in out["results"].values():
        assert row["allocated_share_end"] <= 6 / 26 + 1e-12  # the three 2-GPU t-B nodes
        assert row["failed_pods_end"] > 0


def test_the_bundled_openb_cluster_is_pooled_and_a_short_fill_runs() -> None:
    out = fragmentation(("best-fit", "random-fit"), points=4, max_arrived=1.0)
    scenario = out["scenario"]
    assert (scenario["nodes"], scenario["gpus"]) == (1213, 6212)
    assert scenario["gpu_types_pooled"] is True
    assert scenario["trace_pods"] == 7063
    for row in out["results"].values():
        assert 0.5 < row["allocated_share"] <= row["arrived_share"]


def test_unknown_policies_and_bad_arguments_are_refused() -> None:
    with pytest.raises(UnknownNameError):
        fragmentation(("best-fti",), workload=trace())
    with pytest.raises(UserError):
        fragmentation(("best-fit",), points=0, workload=trace())
    with pytest.raises(UserError):
        fragmentation(("best-fit",), workload=Workload((), CleaningReport("x", 0, 0)))
    with pytest.raises(KeyError):
        baseline("worst-fit")


def test_fill_policy_knows_baselines_and_profiles() -> None:
    assert fill_policy("gpu-packing")[0].name == "gpu-packing"
    assert fill_policy("default") == (fill_policy("default")[0], False)
    assert fill_policy("k8s-default")[1] is True  # whole GPUs only


# -- the baseline plugins ---------------------------------------------------------------


def test_random_fit_is_reproducible_from_its_seed_and_only_picks_feasible_gpus() -> None:
    cluster = flat(*(Node(f"n{i}", "x", 4, fractions=True) for i in range(5)))

    def draws(seed: int) -> list[tuple[str, tuple[int, ...], int | None]]:
        state, plugin, out = State(cluster), RandomFit(seed), []
        for k in range(12):
            request = whole("x", 1 + k % 2) if k % 3 else share("x", 3)
            placed = plugin.place(state, job(), request)
            assert placed.status.ok
            (p,) = placed.placements
            state.allocate(f"j{k}", *p.claims())
            out.append((p.node, p.gpus, p.gpu))
        return out

    assert draws(0) == draws(0)
    assert draws(0) != draws(1)


def test_random_fit_spreads_over_all_feasible_nodes() -> None:
    cluster = flat(*(Node(f"n{i}", "x", 2) for i in range(4)))
    state = State(cluster)
    state.allocate("full", Whole("n0", (0, 1)))
    plugin = RandomFit(0)
    seen = {plugin.place(state, job(), whole("x", 1)).placements[0].node for _ in range(200)}
    assert seen == {"n1", "n2", "n3"}
    assert not plugin.place(state, job(), whole("x", 4)).status.ok


def test_random_fit_places_gangs_shares_and_slices() -> None:
    nodes = [Node(f"n{i}", A100, 8, path=(f"l{i // 2}",), fractions=True) for i in range(4)]
    nodes.append(Node("m", A100, 1, path=("l9",), mig=((("3g.40gb", 2),),)))
    cluster = Cluster(("leaf", "node"), tuple(nodes))
    state = State(cluster)
    plugin = RandomFit(5)
    gang = plugin.place(state, job(workers=3, topology={"required": "leaf"}), whole(A100, 8, 3))
    assert not gang.status.ok  # a leaf has two nodes: 2 workers of 8 at most
    gang = plugin.place(state, job(workers=2, topology={"required": "leaf"}), whole(A100, 8, 2))
    assert gang.status.ok
    assert len({cluster.group_of(p.node, "leaf") for p in gang.placements}) == 1
    spread = plugin.place(state, job(workers=3), whole(A100, 4, 3))
    assert spread.status.ok
    assert len(spread.placements) == 3
    frac = plugin.place(state, job(), share(A100, 2))
    assert frac.status.ok
    assert frac.placements[0].milli == 250
    mig = plugin.place(state, job(), Request(A100, "mig", 1, mig_profile="3g.40gb"))
    assert mig.status.ok
    assert mig.placements[0].mig_slices[0].startswith("m/gpu0/mig:3g.40gb#")
    assert plugin.place(state, job(), Request(A100, "mig", 1, mig_profile="1g.10gb")).status.code


def test_gpu_packing_prefers_shared_gpus_then_nodes_in_use_then_idle_nodes() -> None:
    cluster = flat(
        Node("idle8", "x", 8, fractions=True),
        Node("idle2", "x", 2, fractions=True),
        Node("used", "x", 4, fractions=True),
        Node("shared", "x", 4, fractions=True),
    )
    state = State(cluster)
    state.allocate("w", Whole("used", (0, 1)))
    state.allocate("s", Share("shared", 1, 750))
    plugin = GpuPacking()
    small = plugin.place(state, job(), share("x", 2)).placements[0]
    assert (small.node, small.gpu) == ("shared", 1)  # the shared GPU still has 250 free
    big = plugin.place(state, job(), share("x", 4)).placements[0]
    assert big.node == "used"  # fewest free GPUs among the nodes in use (2 vs 3)
    empty = State(cluster)
    first = plugin.place(empty, job(), share("x", 4)).placements[0]
    assert first.node == "idle2"  # no node in use: the idle node with the fewest GPUs
    gang = plugin.place(state, job(), whole("x", 2)).placements[0]
    assert gang.node == BinPack().place(state, job(), whole("x", 2)).placements[0].node


def test_best_fit_and_dot_product_are_binpack_and_spread_under_the_paper_names() -> None:
    cluster = flat(*(Node(f"n{i}", "x", 8, fractions=True) for i in range(3)))
    state = State(cluster)
    state.allocate("a", Whole("n1", (0, 1, 2)))
    state.allocate("b", Share("n2", 0, 500))
    for plugin, reference in ((BestFit(), BinPack()), (DotProduct(), Spread())):
        for request in (whole("x", 2), share("x", 3)):
            assert plugin.place(state, job(), request) == reference.place(state, job(), request)
        refused = plugin.place(state, job(), whole("x", 16))
        assert refused.status.plugin == plugin.name
        assert plugin.observe([whole("x", 1)]) is plugin
    assert set(BASELINES) == {"random-fit", "best-fit", "dot-product", "gpu-packing"}


def test_spot_nodes_are_only_for_jobs_that_accept_them() -> None:
    cluster = flat(Node("spot", "x", 8, capacity="spot", fractions=True))
    state = State(cluster)
    for name in BASELINES:
        plugin = baseline(name, 0)
        assert not plugin.place(state, job(), whole("x", 1)).status.ok, name
        assert plugin.place(state, job(allow_spot=True), whole("x", 1)).status.ok, name


def test_a_taken_mig_slice_is_not_offered_again() -> None:
    cluster = flat(Node("m", A100, 1, mig=((("3g.40gb", 2),),)))
    state = State(cluster)
    plugin = RandomFit(0)
    request = Request(A100, "mig", 1, mig_profile="3g.40gb")
    first = plugin.place(state, job(), request).placements[0].mig_slices[0]
    state.allocate("a", MigSlice(first))
    second = plugin.place(state, job(), request).placements[0].mig_slices[0]
    assert second != first


# -- the utilisation claims -------------------------------------------------------------


def test_the_scenario_files_describe_the_documented_cluster_teams_and_load() -> None:
    s = utilization_scenario(days=2)
    assert s.cluster.total_gpus == 256
    assert sum(g.count for g in s.cluster.node_groups if g.mig_layout) == 4
    assert sum(q.guaranteed_gpus for t in s.teams.teams for q in t.quotas) == 256
    assert s.workload.horizon == 2 * 86_400
    with pytest.raises(UserError):
        utilization_scenario(days=0)


def test_k8s_default_runs_without_mig_with_open_quotas_and_busy_scaled_by_what_jobs_asked() -> None:
    from gpufleet.sim.generate import generate

    s = utilization_scenario(days=1)
    cluster = Cluster.from_spec(s.cluster)
    workload = generate(s.workload, np.random.default_rng(0))
    k8s = profile_setup("k8s-default", cluster, s.teams, workload)
    assert not any(layout for n in k8s.cluster.nodes for layout in n.mig)
    assert k8s.cluster.gpu_count == 256
    assert all(t.quotas[0].guaranteed_gpus == OPEN_QUOTA_GPUS for t in k8s.teams.teams)
    embed = next(j for j in k8s.workload.jobs if j.mig_profile == "1g.10gb")
    assert embed.busy_fraction == pytest.approx(0.5 / 7)  # 1g of an A100's 7 compute slices
    train = next(j for j in k8s.workload.jobs if j.kind == "training")
    assert train.busy_fraction == 0.9
    default = profile_setup("default", cluster, s.teams, workload)
    assert default.cluster is cluster
    assert default.teams is s.teams
    assert default.workload is workload
    assert (default.mig, k8s.mig, k8s.open_quotas, k8s.busy_rescaled) == (True, False, True, True)


def test_requested_share_counts_what_a_job_asks_for() -> None:
    def share_of(**kw: Any) -> float:
        return requested_share(TraceJob("j", "t", 0.0, 1.0, **kw), A100)

    assert share_of(gpus=8, workers=4) == 32
    assert share_of(gpu_fraction=0.25) == 0.25
    assert share_of(mig_profile="3g.40gb") == pytest.approx(3 / 7)  # exact, not 0.429


def test_a_one_day_run_reports_the_claim_metrics_per_profile_and_repeats_exactly() -> None:
    out = utilization_claims(seeds=1, days=1)
    assert out["experiment"] == "utilization-claims"
    assert list(out["results"]) == ["k8s-default", "default"]
    for metrics in out["results"].values():
        for key in (
            "gpu_allocation_ratio",
            "busy_utilization",
            "gpu_hours_completed",
            "jobs_completed",
            "effective_gpu_hours",
            "slo_attainment",
        ):
            assert metrics[key] is not None, key
        assert 0 < metrics["busy_utilization"] <= metrics["gpu_allocation_ratio"] <= 1
        assert metrics["effective_gpu_hours"] <= metrics["gpu_hours_completed"] + 1e-9
    assert [len(rows) for rows in out["per_seed"].values()] == [1, 1]
    assert out["versus"]["baseline"] == "k8s-default"
    assert set(out["versus"]["default"]) >= {"effective_gpu_hours", "busy_utilization"}
    (offered,) = out["scenario"]["offered_load"]
    assert 0.5 < offered["share_of_cluster"] < 1.5
    again = utilization_claims(seeds=1, days=1)
    assert again["results"] == out["results"]
    with pytest.raises(UnknownNameError):
        utilization_claims(("k8s-defualt",), seeds=1, days=1)
    with pytest.raises(UserError):
        utilization_claims(seeds=0)


def test_without_a_paper_baseline_fgd_is_compared_with_the_best_other_policy() -> None:
    out = fragmentation(("fgd", "spread", "default"), points=2, workload=trace())
    assert out["best_baseline"] in {"spread", "default"}
    assert fragmentation(("fgd",), points=2, workload=trace())["best_baseline"] is None
