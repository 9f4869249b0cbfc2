"""A fully sliced MIG GPU is allocated and billed as exactly one GPU, through the control plane.

On an A100 (7 compute slices) the all-balanced layout is 1g + 1g + 2g + 3g. Weighing each
slice by its own rounded-up share made that 143 + 143 + 286 + 429 = 1,001 thousandths: the
cluster endpoint showed the GPU over 100 % allocated and the ledger billed 0.1 % extra.
Slices are now weighed by where they lie on the GPU (design 0008), 142 + 143 + 286 + 429.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from gpufleet.cluster import Cluster
from gpufleet.control.models import Allocation, UsageEntry
from gpufleet.specs.cluster import ClusterSpec

from .conftest import build_plane

A100 = "a100-sxm4-80gb"
ONE_SLICED_GPU = {
    "kind": "cluster",
    "name": "mig-lab",
    "topology_levels": ["leaf", "node"],
    "nodes": [
        {
            "name": "h100",
            "count": 1,
            "accelerator": "h100-sxm5-80gb",
            "gpus_per_node": 8,
            "topology": {"leaf": "l1"},
        },
        {
            "name": "a100",
            "count": 1,
            "accelerator": A100,
            "gpus_per_node": 1,
            "topology": {"leaf": "l2"},
            "mig_layout": "all-balanced",  # 1g.10gb x 2, 2g.20gb, 3g.40gb
        },
    ],
}
PROFILES = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")


def test_a_fully_sliced_gpu_is_one_gpu_allocated_and_billed(sqlite_engine: Engine) -> None:
    cluster = Cluster.from_spec(ClusterSpec.model_validate(ONE_SLICED_GPU))
    plane = build_plane(sqlite_engine, cluster)
    ids = []
    for i, profile in enumerate(PROFILES):
        body: dict[str, Any] = {
            "name": f"serve{i}",
            "mig_profile": profile,
            "kind": "inference",
            "command": ["serve.py"],
            "runtime_estimate_s": 3600,
        }
        r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth("vision-member"))
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    plane.cycle()
    with plane.sessions() as s:
        rows = s.scalars(select(Allocation).where(Allocation.released_s.is_(None))).all()
        assert sorted(r.milli for r in rows) == [142, 143, 286, 429]
    got = plane.client.get("/api/v1/cluster", headers=plane.auth("admin")).json()
    (node,) = [n for n in got["nodes"] if n["accelerator"] == A100]
    assert node["allocated_milli"] == 1000
    assert [d["allocated_milli"] for d in node["devices"]] == [1000]
    assert got["allocated_gpus"][A100] == 1.0
    plane.cycle(1)
    plane.cycle(3600)
    for job_id in ids:
        r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth("vision-member"))
        assert r.json()["state"] == "succeeded", r.json()
    with plane.sessions() as s:
        ledger = s.scalars(select(UsageEntry)).all()
    assert sum(e.gpu_milli for e in ledger) == 1000
    spans = {(e.start_s, e.end_s) for e in ledger}
    assert len(spans) == 1  # the four held the GPU over the same interval
    ((start_s, end_s),) = spans
    held_gpu_s = sum(e.gpu_milli / 1000 * (e.end_s - e.start_s) for e in ledger)
    assert held_gpu_s == pytest.approx(end_s - start_s, rel=1e-12)  # one GPU, not 1.001
    report = plane.client.get(
        "/api/v1/reports/chargeback",
        params={"from": start_s - 1, "to": end_s + 1, "group_by": "accelerator"},
        headers=plane.auth("admin"),
    ).json()
    (row,) = [r for r in report["rows"] if r.get("accelerator") == A100]
    assert row["gpu_hours_allocated"] == pytest.approx((end_s - start_s) / 3600, rel=1e-9)


def test_the_chargeback_guide_states_the_slice_weights_the_ledger_bills() -> None:
    """docs/guide/control-plane.md explains why a 1g.10gb job bills 0.142 or 0.143 GPU (it
    was said only in code); its figures are the catalog's `layout_shares`, so a change to
    the weighing shows here."""
    from pathlib import Path

    from gpufleet.catalog.mig import get_mig_layout, layout_shares

    guide = Path(__file__).parents[2] / "docs" / "guide" / "control-plane.md"
    text = " ".join(guide.read_text().split())

    def gpu(layout: str) -> list[str]:
        instances = get_mig_layout(A100, layout).instances
        return [f"{m / 1000:.3f}" for m in layout_shares(A100, instances, 1000)]

    balanced = gpu("all-balanced")
    assert balanced == ["0.142", "0.143", "0.286", "0.429"]
    assert " + ".join(balanced) in text
    sevens = gpu("all-1g.10gb")
    assert sevens == ["0.142"] + ["0.143"] * 6
    assert "bill 0.142 + 6 × 0.143" in text
    assert " + ".join(gpu("all-3g.40gb")) in text
    assert "bills 0.142 GPU when it is the GPU's first compute slice and 0.143 GPU" in text
