"""On-prem cluster design: nodes, racks, power, fat-tree, verdict and storage.

Expected numbers are hand computations from the catalog rows (DGX H100: 8 GPUs,
10.2 kW max, 8U, 8 × 400 Gb/s NICs; Quantum-2 QM9700: 64 ports of NDR 400;
GB200 NVL72: 72 GPUs, 18 compute trays, ~120 kW per rack) and the formulas in
docs/design/0006-cluster-design.md.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pytest

from gpufleet.catalog.storage import Storage as StorageRow
from gpufleet.catalog.storage import get_storage
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design import (
    FatTree,
    TrafficNeed,
    choose_storage,
    design_cluster,
    fabric_verdict,
    node_overhead_factor,
    required_gbit_per_s_per_gpu,
    size_fat_tree,
)
from gpufleet.plan.model import Design
from gpufleet.specs.plan import OnPremPreferences

H100 = "h100-sxm5-80gb"
TIB = 2**40
SWITCH_KW = 1.7  # 64 × 400G switch (QM9700 class), the module's stated assumption


def need_for(gbit_per_gpu: float, *, tp: bool = False, **extra: Any) -> TrafficNeed:
    """A need whose cross-node bytes require exactly `gbit_per_gpu` (step time 1 s)."""
    fields: dict[str, Any] = {
        "dp_bytes_per_step": gbit_per_gpu * 1e9 / 8,
        "step_time_s": 1.0,
        "tp_crosses_nodes": tp,
        "checkpoint_bytes": 1e12,
        "dataset_bytes": 60e12,
        "tokens_per_s": 4e6,
    }
    fields.update(extra)
    return TrafficNeed(**fields)


def design(
    accelerator: str = H100,
    gpus: int = 1024,
    *,
    rack_kw: float = 30.0,
    need: TrafficNeed | None = None,
    log: Assumptions | None = None,
    **kwargs: Any,
) -> Design:
    return design_cluster(
        accelerator,
        gpus,
        OnPremPreferences(rack_power_kw=rack_kw),
        need_for(100.0) if need is None else need,
        Assumptions() if log is None else log,
        **kwargs,
    )


# --- nodes, racks, power ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rack_kw", "racks", "rack_power_kw"),
    [
        pytest.param(30.0, 64, 30.0, id="30kW-2-per-rack"),  # floor(30/10.2) = 2
        pytest.param(60.0, 26, 60.0, id="60kW-5-per-rack"),  # floor(60/10.2) = 5 = 42U // 8U
        pytest.param(120.0, 26, 120.0, id="120kW-space-bound"),  # 11 by power, 5 by space
        pytest.param(10.0, 128, 10.2, id="10kW-one-node-exceeds"),  # 1 per rack, liquid
    ],
)
def test_dgx_h100_1024_racks(rack_kw: float, racks: int, rack_power_kw: float) -> None:
    log = Assumptions()
    d = design(rack_kw=rack_kw, log=log)
    assert (d.system, d.accelerator, d.gpus, d.nodes) == ("dgx-h100", H100, 1024, 128)
    assert d.racks == racks
    assert d.rack_power_kw == pytest.approx(rack_power_kw)
    names = {a.name for a in log.items}
    assert ("design.rack_density" in names) == (rack_kw < 10.2)


def test_dgx_h100_1024_power() -> None:
    d = design(rack_kw=30.0)
    switches = 32 + 16
    compute = 128 * 10.2
    assert d.power_kw["compute"] == pytest.approx(compute)
    assert d.power_kw["network"] == pytest.approx(switches * SWITCH_KW)
    assert d.power_kw["storage"] == pytest.approx(0.03 * compute)
    it = compute + switches * SWITCH_KW + 0.03 * compute
    assert d.power_kw["it"] == pytest.approx(it)
    assert d.power_kw["facility"] == pytest.approx(it * 1.3)
    assert d.scaleup_domain_gpus == 8


def test_partial_node_rounds_up_and_is_logged() -> None:
    log = Assumptions()
    d = design(gpus=1001, log=log)
    assert (d.gpus, d.nodes) == (1008, 126)
    assert any(a.name == "design.installed_gpus" and "1001" in a.value for a in log.items)


@pytest.mark.parametrize(
    ("gpus", "racks", "nodes", "installed", "fabric"),
    [
        pytest.param(72, 1, 18, 72, "none", id="one-rack-all-nvlink"),
        pytest.param(144, 2, 36, 144, "ib-ndr-400", id="two-racks"),
        pytest.param(1000, 14, 252, 1008, "ib-ndr-400", id="1000-gpus"),
    ],
)
def test_gb200_nvl72_racks(gpus: int, racks: int, nodes: int, installed: int, fabric: str) -> None:
    log = Assumptions()
    d = design("gb200", gpus, rack_kw=30.0, log=log)
    assert d.system == "gb200-nvl72"
    assert (d.racks, d.nodes, d.gpus) == (racks, nodes, installed)
    assert d.scaleup_domain_gpus == 72
    assert d.rack_power_kw == pytest.approx(120.0)
    assert d.power_kw["compute"] == pytest.approx(racks * 120.0)
    assert d.fabric.name == fabric
    density = next(a for a in log.items if a.name == "design.rack_density")
    assert "liquid cooling" in density.source


def test_gb200_rails_are_nics_per_tray() -> None:
    d = design("gb200", 1000)
    # 14 racks × 18 trays = 252 nodes, 4 NICs each (one per GPU): 4 × ceil(252 / 32) leaves.
    assert d.fabric.nics == 1008
    assert (d.fabric.leaf_switches, d.fabric.spine_switches) == (32, 16)
    assert d.fabric.available_gbit_per_s_per_gpu == pytest.approx(400.0)


@pytest.mark.parametrize(
    ("accelerator", "system", "unit_kw", "logged"),
    [
        pytest.param(
            "mi325x", "generic-8x-mi325x", 8 * 1000 * 10.2 / 5.6 / 1000, True, id="generic"
        ),
        pytest.param(
            "mi300x", "mi300x-8gpu-platform", 8 * 750 * 10.2 / 5.6 / 1000, True, id="row-no-kw"
        ),
        pytest.param("b200", "dgx-b200", 14.3, False, id="row-with-kw"),
    ],
)
def test_node_power_from_tdp_when_the_row_has_none(
    accelerator: str, system: str, unit_kw: float, logged: bool
) -> None:
    log = Assumptions()
    d = design(accelerator, 64, log=log)
    assert d.system == system
    assert d.power_kw["compute"] == pytest.approx(8 * unit_kw)
    factor = [a for a in log.items if a.name == "design.node_overhead_factor"]
    assert bool(factor) == logged
    if logged:
        assert factor[0].value == f"{10.2 / 5.6:.3f}"
        assert "dgx-h100" in factor[0].source


def test_overhead_factor_is_the_dgx_h100_ratio() -> None:
    assert node_overhead_factor() == pytest.approx(10.2 / (8 * 0.7))


# --- fabric ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "rails", "radix", "expected"),
    [
        # 1024 endpoints, 64 ports: 32 down per leaf -> 32 leaves; 32 × 32 uplinks / 64 -> 16.
        pytest.param(1024, 1, 64, FatTree(2, 1024, 32, 16, 0, 0, 1024 + 1024), id="1024-ep"),
        pytest.param(128, 8, 64, FatTree(2, 1024, 32, 16, 0, 0, 2048), id="128-dgx-rails"),
        pytest.param(8, 8, 64, FatTree(1, 64, 1, 0, 0, 0, 64), id="single-switch-64"),
        pytest.param(1, 1, 64, FatTree(1, 1, 1, 0, 0, 0, 1), id="single-switch-1"),
        # 65 endpoints: 3 leaves (32, 32 and 1 down; as many up: 65) -> ceil(65/64) = 2 spines.
        pytest.param(65, 1, 64, FatTree(2, 65, 3, 2, 0, 0, 65 + 65), id="65-ep"),
        # Rail groups: 100 nodes -> 4 leaves per rail × 8 rails (not ceil(800/32) = 25); the
        # last leaf of each rail holds 4 nodes: 800 uplinks, not 1,024 -> 13 spines, not 16.
        pytest.param(100, 8, 64, FatTree(2, 800, 32, 13, 0, 0, 800 + 800), id="rail-groups"),
        # 16 DGX nodes: 8 leaves of 16 nodes: 128 uplinks -> 2 spines, 256 cables (issue: the
        # leaf's 32 up ports were counted, 4 spines and 384 cables).
        pytest.param(16, 8, 64, FatTree(2, 128, 8, 2, 0, 0, 128 + 128), id="16-nodes-half-leaves"),
        # 260 nodes: 9 leaves per rail (8 full, 1 of 4 nodes) -> 72 leaves, 3 pods; pods 0-1:
        # 32 × 32 uplinks -> 32 spines each; pod 2: 8 leaves × 4 -> 1 spine; 2,080 spine
        # uplinks -> 33 super-spines (was 96 spines, 48 super-spines, 7,456 cables).
        pytest.param(260, 8, 64, FatTree(3, 2080, 72, 65, 33, 3, 3 * 2080), id="three-partial"),
        pytest.param(256, 8, 64, FatTree(2, 2048, 64, 32, 0, 0, 4096), id="two-level-max"),
        # 128 leaves > 64: 4 pods × 32 spines; 128 × 32 / 64 = 64 super-spines.
        pytest.param(512, 8, 64, FatTree(3, 4096, 128, 128, 64, 4, 3 * 4096), id="three-level"),
        # k = 8: 16 leaves -> 4 pods × 4 spines, 16 × 4 / 8 = 8 cores (half a k=8 tree).
        pytest.param(64, 1, 8, FatTree(3, 64, 16, 16, 8, 4, 64 + 64 + 64), id="three-level-k8"),
    ],
)
def test_fat_tree(nodes: int, rails: int, radix: int, expected: FatTree) -> None:
    assert size_fat_tree(nodes, rails, radix) == expected


@pytest.mark.parametrize(
    ("nodes", "oversubscription", "spines", "cables"),
    [
        pytest.param(128, 1.0, 16, 1024 + 1024, id="1:1"),
        pytest.param(128, 2.0, 8, 1024 + 512, id="2:1"),  # 16 up per full leaf
        pytest.param(16, 2.0, 1, 128 + 64, id="2:1-half-leaves"),  # 8 up per 16-node leaf
    ],
)
def test_fat_tree_uplinks_follow_the_ports_used_at_the_oversubscription(
    nodes: int, oversubscription: float, spines: int, cables: int
) -> None:
    tree = size_fat_tree(nodes, 8, 64, oversubscription)
    assert (tree.spines, tree.cables) == (spines, cables)


def test_fat_tree_beyond_three_levels_is_refused() -> None:
    with pytest.raises(UserError, match="three-level"):
        size_fat_tree(129, 1, 8)  # 33 leaves -> 9 pods > 8


@pytest.mark.parametrize(
    ("gpus", "leaves", "spines", "cables", "topology"),
    [
        pytest.param(1024, 32, 16, 2048, "rail-optimised two-level fat-tree", id="two-level"),
        pytest.param(64, 1, 0, 64, "single switch", id="single-switch"),
        pytest.param(4096, 128, 192, 12288, "rail-optimised three-level fat-tree", id="three"),
    ],
)
def test_fabric_through_design(
    gpus: int, leaves: int, spines: int, cables: int, topology: str
) -> None:
    d = design(gpus=gpus)
    f = d.fabric
    assert (f.name, f.switch_radix, f.port_gbit_per_s) == ("ib-ndr-400", 64, 400.0)
    assert (f.leaf_switches, f.spine_switches, f.cables) == (leaves, spines, cables)
    assert f.nics == gpus
    assert f.oversubscription == 1.0
    assert f.topology.startswith(topology)
    assert d.power_kw["network"] == pytest.approx((leaves + spines) * SWITCH_KW)
    if gpus == 4096:
        assert "64 super-spines" in f.topology


def test_sixteen_nodes_buy_uplinks_for_the_ports_they_use() -> None:
    """128 GPUs: each rail's one leaf holds 16 nodes, so 16 up ports per leaf at 1:1 (the
    design counted all 32: 4 spines and 384 cables for 2 spines' and 256 cables' worth)."""
    d = design(gpus=128)
    f = d.fabric
    assert (f.leaf_switches, f.spine_switches, f.cables, f.nics) == (8, 2, 256, 128)
    assert "8 leaf switches (16 of 32 down ports used, 16 up) and 2 spines" in f.topology
    assert d.power_kw["network"] == pytest.approx(10 * SWITCH_KW)


@pytest.mark.parametrize(
    ("accelerator", "gpus", "phrase"),
    [
        pytest.param(
            H100,
            16384,
            "hold at most 256 nodes (2,048 GPUs) and this design has 2,048 nodes (16,384 GPUs)",
            id="405b-dgx",
        ),
        pytest.param(
            "gb200",
            8208,
            "hold at most 512 nodes (2,048 GPUs) and this design has 2,052 nodes (8,208 GPUs)",
            id="gb200-trays",
        ),
    ],
)
def test_three_level_sentence_counts_both_sides_in_one_unit(
    accelerator: str, gpus: int, phrase: str
) -> None:
    """It said '… 512 nodes (2,048 GPUs) and this design has 2,052' (trays, 8,208 GPUs)."""
    d = design(accelerator, gpus, rack_kw=120.0)
    assert d.fabric.topology.startswith("rail-optimised three-level fat-tree")
    assert phrase in d.fabric.topology


def test_training_that_stays_inside_its_nodes_needs_no_fabric() -> None:
    """A training layout that sends nothing across nodes (dp 1, cp 8 in one node on a
    multi-node fleet) gets front-end Ethernet, and says why (not 'inference only')."""
    d = design(gpus=16, need=need_for(0.0))
    assert d.fabric.name == "none"
    assert d.fabric.required_gbit_per_s_per_gpu == 0.0
    assert d.fabric.verdict.startswith("no cross-node training traffic: the training layout")
    assert "inference" not in d.fabric.verdict


def test_required_bandwidth_is_the_cross_node_bytes_over_the_step() -> None:
    """The planner passes every byte a GPU sends across nodes per step (already the ring's
    share, both halves of a reduce-scatter + all-gather): no factor 2 on top."""
    need = TrafficNeed(
        dp_bytes_per_step=29.18e9,  # the 405B plan's layout: DP 20.06 + CP 4.83 + PP 4.29 GB
        step_time_s=6.714,
        tp_crosses_nodes=False,
        checkpoint_bytes=0,
        dataset_bytes=0,
        tokens_per_s=0,
    )
    assert required_gbit_per_s_per_gpu(need) == pytest.approx(29.18e9 * 8 / 6.714 / 1e9)
    assert required_gbit_per_s_per_gpu(need) == pytest.approx(34.8, abs=0.05)


@pytest.mark.parametrize(
    ("required", "tp", "available", "starts", "contains"),
    [
        pytest.param(
            290.0,
            False,
            400.0,
            "needs 290 Gb/s per GPU: InfiniBand NDR 400 (or 400G RoCE) required",
            ", enough",
            id="high-ndr",
        ),
        pytest.param(
            40.0,
            False,
            400.0,
            "needs 40 Gb/s per GPU: 200G RoCE or InfiniBand HDR suffices",
            ", enough",
            id="low-200g",
        ),
        pytest.param(
            160.0,
            False,
            200.0,
            "needs 160 Gb/s per GPU: 200G RoCE or InfiniBand HDR suffices",
            ", enough",
            id="edge-200g",
        ),
        pytest.param(
            290.0,
            False,
            200.0,
            "needs 290 Gb/s per GPU: InfiniBand NDR 400",
            "too little",
            id="hdr-short",
        ),
        pytest.param(
            600.0,
            False,
            400.0,
            "needs 600 Gb/s per GPU: InfiniBand XDR 800 (or 800G Ethernet) required",
            "too little",
            id="xdr",
        ),
        pytest.param(
            1000.0,
            False,
            800.0,
            "needs 1,000 Gb/s per GPU: more than one 800G NIC per GPU can carry",
            "too little",
            id="beyond",
        ),
        pytest.param(
            20.0,
            True,
            400.0,
            "needs 20 Gb/s per GPU: InfiniBand NDR 400 (or 400G RoCE) required",
            "tensor parallelism crosses nodes",
            id="tp-crosses",
        ),
        pytest.param(
            20.0,
            True,
            200.0,
            "needs 20 Gb/s per GPU: InfiniBand NDR 400",
            "too little",
            id="tp-on-hdr",
        ),
    ],
)
def test_fabric_verdict(
    required: float, tp: bool, available: float, starts: str, contains: str
) -> None:
    verdict = fabric_verdict(required, tp, available, "some fabric", 8)
    assert verdict.startswith(starts)
    assert contains in verdict


@pytest.mark.parametrize(
    ("gbit", "scale_out", "starts", "ends"),
    [
        pytest.param(
            290.0,
            None,
            "needs 290 Gb/s per GPU: InfiniBand NDR 400 (or 400G RoCE) required",
            "enough",
            id="high-traffic",
        ),
        pytest.param(
            40.0,
            None,
            "needs 40 Gb/s per GPU: 200G RoCE or InfiniBand HDR suffices",
            "enough",
            id="low-traffic",
        ),
        pytest.param(
            290.0,
            "ib-hdr-200",
            "needs 290 Gb/s per GPU: InfiniBand NDR 400",
            "choose a faster fabric",
            id="high-on-hdr",
        ),
    ],
)
def test_verdict_through_design(gbit: float, scale_out: str | None, starts: str, ends: str) -> None:
    d = design(need=need_for(gbit), scale_out=scale_out)
    assert d.fabric.required_gbit_per_s_per_gpu == pytest.approx(gbit)
    # the bytes and the rule the figure rests on sit in brackets after it, then the tier
    head, _, tier = starts.partition(": ")
    gbytes = gbit / 8
    assert d.fabric.verdict.startswith(
        f"{head} ({gbytes:.1f} GB per GPU cross nodes in each 1.00 s step: the step's "
        "average, a floor;"
    )
    assert f"): {tier}" in d.fabric.verdict
    assert d.fabric.verdict.endswith(ends)


def test_hdr_override_uses_assumed_radix_and_port_rate() -> None:
    log = Assumptions()
    d = design(need=need_for(100.0), scale_out="ib-hdr-200", log=log)
    # DGX H100 NICs run at 400 but HDR ports at 200; QM8700 radix 40 (assumption): 20 down.
    assert d.fabric.available_gbit_per_s_per_gpu == pytest.approx(200.0)
    assert d.fabric.switch_radix == 40
    assert d.fabric.leaf_switches == 8 * math.ceil(128 / 20)
    radix = next(a for a in log.items if a.name == "design.switch_radix")
    assert radix.source.startswith("assumption")


def test_inference_only_has_no_fabric_and_no_storage() -> None:
    d = design_cluster(H100, 512, OnPremPreferences(), None, Assumptions())
    assert d.fabric.name == "none"
    assert (d.fabric.leaf_switches, d.fabric.spine_switches, d.fabric.nics) == (0, 0, 0)
    assert "front-end Ethernet suffices" in d.fabric.verdict
    assert "unless tensor parallelism crosses nodes" in d.fabric.verdict
    assert d.storage.choice == "none"
    assert d.power_kw["network"] == 0.0
    assert d.power_kw["storage"] == 0.0
    assert d.power_kw["it"] == pytest.approx(64 * 10.2)


@pytest.mark.parametrize(
    ("accelerator", "gpus", "phrase"),
    [
        pytest.param(H100, 8, "one node", id="one-dgx"),
        pytest.param("h100-pcie-80gb", 8, "one node", id="one-pcie-node"),
        pytest.param("gb200", 72, "one 72-GPU scale-up domain", id="one-nvl72"),
    ],
)
def test_no_fabric_inside_one_node_or_domain(accelerator: str, gpus: int, phrase: str) -> None:
    d = design(accelerator, gpus, need=need_for(290.0))
    assert d.fabric.name == "none"
    assert d.fabric.leaf_switches == 0
    assert phrase in d.fabric.verdict
    assert d.power_kw["network"] == 0.0


def test_inference_with_tp_across_nodes_sizes_the_fabric() -> None:
    need = need_for(0.0, tp=True)
    d = design(gpus=16, need=need)
    assert d.fabric.name == "ib-ndr-400"
    assert d.fabric.leaf_switches == 1
    assert "tensor parallelism crosses nodes" in d.fabric.verdict


# --- storage -----------------------------------------------------------------------------


class SizingCase(NamedTuple):
    extra: dict[str, Any]
    target_s: float
    retained: int
    read_gbytes_per_s: float
    write_gbytes_per_s: float
    capacity_bytes: float


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            SizingCase({}, 300.0, 3, 4e6 * 4 / 1e9, 1e12 / 300 / 1e9, (60e12 + 3e12) * 1.2),
            id="defaults",
        ),
        pytest.param(
            SizingCase(
                {"bytes_per_token": 2.0, "tokens_per_s": 5e7},
                100.0,
                5,
                5e7 * 2 / 1e9,
                1e12 / 100 / 1e9,
                (60e12 + 5e12) * 1.2,
            ),
            id="given-bpt",
        ),
    ],
)
def test_storage_sizing(case: SizingCase) -> None:
    log = Assumptions()
    d = design(
        need=need_for(100.0, **case.extra),
        log=log,
        checkpoint_write_target_s=case.target_s,
        checkpoints_retained=case.retained,
    )
    s = d.storage
    assert s.capacity_bytes == pytest.approx(case.capacity_bytes)
    assert s.read_gbytes_per_s == pytest.approx(case.read_gbytes_per_s)
    assert s.checkpoint_write_gbytes_per_s == pytest.approx(case.write_gbytes_per_s)
    assert (s.dataset_bytes, s.checkpoint_bytes) == (60e12, 1e12)
    assert s.checkpoints_retained == case.retained
    assert s.choice == "ddn-ai400x2-turbo"
    assert s.units == pytest.approx(case.capacity_bytes / TIB)
    for skipped in ("IBM Storage Scale", "WEKA", "VAST"):
        assert skipped in s.rationale
    logged = {a.name for a in log.items}
    assert ("design.bytes_per_token" in logged) == ("bytes_per_token" not in case.extra)


def _row(name: str, **values: Any) -> StorageRow:
    base = get_storage("vast")  # an on-prem row with no figures
    return base.model_copy(update={"name": name, "display_name": name, **values})


class ChoiceCase(NamedTuple):
    rows: list[StorageRow]
    capacity_tib: float
    rate_gbytes_per_s: float
    nodes: int
    choice: str
    units: float
    phrase: str


_PER_TIB = {"throughput_mbytes_per_s_per_tib": 500.0, "capacity_step_bytes": 4 * TIB}


@pytest.mark.parametrize(
    "case",
    [
        # 100 GB/s / 0.5 GB/s per TiB = 200 TiB (a multiple of the 4 TiB step).
        pytest.param(
            ChoiceCase(
                [
                    _row("per-node", throughput_gbytes_per_s_per_node=10.0),
                    _row("per-tib", **_PER_TIB),
                ],
                10.0,
                100.0,
                100,
                "per-tib",
                200.0,
                "meets it",
            ),
            id="per-tib-wins-sized-by-throughput",
        ),
        pytest.param(
            ChoiceCase(
                [_row("per-tib", min_capacity_bytes=8 * TIB, **_PER_TIB)],
                1.0,
                1.0,
                1,
                "per-tib",
                8.0,
                "meets it",
            ),
            id="per-tib-minimum",
        ),
        pytest.param(
            ChoiceCase([_row("per-tib", **_PER_TIB)], 9.0, 1.0, 1, "per-tib", 12.0, "meets it"),
            id="per-tib-step",
        ),
        pytest.param(
            ChoiceCase(
                [_row("per-tib", max_capacity_bytes=100 * TIB, **_PER_TIB)],
                10.0,
                100.0,
                1,
                "per-tib",
                200.0,
                "falls short",
            ),
            id="per-tib-over-max",
        ),
        # 2000 GB/s over 100 nodes = 20 GB/s per node > 10.
        pytest.param(
            ChoiceCase(
                [_row("per-node", throughput_gbytes_per_s_per_node=10.0)],
                50.0,
                2000.0,
                100,
                "per-node",
                50.0,
                "falls short",
            ),
            id="per-node-short",
        ),
        pytest.param(
            ChoiceCase(
                [_row("cluster", cluster_throughput_gbytes_per_s=2000.0)],
                50.0,
                1000.0,
                100,
                "cluster",
                50.0,
                "meets it",
            ),
            id="cluster-figure",
        ),
        pytest.param(
            ChoiceCase(
                [
                    _row("bare"),
                    _row(
                        "cloud",
                        kind="managed parallel FS (Lustre)",
                        throughput_mbytes_per_s_per_tib=1000.0,
                    ),
                ],
                50.0,
                10.0,
                100,
                "none",
                50.0,
                "no on-prem product",
            ),
            id="nothing-with-figures",
        ),
    ],
)
def test_choose_storage(case: ChoiceCase) -> None:
    choice, units, rationale = choose_storage(
        case.capacity_tib * TIB, case.rate_gbytes_per_s, 0.0, case.nodes, case.rows
    )
    assert choice == case.choice
    assert units == pytest.approx(case.units)
    assert case.phrase in rationale


def test_storage_rate_is_the_larger_of_read_and_write() -> None:
    rows = [_row("per-tib", **_PER_TIB)]
    assert choose_storage(TIB, 1.0, 50.0, 1, rows)[1] == pytest.approx(100.0)
    assert choose_storage(TIB, 50.0, 1.0, 1, rows)[1] == pytest.approx(100.0)


# --- completeness, assumptions, errors ----------------------------------------------------


def test_every_design_field_is_populated() -> None:
    d = design()
    for part in (d, d.fabric, d.storage):
        for name in type(part).model_fields:
            value = getattr(part, name)
            if name.startswith("site_"):
                continue  # only for a power-capped site (tests/plan/test_site_power.py)
            if name == "rack_power_stated_kw":
                continue  # only where one unit draws more than the rack budget
            assert value is not None, name
            if isinstance(value, str):
                assert value, name
    assert set(d.power_kw) == {"compute", "network", "storage", "it", "facility"}
    assert all(v > 0 for v in d.power_kw.values())
    assert d.fabric.leaf_switches > 0
    assert d.fabric.spine_switches > 0
    assert d.storage.units is not None
    assert d.storage.units > 0


def test_assumptions_are_logged_with_sources() -> None:
    log = Assumptions()
    design(log=log)
    by_name = {a.name: a for a in log.items}
    expected = {
        "design.system",
        "design.unit_power_kw",
        "design.rack_units_usable",
        "design.units_per_rack",
        "design.scale_out",
        "design.switch_radix",
        "design.oversubscription",
        "design.link_efficiency",
        "design.switch_power_kw",
        "design.storage_power",
        "design.storage_headroom",
        "design.bytes_per_token",
        "design.checkpoint_write_target_s",
        "design.pue",
    }
    assert expected <= set(by_name)
    assert all(a.source for a in log.items)
    assert "typical" in by_name["design.unit_power_kw"].source  # max chosen over typical
    assert by_name["design.switch_power_kw"].source.startswith("assumption")
    assert by_name["design.storage_power"].source.startswith("assumption")
    assert by_name["design.bytes_per_token"].value == "4.0"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"accelerator": "tpu-v5p"}, UserError, "cloud service", id="tpu"),
        pytest.param({"system": "dgx-a100"}, UserError, "holds", id="wrong-system"),
        pytest.param({"system": "p5.48xlarge"}, UserError, "cloud-instance", id="cloud-system"),
        pytest.param({"scale_out": "efa-p5"}, UserError, "cloud", id="cloud-fabric"),
        pytest.param({"scale_out": "nvlink-4"}, UserError, "scale-up", id="scaleup-fabric"),
        pytest.param({"gpus": 0}, ValueError, "gpus", id="zero-gpus"),
    ],
)
def test_bad_inputs(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        design(**kwargs)


def test_traffic_need_rejects_zero_step_time() -> None:
    with pytest.raises(ValueError, match="step_time_s"):
        need_for(10.0, step_time_s=0.0)


def test_a_third_fabric_level_names_the_size_that_forced_it() -> None:
    """Two more GPUs took a 256-node fabric from 96 switches to 216 without a word (issue
    27); the topology now says where two levels end."""
    two, three = design(gpus=2048), design(gpus=2056)
    assert "two-level" in two.fabric.topology
    assert "two levels of these switches hold at most 256 nodes (2,048 GPUs)" in (
        three.fabric.topology
    )
    assert "this design has 257" in three.fabric.topology
