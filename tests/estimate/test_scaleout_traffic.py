"""Bytes per GPU per step across the scale-out network, and the network the step runs on.

Review findings: the plan's fabric was sized from the bf16 weights per GPU × 2 (405B: 16 Gb/s
per GPU, where the step moves ~29 GB per GPU across nodes in 6.7 s, ~35 Gb/s; a fine-tune
at dp 1, cp 8 inside one node "needed" 20-79 Gb/s); and a stated `hardware.scale_out` was
ignored whenever the accelerator has a system row (405B on HDR 200, NDR 400 or EFA p4d:
the same 6.714 s step). Expected bytes are written from the model's dimensions here, not
read from the module under test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.training import Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_case import case_for
from gpufleet.estimate.training_estimate import estimate_training
from gpufleet.estimate.training_traffic import ScaleOutBytes
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

H100 = "h100-sxm5-80gb"
GBIT = 1e9 / 8  # bytes/s in one Gb/s


def spec(
    model: str,
    *,
    seq_len: int,
    global_batch: int,
    framework: str,
    count: int,
    parallelism: dict[str, Any] | None = None,
    hardware: dict[str, str] | None = None,
) -> TrainingSpec:
    data: dict[str, Any] = {
        "kind": "training",
        "model": {"preset": model},
        "training": {
            "seq_len": seq_len,
            "global_batch": global_batch,
            "tokens": "1T",
            "framework": framework,
        },
        "hardware": {"accelerator": H100, "count": count, **(hardware or {})},
    }
    if parallelism is not None:
        data["parallelism"] = parallelism
    return validate(TrainingSpec, data, "inline")


def traffic(case: TrainingCase, **layout: Any) -> tuple[ScaleOutBytes, Any]:
    ev = evaluate(case, Layouts.single(**layout))
    out = ScaleOutBytes(
        tp=ev.scaleout_tp_bytes[0],
        cp=ev.scaleout_cp_bytes[0],
        ep=ev.scaleout_ep_bytes[0],
        pp=ev.scaleout_pp_bytes[0],
        dp=ev.scaleout_dp_bytes[0],
    )
    return out, ev


PLAN_405B = {
    "tp": 8,
    "pp": 16,
    "dp": 32,
    "cp": 4,
    "microbatch": 1,
    "virtual_stages": 4,
    "zero_stage": 1,
    "recompute": "none",
    "sequence_parallel": True,
}


def case_405b() -> TrainingCase:
    s = spec("llama-3.1-405b", seq_len=8192, global_batch=2048, framework="nemo", count=16384)
    return case_for(s, Assumptions())


def test_the_405b_plan_layout_moves_dp_cp_and_pp_bytes_across_nodes() -> None:
    case = case_405b()
    lay = dict(PLAN_405B)
    lay.update(sp=lay.pop("sequence_parallel"), mb=lay.pop("microbatch"))
    lay.update(vs=lay.pop("virtual_stages"), zero=lay.pop("zero_stage"))
    out, ev = traffic(case, **lay)
    microbatches = 2048 // 32
    tokens = 8192 // 4  # one sequence per microbatch, split over cp 4
    stage_layers = 4 * -(-126 // (16 * 4))  # vs × ceil(layers / (pp × vs)) = 8
    # CP ring: (cp − 1) K/V chunks of tokens × 8 KV heads × (128 + 128) × 2 B / tp per layer,
    # forward and twice in the backward; tp · cp = 32 GPUs span four nodes
    kv = tokens * 8 * 256 * 2 / 8
    assert out.cp == pytest.approx(microbatches * stage_layers * 3 * kv * 3)
    # pipeline: one activation forward and one gradient back, tokens × hidden × 2 B / tp, per
    # microbatch and virtual stage
    assert out.pp == pytest.approx(microbatches * 4 * 2 * tokens * 16384 * 2 / 8)
    # data parallel: reduce-scatter of fp32 gradients, all-gather of bf16 weights, each rank
    # sending 31/32 of the buffer; tp · cp = 32 apart, so one rank per node: all on its NIC
    params = float(ev.params_per_gpu[0])
    grad = case.profile.grad_reduce_bytes
    assert grad == 4
    assert out.dp == pytest.approx(31 / 32 * params * (grad + 2))
    assert out.tp == 0.0
    assert out.ep == 0.0
    assert out.total / 1e9 == pytest.approx(29.18, abs=0.01)
    # ~35 Gb/s over the 6.71 s step (the plan printed 16 Gb/s from the weights alone)
    assert out.total * 8 / float(ev.step_time_s[0]) / 1e9 == pytest.approx(34.8, abs=0.1)


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param({"cp": 8, "zero": 3, "sp": False}, id="finetune-dp1-cp8"),
        pytest.param({"tp": 8}, id="tp8"),
        pytest.param({"tp": 2, "dp": 4}, id="tp2-dp4"),
    ],
)
def test_a_layout_inside_one_node_sends_nothing_across(layout: dict[str, Any]) -> None:
    s = spec("llama-3-70b", seq_len=4096, global_batch=128, framework="fsdp", count=8)
    out, _ = traffic(case_for(s, Assumptions()), **layout)
    assert out.total == 0.0


def test_a_dp_ring_with_several_ranks_per_node_shares_their_nics() -> None:
    """tp 2 × dp 64: four ranks of each ring per node, and NCCL's node-contiguous rings cross
    each node boundary once per channel: a NIC carries a quarter of one rank's ring bytes."""
    s = spec("llama-3-8b", seq_len=8192, global_batch=512, framework="megatron", count=128)
    case = case_for(s, Assumptions())
    out, ev = traffic(case, tp=2, dp=64, mb=2, zero=1)
    params = float(ev.params_per_gpu[0])
    expected = 63 / 64 * params * (case.profile.grad_reduce_bytes + 2) / 4
    assert out.dp == pytest.approx(expected)
    assert out.total == pytest.approx(expected)


def test_zero3_gathers_every_microbatch() -> None:
    """FSDP at dp 256, tp 1: two bf16 gathers and one gradient reduce-scatter of the whole
    model per microbatch, eight ranks per node sharing the node's NICs. The weights-based
    figure was 1.6 Gb/s; the layout moves ~70 GB per GPU per step, ~50 Gb/s."""
    s = spec("llama-3-70b", seq_len=8192, global_batch=256, framework="fsdp", count=256)
    case = case_for(s, Assumptions())
    out, ev = traffic(case, dp=256, zero=3, recompute="full", sp=False)
    params = float(ev.params_per_gpu[0]) * 256  # the shard × dp: every parameter
    volume = params * (2 * 2 + case.profile.grad_reduce_bytes)
    microbatches = 256 // 256
    assert out.dp == pytest.approx(microbatches * 255 / 256 * volume / 8)
    rate = out.total * 8 / float(ev.step_time_s[0]) / 1e9
    assert 40 < rate < 60


def test_tensor_parallelism_across_nodes_rides_the_fabric() -> None:
    s = spec("llama-3-70b", seq_len=4096, global_batch=128, framework="megatron", count=16)
    case = case_for(s, Assumptions())
    out, _ = traffic(case, tp=16, mb=1, recompute="none")
    # two all-reduces per layer and pass, 2(t − 1)/t of tokens × hidden × 2 B, forward and
    # backward, 80 layers, 128 microbatches
    per_layer = 2 * 2 * 15 / 16 * 4096 * 8192 * 2
    assert out.tp == pytest.approx(128 * 80 * 2 * per_layer)
    within, _ = traffic(case, tp=8, dp=2, mb=1, recompute="none")
    assert within.tp == 0.0


# --- the network the step runs on --------------------------------------------------------


@pytest.mark.parametrize(
    ("scale_out", "gbit_per_gpu"),
    [
        pytest.param(None, 400.0, id="dgx-h100-default"),
        pytest.param("ib-ndr-400", 400.0, id="ndr"),
        pytest.param("ib-hdr-200", 200.0, id="hdr-ports-on-400g-nics"),
        pytest.param("ib-xdr-800", 400.0, id="xdr-held-to-the-400g-nics"),
        pytest.param("efa-p4d", 50.0, id="efa-p4d-400-per-instance"),
        pytest.param("gcp-tcpx", 400.0, id="no-figure-keeps-the-systems"),
    ],
)
def test_a_stated_scale_out_overrides_the_systems_network(
    scale_out: str | None, gbit_per_gpu: float
) -> None:
    log = Assumptions()
    hw = resolve_hardware(H100, "bf16", log, scale_out=scale_out)
    assert hw.system == "dgx-h100"
    assert hw.scaleout_bytes_per_s == pytest.approx(gbit_per_gpu * GBIT)
    names = {a.name: a for a in log.items}
    if scale_out == "gcp-tcpx":
        assert "no bandwidth in fabrics.csv" in names["scale_out_bandwidth"].value
    elif scale_out is not None:
        stated = names[f"scale_out[{H100}]"]
        assert stated.value == f"{scale_out}: {gbit_per_gpu:,.0f} Gb/s per GPU"
        assert stated.source.startswith("hardware.scale_out")


def test_the_405b_step_slows_on_a_slower_stated_network() -> None:
    steps = {}
    names: tuple[str | None, ...] = (None, "ib-ndr-400", "ib-hdr-200", "efa-p4d")
    for scale_out in names:
        extra = None if scale_out is None else {"scale_out": scale_out}
        s = spec(
            "llama-3.1-405b",
            seq_len=8192,
            global_batch=2048,
            framework="nemo",
            count=16384,
            parallelism=PLAN_405B,
            hardware=extra,
        )
        est = estimate_training(s)
        steps[scale_out] = est.step_time_s
        used = {a.name: a.value for a in est.assumptions}[f"scale_out[{H100}]"]
        assert used.startswith(scale_out or "ib-ndr-400")
    assert steps[None] == pytest.approx(steps["ib-ndr-400"])
    assert steps["ib-hdr-200"] > steps["ib-ndr-400"] * 1.05
    assert steps["efa-p4d"] > steps["ib-hdr-200"]


def test_the_estimate_reports_its_scaleout_bytes() -> None:
    s = spec(
        "llama-3.1-405b",
        seq_len=8192,
        global_batch=2048,
        framework="nemo",
        count=16384,
        parallelism=PLAN_405B,
    )
    est = estimate_training(s)
    t = est.scaleout_bytes_per_gpu_per_step
    assert t.total == pytest.approx(t.tp + t.pp + t.dp + t.cp + t.ep)
    assert t.total / 1e9 == pytest.approx(29.18, abs=0.01)
    assert np.isclose(est.step_time_s, 6.714, atol=0.001)
