"""Parts of `gpufleet estimate training` a reader adds up or checks by hand (found by a
review of the estimate face): the checkpoint the goodput model writes holds every parameter
once, and the terminal lists every dimension the exposed communication comes from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli.main import app
from gpufleet.estimate.goodput import goodput
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import TRAINING_STATE_BYTES_PER_PARAM
from gpufleet.estimate.training_estimate import estimate_training
from gpufleet.specs.load import load
from gpufleet.specs.training import TrainingSpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "training-llama3-405b.yaml"


def test_the_checkpoint_holds_every_parameter_once() -> None:
    """The 405B example runs pp 8 with the embedding on its busiest stage: that stage's
    parameters x tp x pp overcounted the checkpoint by 8.8 %, and so its interval."""
    spec = load(TrainingSpec, EXAMPLE)
    est = estimate_training(spec)
    assert est.parallelism.pp > 1
    rel = spec.reliability
    want = goodput(
        gpus=est.gpus,
        ideal_time_s=est.train_time_days * 86_400 if est.train_time_days else 0.0,
        checkpoint_bytes=parameter_count(spec.model).total * TRAINING_STATE_BYTES_PER_PARAM,
        storage_bytes_per_s=rel.checkpoint_storage if rel else None,
        gpu_mtbf_s=rel.gpu_mtbf if rel else None,
        restart_s=rel.restart_overhead if rel else None,
        checkpoint_interval_s=rel.checkpoint_interval if rel else None,
    )
    assert est.checkpoint_interval_s == pytest.approx(float(want.checkpoint_interval_s))


def test_the_terminal_lists_context_parallel_communication(tmp_path: Path) -> None:
    spec = tmp_path / "cp.yaml"
    spec.write_text(
        "kind: training\nname: long\nmodel: {preset: llama-3-8b}\n"
        "training: {seq_len: 100000, global_batch: 512, tokens: 1T, precision: bf16,"
        " optimizer: adam, framework: megatron}\n"
        "hardware: {accelerator: h100, count: 64}\n",
        encoding="utf-8",
    )
    est = estimate_training(load(TrainingSpec, spec))
    assert est.comm_time_s.cp > 0
    out = CliRunner().invoke(app, ["estimate", "training", str(spec)], env={"COLUMNS": "200"})
    line = next(x for x in out.stdout.splitlines() if x.startswith("comm "))
    assert line.startswith("comm tp / pp / dp / cp (exposed)")
    assert f"{est.comm_time_s.cp:.3f}" in line
