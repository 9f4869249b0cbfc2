"""Idle capacity is charged only for GPUs that existed: a month before a node joined has none.

Review finding: `ledger.capacity_spans` left out a flavor none of whose nodes had joined by
the period's end, and `chargeback` then counted that flavor's GPUs from the spec over the
whole period. May's bill, made after an L4 node joined on June 10, charged its 4 GPUs ×
744 h of idle at $0.70 ($2,083.20); a month before the cluster existed read 17,280 idle
GPU-hours. The expected figures here are computed from the node join times by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, select

from gpufleet.cluster import Cluster
from gpufleet.control.models import NodeRecord
from gpufleet.specs.cluster import ClusterSpec

from .conftest import CLUSTER, Plane, build_plane

H100, A100, L4 = "h100-sxm5-80gb", "a100-sxm4-80gb", "l4"
START_S = 1_780_000_000.0  # the plane's clock: H100 and A100 nodes join then (May 28)


def utc(*ymd: int) -> float:
    return datetime(*ymd, tzinfo=UTC).timestamp()


@pytest.fixture
def grown(sqlite_engine: Engine) -> Plane:
    """The lab cluster plus one 4-GPU L4 node that joined on June 10; rates in force from
    May 1 (set on June 15 with re-pricing, as an admin restating a price list does)."""
    spec: dict[str, Any] = {**CLUSTER, "nodes": [*CLUSTER["nodes"]]}
    spec["nodes"].append(
        {
            "name": "l4",
            "count": 1,
            "accelerator": L4,
            "gpus_per_node": 4,
            "topology": {"block": "b2", "leaf": "l2"},
        }
    )
    plane = build_plane(sqlite_engine, Cluster.from_spec(ClusterSpec.model_validate(spec)))
    with plane.sessions.begin() as s:
        for node in s.scalars(select(NodeRecord).where(NodeRecord.accelerator == L4)):
            node.created_s = node.updated_s = utc(2026, 6, 10)
    plane.clock.now_s = utc(2026, 6, 15)
    for flavor, usd in ((H100, "2.00"), (L4, "0.70")):
        r = plane.client.put(
            f"/api/v1/admin/rates/{flavor}",
            params={"usd_per_gpu_h": usd, "effective": repr(utc(2026, 5, 1)), "reprice": "true"},
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200, r.text
    return plane


def _report(plane: Plane, start: str, end: str) -> dict[str, Any]:
    r = plane.client.get(
        "/api/v1/reports/chargeback",
        params={"from": start, "to": end, "group_by": "accelerator"},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_month_before_a_node_joined_has_no_idle_of_it(grown: Plane) -> None:
    report = _report(grown, "2026-05-01", "2026-06-01")
    may_h = (utc(2026, 6, 1) - START_S) / 3600  # H100 and A100 existed from May 28 20:26:40
    assert report["capacity_gpu_hours"] == pytest.approx((16 + 8) * may_h)  # was + 4 x 744
    assert report["idle_gpu_hours"] == pytest.approx((16 + 8) * may_h)
    # only H100 (16 GPUs at $2.00) and L4 have rates, and no L4 existed in May
    assert Decimal(report["idle"]["idle_cost_usd"]) == Decimal("2417.78")  # was 4500.98
    assert Decimal(report["totals"]["total_cost_usd"]) == Decimal("2417.78")
    assert L4 not in report["unpriced_flavors"]


def test_june_counts_the_new_node_from_when_it_joined(grown: Plane) -> None:
    report = _report(grown, "2026-06-01", "2026-06-15")
    l4_h = 4 * (utc(2026, 6, 15) - utc(2026, 6, 10)) / 3600  # 480 GPU-hours
    h100_h = 16 * 14 * 24
    assert report["capacity_gpu_hours"] == pytest.approx(l4_h + h100_h + 8 * 14 * 24)
    expected = Decimal(h100_h) * Decimal("2.00") + Decimal(l4_h) * Decimal("0.70")
    assert Decimal(report["totals"]["total_cost_usd"]) == expected  # 10752 + 336


def test_a_month_before_the_cluster_existed_is_empty(grown: Plane) -> None:
    report = _report(grown, "2026-04-01", "2026-05-01")
    assert report["capacity_gpu_hours"] == 0.0  # was 17,280 (24 GPUs x 720 h)
    assert report["idle_gpu_hours"] == 0.0
    assert report["idle"] is None
    # no flavor had a rate in April (they apply from May 1): said, though nothing is charged
    assert report["unpriced_flavors"] == [A100, H100, L4]
    assert Decimal(report["totals"]["total_cost_usd"]) == Decimal("0.00")
