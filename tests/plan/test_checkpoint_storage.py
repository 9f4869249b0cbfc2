"""One checkpoint write bandwidth per run: the storage the plan designs is the storage its
goodput, wall clock, GPU-hours and cost were computed at; and a layout at the memory limit
is said in the summary, not only in the appendix.

The review: pretrain-405b designed "Checkpoint write burst 21.6 GB/s" (checkpoint / 300 s)
while its goodput assumed Llama 3's 2,000 GB/s (92.3 %, 78.3 days, 30,791,073 GPU-h); at
21.6 GB/s it is 73.3 %, 98.6 days, 38,758,110 GPU-h. pretrain-70b designed 3.76 GB/s and
said "89.9 days, meets constraints" on 2,048 H200s at 149.6 of 151.4 GB per GPU; at that
storage the run takes 97.4 days.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import pytest

from gpufleet.estimate.goodput import CHECKPOINT_WRITE_SHARE, goodput
from gpufleet.plan.model import Plan, WorkloadChoice
from gpufleet.plan.planner import plan
from gpufleet.plan.summary import MEMORY_NEAR_LIMIT, memory_near_limit_note
from gpufleet.report.render import render_html, render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

from .reviewed import at_storage

EXAMPLES = Path(__file__).parents[2] / "examples"
DAY_S = 86_400.0
H200 = "h200-sxm-141gb"


@cache
def _plan(name: str, storage: str | None = None, *accelerators: str) -> Plan:
    spec = load(PlanSpec, EXAMPLES / name)
    if storage is not None:
        spec = at_storage(spec, storage)
    if accelerators:
        spec = spec.model_copy(update={"accelerators": list(accelerators)})
    return plan(spec)


def _run(p: Plan) -> WorkloadChoice:
    (run,) = [c for c in p.recommendation.workloads if c.kind == "training"]
    return run


def _assumption(p: Plan, name: str) -> str:
    return next(a.source for a in p.assumptions if a.name == name)


@pytest.mark.parametrize("name", ["plan-pretrain-405b.yaml", "plan-pretrain-70b.yaml"])
def test_the_designed_storage_is_the_one_goodput_used(name: str) -> None:
    p = _plan(name)
    run = _run(p)
    assert p.design is not None
    rate = run.design_inputs["checkpoint_write_bytes_per_s"]
    assert p.design.storage.checkpoint_write_gbytes_per_s * 1e9 == pytest.approx(rate, rel=1e-12)
    # goodput at that rate gives every figure the plan reports for the run
    g = goodput(
        gpus=run.gpus,
        ideal_time_s=float(run.metrics["train_time_days"] or 0.0) * DAY_S,
        checkpoint_bytes=run.design_inputs["checkpoint_bytes"],
        storage_bytes_per_s=rate,
    )
    assert g.fraction == pytest.approx(run.metrics["goodput_fraction"], rel=1e-9)
    assert g.wall_clock_s / DAY_S == pytest.approx(
        run.metrics["wall_clock_days_with_failures"], rel=1e-9
    )
    assert g.gpu_hours == pytest.approx(run.gpu_hours, rel=1e-9)
    assert g.checkpoint_interval_s == pytest.approx(run.design_inputs["checkpoint_interval_s"])
    # the design rule: blocking writes are 1 % of the compute time between checkpoints, and
    # the (synchronous) write finishes inside the interval, so the storage keeps up
    assert g.checkpoint_write_s / g.checkpoint_interval_s == pytest.approx(CHECKPOINT_WRITE_SHARE)
    assert g.checkpoint_write_s < g.checkpoint_interval_s
    why = _assumption(p, f"checkpoint storage[{run.workload}]")
    assert "design rule" in why
    assert why in p.design.storage.rationale
    # the deadline is held to the wall clock the report shows
    deadline_days = {"plan-pretrain-405b.yaml": 100, "plan-pretrain-70b.yaml": 90}[name]
    assert run.meets_constraints
    assert (run.metrics["wall_clock_days_with_failures"] or math.inf) <= deadline_days


def test_405b_storage_and_figures_move_together() -> None:
    """2,954.8 GB/s (2.2 s per 6.49 TB checkpoint, every 219.8 s): goodput 0.92688, 77.96
    days, 30,654,218 GPU-h. By hand (Young/Daly): M = 11,135 s, τ ≈ sqrt(2 × 2.198 × 11,135)
    = 221 s, loss ≈ 2.198/220 + 221/22,270 + 600/11,135 = 0.0100 + 0.0099 + 0.0539."""
    run = _run(_plan("plan-pretrain-405b.yaml"))
    assert run.gpus == 16_384
    assert run.design_inputs["checkpoint_write_bytes_per_s"] == pytest.approx(2.9548e12, rel=1e-4)
    assert run.design_inputs["checkpoint_interval_s"] == pytest.approx(219.77, rel=1e-4)
    assert run.metrics["goodput_fraction"] == pytest.approx(0.92688, abs=1e-5)
    assert run.metrics["wall_clock_days_with_failures"] == pytest.approx(77.96, abs=0.01)
    assert run.gpu_hours == pytest.approx(30_654_218, rel=1e-6)


def test_a_stated_storage_is_designed_and_costed() -> None:
    """The storage the spec states is the storage the plan has: designed at 21.6 GB/s and
    costed there (a plan read the rate back from its dump × 10^9 and reported 94.6 %)."""
    p = _plan("plan-pretrain-405b.yaml", "21.6GB/s")
    run = _run(p)
    assert p.design is not None
    assert p.design.storage.checkpoint_write_gbytes_per_s == pytest.approx(21.6)
    assert run.design_inputs["checkpoint_write_bytes_per_s"] == pytest.approx(21.6e9)
    assert run.metrics["goodput_fraction"] == pytest.approx(0.7331, abs=1e-4)
    assert run.metrics["wall_clock_days_with_failures"] == pytest.approx(98.57, abs=0.01)
    assert run.gpu_hours == pytest.approx(38_758_110, rel=1e-6)
    assert "as the spec states" in p.design.storage.rationale


def test_70b_on_2048_h200_misses_90_days_at_the_storage_it_would_get() -> None:
    """At the 64.2 GB/s designed for 2,048 H200s (δ 17.6 s, τ 1,758 s, M 89,080 s: loss
    0.0100 + 0.0100 + 0.0067) goodput is 0.9736 and 88.95 ideal days take 91.4: the H200
    plan sizes 2,560 GPUs instead (79.5 days; the next whole-server count with a layout on
    the planner's grid), and H100 (2,560 GPUs, 80.3 days) is recommended. The alternatives
    are held to the same wall clock."""
    p = _plan("plan-pretrain-70b.yaml")
    h200 = next(a for a in p.alternatives if a.accelerator == H200)
    (h200_run,) = [c for c in h200.workloads if c.kind == "training"]
    assert h200_run.gpus == 2_560
    assert h200_run.meets_constraints
    assert (h200_run.metrics["wall_clock_days_with_failures"] or 0.0) <= 90
    alone = _plan("plan-pretrain-70b.yaml", None, H200)
    assert _run(alone).gpus == 2_560
    ideal_2048 = 88.95 * DAY_S
    at_2048 = goodput(
        gpus=2_048,
        ideal_time_s=ideal_2048,
        checkpoint_bytes=_run(alone).design_inputs["checkpoint_bytes"],
        storage_bytes_per_s=64.2e9,
    )
    assert at_2048.fraction == pytest.approx(0.9736, abs=1e-4)
    assert at_2048.wall_clock_s / DAY_S > 90


@pytest.fixture(scope="module")
def near_limit() -> Plan:
    """2,048 H200s for the 70B run, given 100 days: 149.6 of 151.4 GB per GPU (98.8 %)."""
    spec = load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml")
    training = [w.name for w in spec.workloads if w.kind == "training"]
    workloads = [
        w.model_copy(
            update={"constraints": w.constraints.model_copy(update={"deadline": 100 * DAY_S})}
        )
        if w.name in training
        else w
        for w in spec.workloads
    ]
    return plan(spec.model_copy(update={"accelerators": [H200], "workloads": workloads}))


def test_the_summary_says_the_layout_is_at_the_memory_limit(near_limit: Plan) -> None:
    run = _run(near_limit)
    assert run.gpus == 2_048
    used = run.metrics["memory_per_gpu_bytes"] or 0.0
    assert used / 151.4e9 > 0.95
    (note,) = [n for n in run.notes if n.startswith(MEMORY_NEAR_LIMIT)]
    assert "149.6 GB of 151.4 GB per GPU (98.8%)" in note
    # the search's next layout with headroom, with what it costs in days
    assert "the next layout with headroom the search found is on 2,560 GPUs" in note
    assert "79.5 days with failures, 11.9 days fewer" in note
    # the estimator's same-count changes, as the appendix gives them
    assert "on the same 2,048 GPUs, layouts that fit with headroom: recompute full" in note
    assert near_limit.summary is not None
    first = near_limit.summary.would_change[0]
    assert first.startswith(f"Memory near the limit for pretrain-70b on {H200}: the layout")
    assert note.removeprefix(f"{MEMORY_NEAR_LIMIT}: ") in first
    md, html = render_markdown(near_limit), render_html(near_limit)
    for text in (md, html):
        assert "Memory near the limit for pretrain-70b" in text
    # the workloads' notes, beside the "meets constraints" column
    assert "- pretrain-70b: memory near the limit: the layout uses" in md
    assert "<strong>pretrain-70b</strong>: memory near the limit: the layout uses" in html


def test_a_layout_with_headroom_says_nothing() -> None:
    p = _plan("plan-pretrain-405b.yaml")
    assert not _run(p).notes
    assert p.summary is not None
    assert not any(s.startswith("Memory near the limit") for s in p.summary.would_change)


def test_the_threshold_is_95_percent() -> None:
    def note(used: float) -> str | None:
        return memory_near_limit_note(
            used_bytes=used,
            capacity_bytes=100e9,
            wall_clock_days=10.0,
            cost_usd=None,
            gpus=8,
            same_gpus=None,
            roomier=None,
        )

    assert note(95e9) is None
    text = note(95.1e9)
    assert text is not None
    assert text.startswith(f"{MEMORY_NEAR_LIMIT}: the layout uses 95.1 GB of 100.0 GB per GPU")
    assert text.endswith("the search found no other GPU count with a layout within 90.0% of memory")
