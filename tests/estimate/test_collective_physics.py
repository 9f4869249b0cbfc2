"""Issue 28: the physics behind the modern-row fixes, one scenario each.

- data-parallel rings pool the NICs of a node's ranks (NCCL: one channel per NIC);
- a fully recomputed forward reuses the backward's ZeRO-3 gather under FSDP;
- FP8 training saves GEMM inputs in FP8;
- a full-mesh scale-up (xGMI) gives a k-GPU group k - 1 of its links;
- HBM datasheet "GB" is GiB where the driver size is not known.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.models import get_model_preset
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for, framework_profile
from gpufleet.estimate.hardware import resolve_hardware, usable_memory_bytes
from gpufleet.estimate.training import (
    Layouts,
    TrainingCase,
    _layer_bytes_per_token,
    evaluate,
)
from gpufleet.estimate.training_comm import ring_bandwidth


def model_preset(name: str) -> ModelArch:
    return get_model_preset(name).arch()


UP, OUT = 350e9, 47.5e9


def ints(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


@pytest.mark.parametrize(
    ("stride", "size", "expected"),
    [
        pytest.param(1, 8, UP, id="inside-one-node"),
        pytest.param(8, 4, OUT, id="tp8-one-rank-per-node-one-nic"),
        pytest.param(4, 8, 1 / max(1 / (2 * UP), 1 / (2 * OUT)), id="tp4-two-ranks-two-nics"),
        pytest.param(1, 64, 1 / max(7 / (8 * UP), 1 / (8 * OUT)), id="tp1-eight-nics"),
    ],
)
def test_ring_pools_the_nics_of_the_groups_ranks(stride: int, size: int, expected: float) -> None:
    bw = ring_bandwidth(ints(stride), ints(size), 8, UP, OUT)
    assert float(bw[0]) == pytest.approx(expected)


def test_a_profile_that_measured_one_nic_per_gpu_keeps_it() -> None:
    assert framework_profile("deepspeed").dp_rails_aggregate is False
    bw = ring_bandwidth(ints(1), ints(64), 8, UP, OUT, rails=False)
    assert float(bw[0]) == pytest.approx(OUT)


def case(
    accelerator: str = "h100-sxm5-80gb", precision: str = "bf16", **kw: object
) -> TrainingCase:
    hw = resolve_hardware(accelerator, precision, Assumptions())  # type: ignore[arg-type]
    eff, _ = efficiency_for(hw.accelerator)
    base = TrainingCase(
        arch=model_preset("llama-3-8b"),
        seq_len=4096,
        global_batch=64,
        precision=precision,  # type: ignore[arg-type]
        dropout=False,
        hw=hw,
        eff=eff,
        profile=framework_profile("fsdp"),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_fsdp_recompute_adds_no_gather_deepspeed_does() -> None:
    lay = Layouts.single(dp=64, mb=1, zero=3, recompute="full", sp=False)
    none = Layouts.single(dp=64, mb=1, zero=3, recompute="none", sp=False)
    fsdp = case()
    assert evaluate(fsdp, lay).dp_comm_s[0] == pytest.approx(evaluate(fsdp, none).dp_comm_s[0])
    ds = case(profile=framework_profile("deepspeed"))
    assert evaluate(ds, lay).dp_comm_s[0] > 1.2 * evaluate(ds, none).dp_comm_s[0]


def test_fp8_saves_gemm_inputs_in_one_byte() -> None:
    lay = Layouts.single(dp=8, mb=1, zero=3, recompute="none", sp=False)
    bf16, _, _ = _layer_bytes_per_token(case(), lay, moe=False)
    fp8, _, _ = _layer_bytes_per_token(case(precision="fp8"), lay, moe=False)
    arch = model_preset("llama-3-8b")
    h, w = arch.hidden, arch.ffn_hidden
    # QKV and fc1 inputs and the fc2 input drop a byte each; O gains an FP8 copy.
    assert float(bf16[0] - fp8[0]) == pytest.approx(h + h + w - arch.heads * arch.head_dim)


def test_a_mesh_gives_a_group_only_the_links_to_its_peers() -> None:
    mi300x = resolve_hardware("mi300x", "bf16", Assumptions())
    h100 = resolve_hardware("h100-sxm5-80gb", "bf16", Assumptions())
    assert mi300x.scaleup_mesh
    assert not h100.scaleup_mesh
    assert mi300x.scaleup_share(ints(2, 4, 8)).tolist() == pytest.approx([1 / 7, 3 / 7, 1.0])
    assert h100.scaleup_share(ints(2, 4, 8)).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("name", "gib"),
    [("mi300x", 192), ("mi325x", 256), ("tpu-v5p", 95), ("gb200", 186)],
)
def test_hbm_datasheet_gigabytes_are_binary(name: str, gib: int) -> None:
    assert usable_memory_bytes(get_accelerator(name), Assumptions()) == gib * 2**30


def test_gddr_and_driver_reported_sizes_are_kept() -> None:
    assert usable_memory_bytes(get_accelerator("h100-sxm5-80gb"), Assumptions()) == 80 * 2**30
    l4 = get_accelerator("l4")
    assert usable_memory_bytes(l4, Assumptions()) < 24 * 2**30  # AWS reports decimal GB
