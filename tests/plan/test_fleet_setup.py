"""What the multi-team plan simulates: services sized, MIG cut, traces retimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet_services import size_service
from gpufleet.plan.fleet_setup import (
    build_cluster,
    draw_workload,
    duration_factor,
    make_variant,
    prepare_candidate,
    read_team_trace,
    trace_over_horizon,
)
from gpufleet.specs.fleet import PlanInferenceEntry

from .fleet_cases import SACCT_SAMPLE, spec, tiny


def _service(rate: float, **extra: object) -> PlanInferenceEntry:
    return PlanInferenceEntry.model_validate(
        {
            "kind": "inference",
            "name": "svc",
            "model": {"preset": "llama-3-8b"},
            "request_rate": rate,
            "slo": {"ttft_p99_ms": 800},
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("accelerator", "rate", "extra", "profile", "replicas"),
    [
        pytest.param("h100-sxm5-80gb", 1.0, {}, "3g.40gb", 1, id="small-service-on-a-slice"),
        pytest.param("h100-sxm5-80gb", 1.0, {"mig": False}, None, 1, id="mig-off"),
        pytest.param("h100-sxm5-80gb", 200.0, {}, None, 13, id="big-service-whole-gpus"),
        pytest.param("mi300x", 1.0, {}, None, 1, id="no-mig-on-mi300x"),
    ],
)
def test_services_are_sized_by_the_estimator(
    accelerator: str, rate: float, extra: dict[str, object], profile: str | None, replicas: int
) -> None:
    sized = size_service("t", _service(rate, **extra), accelerator, Assumptions())
    assert not isinstance(sized, str)
    assert sized.mig_profile == profile
    assert sized.replicas == replicas
    if profile is None:
        assert sized.gpu_equivalent == sized.replicas * sized.tp
    else:
        assert sized.gpu_equivalent < sized.whole_gpus
        assert sized.ttft_ms <= 800


def test_an_unservable_service_says_why() -> None:
    entry = _service(5.0, slo={"ttft_p99_ms": 0.01})
    sized = size_service("t", entry, "h100-sxm5-80gb", Assumptions())
    assert isinstance(sized, str)
    assert "cannot serve it within the SLO" in sized


def test_slices_are_cut_at_the_front_of_the_cluster() -> None:
    plan = spec()
    c = prepare_candidate(plan, "h100-sxm5-80gb", [], Assumptions())
    assert c.feasible
    assert c.gpus_per_node == 8
    assert c.mig == (("3g.40gb", 1, (("3g.40gb", 2),)),)
    v = make_variant(plan, c, [], profile="default")
    cluster = build_cluster(v, 3)
    assert cluster.gpu_count == 24
    first = cluster.nodes[0]
    assert first.layout(0) == (("3g.40gb", 2),)
    assert first.layout(1) == ()
    assert all(not n.mig for n in cluster.nodes[1:])
    jobs = draw_workload(v, 0).jobs
    chat = [j for j in jobs if j.kind == "inference"]
    assert [j.mig_profile for j in chat] == ["3g.40gb"]
    assert all(not j.preemptible and j.priority_class == "production" for j in chat)
    assert draw_workload(v, 0) == draw_workload(v, 0)  # the seed fixes the draw
    assert draw_workload(v, 0).jobs != draw_workload(v, 1).jobs


def test_a_gang_larger_than_a_node_is_reported_per_accelerator() -> None:
    data = tiny()
    data["teams"][1]["workloads"][0]["gpus_per_worker"] = 16
    data["teams"][1]["workloads"][0]["gpus"] = {"choices": [16]}
    c = prepare_candidate(spec(data), "h100-sxm5-80gb", [], Assumptions())
    assert not c.feasible
    assert "gpus_per_worker 16 is more than a h100-sxm5-80gb node has (8)" in c.problems[0]


def test_a_trace_joins_its_team_and_repeats_over_the_horizon(tmp_path: Path) -> None:
    data = tiny()
    data["teams"][1] = {
        "name": "research",
        "targets": {"wait_p95": "6h"},
        "priority": "opportunistic",
        "trace": {"path": str(SACCT_SAMPLE), "format": "sacct"},
    }
    plan = spec(data)
    trace = read_team_trace(plan.teams[1], tmp_path)
    assert trace.report_lines[0].startswith("sacct_sample.txt: read")
    assert all(j.team == "research" and j.accelerators == () for j in trace.jobs)
    assert all(j.priority_class == "opportunistic" for j in trace.jobs)
    assert min(j.submit_s for j in trace.jobs) == 0
    jobs, copies = trace_over_horizon(trace, 2 * 86400, 1.0)
    assert copies > 1
    assert all(j.submit_s < 2 * 86400 for j in jobs)
    assert len({j.name for j in jobs}) == len(jobs)
    faster, _ = trace_over_horizon(trace, 2 * 86400, 1.25)
    assert len(faster) >= len(jobs)  # 25 % more arrivals in the same window
    c = prepare_candidate(plan, "h100-sxm5-80gb", [trace], Assumptions())
    assert c.largest_gang_nodes == 8  # the trace's 64-GPU run on 8 nodes


def test_durations_scale_with_the_reference_accelerator() -> None:
    assert duration_factor(None, "b200-sxm-192gb") == 1.0
    assert duration_factor("h100-sxm5-80gb", "h100-sxm5-80gb") == 1.0
    faster = duration_factor("a100-sxm4-80gb", "h100-sxm5-80gb")
    assert 0.2 < faster < 0.5  # 312 vs 989 dense BF16 TFLOPS
    data = tiny(durations_on="a100-sxm4-80gb")
    plan = spec(data)
    c = prepare_candidate(plan, "h100-sxm5-80gb", [], Assumptions())
    scaled = make_variant(plan, c, [], profile="default")
    plain = make_variant(spec(), c, [], profile="default")
    a = {j.name: j.duration_s for j in draw_workload(scaled, 0).jobs if j.kind != "inference"}
    b = {j.name: j.duration_s for j in draw_workload(plain, 0).jobs if j.kind != "inference"}
    assert a.keys() == b.keys()
    assert all(abs(a[k] - b[k] * faster) <= 1e-6 * b[k] for k in a)
