"""The emulated collector is told what memory each running job holds on each GPU
(`EmulatedJob.mem_held_bytes`), read from its allocations and the catalog: a MIG slice's
job its slice's memory, a fraction's job its share of the GPU, a whole GPU's job the GPU.

A review found none of it passed: two 1g.10gb jobs on one A100 each read as holding 40 GB
(half the GPU, the even split for undeclared jobs) instead of 10 GB, and a 0.25 share
beside a 0.5 share held the same as it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy import Engine

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import get_mig_profile
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.telemetry_sources import TelemetryOptions, emulated_jobs, make_collector
from gpufleet.specs.cluster import ClusterSpec

from .conftest import Plane, build_plane

H100, A100, L4 = "h100-sxm5-80gb", "a100-sxm4-80gb", "l4"
CLUSTER = {
    "kind": "cluster",
    "name": "lab",
    "nodes": [
        {"name": "h100", "count": 1, "accelerator": H100, "gpus_per_node": 8},
        {
            "name": "a100",
            "count": 1,
            "accelerator": A100,
            "gpus_per_node": 1,
            "mig_layout": "all-balanced",
        },
        {"name": "l4", "count": 1, "accelerator": L4, "gpus_per_node": 1, "fractions": True},
    ],
}


@pytest.fixture
def plane(sqlite_engine: Engine) -> Plane:
    p = build_plane(sqlite_engine, Cluster.from_spec(ClusterSpec.model_validate(CLUSTER)))
    with p.sessions.begin() as s:
        admin.set_quota(s, admin.cli_principal(), "vision", L4, p.clock(), guaranteed_gpus=1)
    return p


def _submit(plane: Plane, **body: Any) -> int:
    r = plane.client.post(
        "/api/v1/jobs",
        json={"name": "x", "runtime_estimate_s": 10**5, **body},
        headers=plane.auth("vision-member"),
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_each_job_is_told_the_memory_it_holds(plane: Plane) -> None:
    whole = _submit(plane, gpus=2, accelerator=H100)
    slices = [_submit(plane, kind="interactive", mig_profile="1g.10gb") for _ in range(2)]
    big = _submit(plane, kind="interactive", mig_profile="3g.40gb")
    quarter = _submit(plane, kind="interactive", gpu_fraction=0.25, accelerator=L4)
    half = _submit(plane, kind="interactive", gpu_fraction=0.5, accelerator=L4)
    plane.cycle()
    plane.cycle(1)
    jobs = {int(j.job_id): j for j in emulated_jobs(plane.sessions, plane.reconciler.cluster)()}
    assert set(jobs) == {whole, *slices, big, quarter, half}, jobs

    h100 = get_accelerator(H100).memory_bytes
    l4 = get_accelerator(L4).memory_bytes
    ten = get_mig_profile(A100, "1g.10gb").memory_bytes
    assert dict(jobs[whole].mem_held_bytes) == {0: h100, 1: h100}
    for j in slices:
        assert dict(jobs[j].mem_held_bytes) == {0: ten}, jobs[j]
    assert dict(jobs[big].mem_held_bytes) == {0: get_mig_profile(A100, "3g.40gb").memory_bytes}
    assert dict(jobs[quarter].mem_held_bytes) == {0: l4 // 4}
    assert dict(jobs[half].mem_held_bytes) == {0: l4 // 2}


def test_the_collector_reads_each_slice_within_its_memory(plane: Plane) -> None:
    """Through `make_collector`, as `gpufleet serve` builds it: a 1g.10gb job reads at most
    10 GB (it read 35.2 GB, 88 % of half an 80 GB GPU, before)."""
    small = _submit(plane, kind="training", mig_profile="1g.10gb", checkpoint_interval_s=600)
    big = _submit(plane, kind="training", mig_profile="3g.40gb", checkpoint_interval_s=600)
    plane.cycle()
    plane.cycle(1)
    collector = make_collector(
        TelemetryOptions(), "emulated", plane.sessions, plane.reconciler.cluster
    )
    assert collector is not None
    used: dict[int, int] = defaultdict(int)
    for sample in collector.collect(plane.clock() + 3_600):
        if sample.job_id is not None:
            used[int(sample.job_id)] += sample.mem_used_bytes or 0
    assert 0 < used[small] <= get_mig_profile(A100, "1g.10gb").memory_bytes
    assert get_mig_profile(A100, "1g.10gb").memory_bytes < used[big]
    assert used[big] <= get_mig_profile(A100, "3g.40gb").memory_bytes
