"""MIG slice weights: a GPU's slices add up to exactly 1000 thousandths, each within 1 of its
compute share (design 0008, "MIG slice weights").

A slice weighs floor(1000 * end / whole) - floor(1000 * start / whole) for the compute
slices [start, end) it covers, instances laid end to end in layout order. Rounding each
slice's share on its own cannot be exact (7 x 1g on an A100: 7 x 143 = 1001, or 7 x 142 =
994); the telescoping sum can. The quota, the allocation rows and the ledger all use it.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.catalog.mig import (
    MigLayout,
    get_mig_profile,
    layout_shares,
    layout_starts,
    load_mig_layouts,
    mig_accelerators,
    span_share,
    whole_gpu_slices,
)
from gpufleet.cluster import Cluster, MigSlice, Node, State
from gpufleet.sched.framework import Placement
from gpufleet.sched.quota import placements_milli, slice_milli, usage_milli

MILLI = 1000
LAYOUTS = load_mig_layouts()


def _instances(layout: MigLayout) -> list[str]:
    return [profile for profile, count in layout.instances for _ in range(count)]


def _check(accelerator: str, order: list[str]) -> None:
    """The weights of `order` (instances end to end) on one GPU of `accelerator`."""
    whole = whole_gpu_slices(accelerator)
    sizes = [get_mig_profile(accelerator, p).compute_slices for p in order]
    used = sum(sizes)
    weights = layout_shares(accelerator, [(p, 1) for p in order], MILLI)
    starts = layout_starts(accelerator, [(p, 1) for p in order])
    assert len(weights) == len(order)
    idle = span_share(used, whole - used, whole, MILLI) if used < whole else 0
    assert sum(weights) + idle == MILLI  # per GPU, exactly: its slices and its idle rest
    assert sum(weights) == MILLI * used // whole  # == 1000 on a fully sliced GPU
    for profile, size, first, weight in zip(order, sizes, starts, weights, strict=True):
        exact = Fraction(MILLI * size, whole)
        assert abs(weight - exact) < 1, (profile, first, weight, exact)
        assert weight == span_share(
            first, get_mig_profile(accelerator, profile).compute_slices, whole, MILLI
        )
        assert weight <= slice_milli(accelerator, profile)  # the charge before placing


@pytest.mark.parametrize(
    "layout", LAYOUTS, ids=[f"{row.accelerator}:{row.name}" for row in LAYOUTS]
)
def test_every_catalog_layout_weighs_one_gpu_in_its_own_order(layout: MigLayout) -> None:
    _check(layout.accelerator, _instances(layout))


@given(
    layout=st.sampled_from(LAYOUTS),
    data=st.data(),
)
def test_every_catalog_layout_weighs_one_gpu_in_any_order(
    layout: MigLayout, data: st.DataObject
) -> None:
    """Any order of a layout's instances (the order is the convention that places them)."""
    order = data.draw(st.permutations(_instances(layout)), label="order")
    _check(layout.accelerator, order)


def test_every_mig_accelerator_has_layouts_and_its_full_ones_weigh_exactly_1000() -> None:
    full = 0
    for acc in mig_accelerators():
        rows = [row for row in LAYOUTS if row.accelerator == acc]
        assert rows, acc
        whole = whole_gpu_slices(acc)
        for row in rows:
            used = sum(get_mig_profile(acc, p).compute_slices * n for p, n in row.instances)
            if used == whole:
                full += 1
                assert sum(layout_shares(acc, row.instances, MILLI)) == MILLI, row.name
    assert full >= len(mig_accelerators())  # each has at least all-balanced and all-7g


def test_the_issue_case_a100_1g_1g_2g_3g_is_1000_not_1001() -> None:
    balanced = next(
        r for r in LAYOUTS if r.accelerator == "a100-sxm4-80gb" and r.name == "all-balanced"
    )
    assert balanced.instances == (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))
    assert layout_shares("a100-sxm4-80gb", balanced.instances, MILLI) == (142, 143, 286, 429)
    assert [slice_milli("a100-sxm4-80gb", p) for p in ("1g.10gb", "2g.20gb", "3g.40gb")] == [
        143,
        286,
        429,
    ]
    assert layout_shares("a100-sxm4-80gb", (("1g.10gb", 7),), MILLI) == (
        142,
        143,
        143,
        143,
        143,
        143,
        143,
    )


@given(
    whole=st.integers(1, 64),
    scale=st.sampled_from([1000, 1024, 7, 1]),
    cuts=st.lists(st.integers(1, 63), max_size=10),
)
def test_spans_end_to_end_add_up_to_the_scale(whole: int, scale: int, cuts: list[int]) -> None:
    points = sorted({0, whole, *(c for c in cuts if c < whole)})
    weights = [span_share(a, b - a, whole, scale) for a, b in itertools.pairwise(points)]
    assert sum(weights) == scale
    for (a, b), w in zip(itertools.pairwise(points), weights, strict=True):
        assert abs(w - Fraction(scale * (b - a), whole)) < 1


@pytest.mark.parametrize(("start", "size", "whole"), [(-1, 1, 7), (0, 0, 7), (6, 2, 7), (0, 8, 7)])
def test_a_span_off_the_gpu_is_refused(start: int, size: int, whole: int) -> None:
    with pytest.raises(ValueError, match="do not lie on"):
        span_share(start, size, whole, MILLI)


def test_the_cluster_state_and_quota_weigh_each_gpus_slices_to_its_layouts_sum() -> None:
    """One GPU per catalog layout: slice ids carry their weight (SliceInfo.milli), a job
    holding a GPU's slices uses exactly their sum (State.usage, usage_by, placements)."""
    nodes = tuple(
        Node(f"n{i}", row.accelerator, 1, mig=(tuple(row.instances),))
        for i, row in enumerate(LAYOUTS)
    )
    cluster = Cluster(("node",), nodes)
    state = State(cluster)
    for i, row in enumerate(LAYOUTS):
        node = f"n{i}"
        slices = [sid for sid in cluster.slices() if sid.startswith(f"{node}/")]
        infos = [cluster.slice_info(sid) for sid in slices]
        want = layout_shares(row.accelerator, row.instances, MILLI)
        assert [info.milli for info in infos] == list(want)
        assert [info.first_slice for info in infos] == list(
            layout_starts(row.accelerator, row.instances)
        )
        state.allocate(node, *(MigSlice(sid) for sid in slices))
        assert usage_milli(state.usage(node)) == {row.accelerator: sum(want)}
        placed = [Placement(node, mig_slices=tuple(slices))]
        assert placements_milli(cluster, placed) == sum(want)
    per_acc: dict[str, int] = {}
    for row in LAYOUTS:
        per_acc[row.accelerator] = per_acc.get(row.accelerator, 0) + sum(
            layout_shares(row.accelerator, row.instances, MILLI)
        )
    assert usage_milli(state.usage_by(lambda job: "all")["all"]) == per_acc
    first = LAYOUTS[0]
    held = {first.accelerator: sum(layout_shares(first.accelerator, first.instances, MILLI))}
    with state.branch() as b:  # rolled back: the exact weights follow releases and undo
        b.release_all("n0")
        assert usage_milli(b.usage("n0")) == {}
        b.allocate("n0", MigSlice(next(iter(cluster.slices()))))
        assert usage_milli(b.usage("n0")) == {first.accelerator: 142}
    assert usage_milli(state.usage("n0")) == held
