"""`estimate training` computes goodput at the storage `gpufleet plan` builds for the run when
the spec states none, so the two commands agree on a run's wall clock.

It used the goodput model's default (Meta's 2,000 GB/s Tectonic) and cited it: the 405B run
on 16,384 GPUs read 92.3 % goodput here and 92.7 % in a plan at the 2,955 GB/s it builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.estimate.goodput import (
    default_reliability,
    designed_checkpoint_write_bytes_per_s,
    goodput,
)
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import TRAINING_STATE_BYTES_PER_PARAM
from gpufleet.estimate.training_estimate import estimate_training
from gpufleet.specs.load import load
from gpufleet.specs.training import Reliability, TrainingSpec

SPEC = Path(__file__).parents[2] / "examples" / "training-llama3-405b.yaml"


def _spec(reliability: Reliability | None) -> TrainingSpec:
    return load(TrainingSpec, SPEC).model_copy(update={"reliability": reliability})


def test_without_storage_the_goodput_is_at_the_designed_rate() -> None:
    spec = _spec(None)
    est = estimate_training(spec)
    gpus = 16_384
    checkpoint = float(parameter_count(spec.model).total) * TRAINING_STATE_BYTES_PER_PARAM
    rate = float(designed_checkpoint_write_bytes_per_s(gpus=gpus, checkpoint_bytes=checkpoint))
    assert rate == pytest.approx(2_954.8e9, rel=1e-3)
    assert est.train_time_days is not None
    expected = goodput(
        gpus=gpus,
        ideal_time_s=est.train_time_days * 86_400.0,
        checkpoint_bytes=checkpoint,
        storage_bytes_per_s=rate,
    )
    assert est.goodput_fraction == pytest.approx(float(expected.fraction), rel=1e-9)
    names = {a.name: a for a in est.assumptions}
    assert names["checkpoint_storage"].value == "2,954.8 GB/s"
    tectonic = default_reliability().checkpoint_write_source.partition(": ")[0]
    assert f"reliability[{tectonic}]" not in names  # not the storage the goodput used


def test_a_stated_storage_is_used_as_given() -> None:
    est = estimate_training(_spec(Reliability.model_validate({"checkpoint_storage": "200GB/s"})))
    names = {a.name for a in est.assumptions}
    assert "checkpoint_storage" not in names
    assert est.goodput_fraction == pytest.approx(0.873, abs=5e-4)
