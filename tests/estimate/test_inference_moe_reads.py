"""A mixture-of-experts decode step reads only the experts its tokens are routed to.

Review finding: Mixtral 8x7B at batch 1 on 2 H100 printed 23.1 ms per token, reading all
46.7B parameters each step; 2 of 8 experts per layer are used (12.9B active), about 8 ms."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.catalog.models import get_model_preset as get_model
from gpufleet.estimate.inference import weight_bytes_per_gpu, weight_bytes_read_per_gpu
from gpufleet.estimate.params import parameter_count

TP = np.array([2.0])


def test_one_token_reads_its_experts_and_a_large_batch_reads_all() -> None:
    arch = get_model("mixtral-8x7b").arch()
    counts = parameter_count(arch)
    total = float(weight_bytes_per_gpu(arch, "bf16", TP)[0])
    one = float(weight_bytes_read_per_gpu(arch, "bf16", TP, np.array([1.0]))[0])
    idle = counts.routed_experts * (1 - arch.experts_per_token / arch.experts)
    assert one == pytest.approx(total - idle * 2.0 / 2)
    assert one == pytest.approx(total * counts.active_per_token / counts.total, rel=0.01)
    many = float(weight_bytes_read_per_gpu(arch, "bf16", TP, np.array([4096.0]))[0])
    assert many == pytest.approx(total)
    reads = weight_bytes_read_per_gpu(arch, "bf16", TP, np.array([1.0, 2.0, 4.0, 8.0, 64.0]))
    assert np.all(np.diff(reads) > 0)


def test_a_dense_model_reads_every_weight_each_step() -> None:
    arch = get_model("llama-3-8b").arch()
    for tokens in (1.0, 100.0):
        assert (
            weight_bytes_read_per_gpu(arch, "fp8", TP, np.array([tokens]))[0]
            == (weight_bytes_per_gpu(arch, "fp8", TP)[0])
        )
