"""Bytes one GPU sends over the scale-out network per training step, by parallel group.

The plan's fabric is sized from this (plan/design/fabric.py), so it is read off the volumes
the step model times (`estimate.training.evaluate`), not re-derived: a fabric sized from the
bf16 weights alone said 16 Gb/s per GPU for a 405B layout whose step moves ~29 GB per GPU
across nodes (fp32 gradient reduce-scatter, bf16 weight all-gather, the context-parallel
ring and the pipeline sends), and 20 Gb/s for a fine-tune that never leaves its node.

A group's traffic leaves the node when the group spans more than one scale-up island (a
board, or a rack-scale domain such as NVL72: `max(domain, GPUs per node)`), with Megatron's
rank order (tensor, context, data, pipeline):
- tensor parallel: tp > island; its all-reduces then ride the fabric in full;
- context parallel: tp·cp > island; each GPU's K/V ring sends (the rank at a node's edge
  sends all of its sends across, and the ring runs at its pace);
- expert parallel: tp·ep > island; the all-to-all dispatch and combine;
- pipeline: neighbours tp·cp·dp ranks apart on different islands (as the step model places
  them); each GPU sends one activation forward and one gradient back per microbatch and
  virtual stage;
- data parallel (and ZeRO-3's per-microbatch gathers): the ring's bytes that go over a NIC,
  1/local of a rank's ring volume when `local` ranks of the group share a node's NICs
  (`training_comm.ring_nic_share`, the rule `ring_bandwidth` times them by).
Figures are per GPU of the busiest pipeline stage (the one the step time is timed on), in
one direction: a NIC's line rate is quoted per direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpufleet.estimate.efficiency import FrameworkProfile
from gpufleet.estimate.hardware import GpuHardware
from gpufleet.estimate.training_comm import ring_nic_share

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Case(Protocol):
    """What this module reads of `estimate.training.TrainingCase`."""

    @property
    def hw(self) -> GpuHardware: ...

    @property
    def profile(self) -> FrameworkProfile: ...


class Axes(Protocol):
    """The parallel axes of `estimate.training.Layouts` this module reads (Protocols, so the
    step model can call in here without an import circle)."""

    @property
    def tp(self) -> IntArray: ...

    @property
    def pp(self) -> IntArray: ...

    @property
    def dp(self) -> IntArray: ...

    @property
    def cp(self) -> IntArray: ...

    @property
    def ep(self) -> IntArray: ...

    @property
    def vs(self) -> IntArray: ...

    @property
    def zero(self) -> IntArray: ...


class StageBytes(Protocol):
    """The critical pipeline stage (`estimate.training._Stage`): per-microbatch sums over its
    layers of the bytes each group sends (`tp_bytes`, `cp_bytes`, `ep_bytes`)."""

    def sum(self, attr: str) -> Array: ...


@dataclass(frozen=True)
class Volumes:
    """Buffers the step model moves outside the layers, per GPU (bytes)."""

    p2p: Array  # one pipeline send, per microbatch and virtual stage, each way
    sync: Array  # the once-per-step gradient sync's ring buffer (ZeRO 0-2)
    zero3: Array  # ZeRO-3's ring buffer, every microbatch


@dataclass(frozen=True)
class ScaleOutBytes:
    """Bytes per GPU per step that cross the scale-out network, by group (arrays)."""

    tp: Array
    cp: Array
    ep: Array
    pp: Array
    dp: Array  # gradient sync and, under ZeRO-3, the per-microbatch parameter gathers

    @property
    def total(self) -> Array:
        return self.tp + self.cp + self.ep + self.pp + self.dp


def island_gpus(hw: GpuHardware) -> int:
    """GPUs joined by the scale-up link, as the step model counts them: a board (node) or a
    rack-scale domain (NVL72) that spans several trays."""
    return max(hw.scaleup_domain_gpus, hw.gpus_per_node)


def scaleout_bytes(
    case: Case, lay: Axes, stage: StageBytes, microbatches: Array, volumes: Volumes
) -> ScaleOutBytes:
    """The bytes of each group that leave the scale-up island (module docstring), per step.

    The profile's `dp_rails_aggregate` False (a framework measured with one NIC per GPU
    whatever the layout) sends every ring byte of a spanning ring on the GPU's own NIC.
    """
    island = island_gpus(case.hw)
    inner = lay.tp * lay.cp
    m = microbatches
    ring = (
        ring_nic_share(inner, lay.dp, island, rails=case.profile.dp_rails_aggregate)
        * (lay.dp - 1).astype(np.float64)
        / lay.dp.astype(np.float64)
    )
    sync = np.where(lay.zero == 3, m * volumes.zero3, volumes.sync)
    pp_sent = np.where(lay.pp > 1, 2 * volumes.p2p * lay.vs, 0.0) * m
    return ScaleOutBytes(
        tp=np.where(lay.tp > island, m * stage.sum("tp_bytes"), 0.0),
        cp=np.where(inner > island, m * stage.sum("cp_bytes"), 0.0),
        ep=np.where(lay.tp * lay.ep > island, m * stage.sum("ep_bytes"), 0.0),
        pp=np.where(inner * lay.dp * 2 > island, pp_sent, 0.0),
        dp=ring * sync,
    )
