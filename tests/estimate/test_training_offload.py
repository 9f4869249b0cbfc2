"""Issue 28 (item 7): host memory as a second tier. A 70B fine-tune on 8 H100s fits only with
its optimizer state offloaded; the search finds it and prices the host-link traffic and the
CPU optimizer step, and never offloads what fits without it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpufleet.estimate import training_offload
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import Layouts, evaluate
from gpufleet.estimate.training_case import case_for
from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.estimate.training_memory import fitting_changes
from gpufleet.estimate.training_search import candidate_layouts, search_training
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

H100 = "h100-sxm5-80gb"


def _spec(framework: str, count: int = 8, model: str = "llama-3-70b") -> TrainingSpec:
    spec: dict[str, Any] = {
        "kind": "training",
        "model": model,
        "training": {
            "seq_len": 4096,
            "global_batch": 64,
            "precision": "bf16",
            "framework": framework,
        },
        "hardware": {"accelerator": H100, "count": count, "system": "dgx-h100"},
    }
    return validate(TrainingSpec, spec, "inline")


def _estimate(framework: str, count: int = 8) -> TrainingEstimate:
    return estimate_training(_spec(framework, count))


def test_70b_on_8_h100_fits_no_layout_without_offload() -> None:
    """70B × 16 B ÷ 8 = 141 GB of state per GPU: no layout of 8 GPUs holds it in 80 GB."""
    case = case_for(_spec("deepspeed"), Assumptions())
    space = candidate_layouts(case, [8], Counter())
    assert space.tp.size > 0
    assert (evaluate(case, space).total_bytes > case.hw.memory_bytes).all()


def test_70b_on_8_h100_fits_with_offload_priced_by_hand() -> None:
    est = _estimate("deepspeed")
    assert est.fits
    assert est.parallelism.offload == "optimizer"
    assert est.parallelism.zero_stage >= 1
    assert est.memory_per_gpu_bytes.optimizer == 0
    assert est.memory_per_gpu_bytes.total <= est.memory_capacity_bytes
    # By hand: the 8 GPUs shard 70.55B parameters (tp · pp = 1 in every fitting layout
    # here, shard over dp × cp = 8). Host link: (2 B bf16 gradient + 2 B bf16 weight) per
    # parameter at 64 GB/s × 0.8; CPU Adam: 30 B per parameter at 20 GB/s.
    par = est.parallelism
    assert par.tp * par.pp == 1
    shard = parameter_count(case_for(_spec("deepspeed"), Assumptions()).arch).total / 8
    host_link_s = shard * (2 + 2) / (64e9 * 0.8)
    cpu_s = shard * 30 / 20e9
    assert host_link_s == pytest.approx(0.689, abs=0.01)
    assert cpu_s == pytest.approx(13.23, abs=0.05)
    assert est.optimizer_time_s == pytest.approx(host_link_s + cpu_s, rel=1e-9)
    # The same layout without offload differs in step time by exactly that, less the GPU's
    # own optimizer step (which would not fit, but is still computed).
    case = case_for(_spec("deepspeed"), Assumptions())

    lay = Layouts.single(
        tp=par.tp,
        pp=par.pp,
        dp=par.dp,
        cp=par.cp,
        mb=par.microbatch,
        vs=par.virtual_stages,
        zero=par.zero_stage,
        recompute=par.recompute,
        sp=par.sequence_parallel,
    )
    on = evaluate(case, replace(lay, offload=np.array([1])))
    off = evaluate(case, lay)
    added = float(on.step_time_s[0] - off.step_time_s[0])
    assert added == pytest.approx(host_link_s + cpu_s - float(off.optimizer_s[0]), rel=1e-9)
    assert float(on.host_bytes[0]) == pytest.approx(shard * 12, rel=1e-9)
    assert float(off.total_bytes[0] - on.total_bytes[0]) == pytest.approx(shard * 12, rel=1e-9)
    # The reasons say so, with the seconds, and the assumptions name the link and rates.
    (reason,) = [r for r in est.reasons if r.startswith("optimizer offload")]
    assert f"{host_link_s + cpu_s:.2f} s per step" in reason
    names = {a.name for a in est.assumptions}
    assert {f"host_link[{H100}]", "host_link_efficiency", "cpu_optimizer_rate"} <= names


def test_search_finds_the_offloaded_layout_only_where_nothing_fits() -> None:
    result = search_training(_spec("deepspeed", count=64), [H100], gpu_counts=[8, 64], top_k=50)
    by_count = {c.gpus: c for c in result.top}
    assert by_count[8].offload == "optimizer"
    assert by_count[64].offload == "none"  # fits without: never offloaded
    names = {a.name for a in result.assumptions.frozen()}
    assert "host_link_efficiency" in names


def test_a_layout_that_fits_never_offloads() -> None:
    est = _estimate("deepspeed", count=64)
    assert est.fits
    assert est.parallelism.offload == "none"
    assert not any("offload" in a.name for a in est.assumptions)
    assert not any(r.startswith("optimizer offload") for r in est.reasons)


def test_frameworks_without_offload_never_use_it() -> None:
    est = _estimate("megatron-core")
    assert est.parallelism.offload == "none"
    assert not est.fits
    result = search_training(_spec("megatron-core"), [H100], gpu_counts=[8], top_k=50)
    assert result.top == []
    assert all(c.offload == "none" for c in result.top)


def test_too_little_host_memory_refuses_offload(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 90 % of host memory reserved, 27.5 GB per GPU cannot hold 106 GB of state."""
    monkeypatch.setattr(training_offload, "HOST_RESERVE_FRACTION", 0.9)
    result = search_training(_spec("deepspeed"), [H100], gpu_counts=[8], top_k=50)
    assert result.top == []
    assert result.rejected["offloaded optimizer state does not fit in host memory"] > 0
    est = _estimate("deepspeed")
    assert not est.fits
    assert est.parallelism.offload == "none"


def test_offload_is_listed_among_single_changes_with_its_cost() -> None:
    case = case_for(_spec("deepspeed"), Assumptions())

    lay = Layouts.single(dp=1, cp=8, zero=3, recompute="full", sp=False)
    assert float(evaluate(case, lay).total_bytes[0]) > case.hw.memory_bytes
    labels = [label for label, _ in fitting_changes(case, lay, case.hw.memory_bytes)]
    assert any(label.startswith("offload optimizer state (+") for label in labels)
    assert any("s/step over the host link" in label for label in labels)
