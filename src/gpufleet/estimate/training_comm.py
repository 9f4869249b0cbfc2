"""Collective time in the training step model: ring bandwidth and cost, overlap.

`estimate.training.evaluate` calls these for every parallel group (tensor, context,
expert, data, pipeline) over whole arrays of layouts. Apart from the step model so the
physics of the links (a board's scale-up link or full mesh, NCCL's node-contiguous rings
over a node's NICs, design 0016 §3) and of overlap (design 0016 §1) read on their own.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def overlap_exposed(comm_s: Array, window_s: Array, interference: float) -> Array:
    """Exposed cost of communication `comm_s` overlapped with a compute window `window_s`.

    Overlap is not free: collectives run kernels on the same SMs and move data through the
    same HBM as the compute they hide behind, so the window slows by `interference` × the
    overlapped time. What does not fit in the window is exposed in full:
    max(0, comm − window) + interference × min(comm, window).
    """
    return np.maximum(comm_s - window_s, 0.0) + interference * np.minimum(comm_s, window_s)


def overlapped(compute_s: Array, comm_s: Array, interference: float) -> Array:
    """Time of compute with communication overlapped under it."""
    return compute_s + overlap_exposed(comm_s, compute_s, interference)


def ring_time(volume_bytes: Array, n: IntArray, bandwidth: Array, latency_s: float) -> Array:
    """Ring all-gather or reduce-scatter of `volume_bytes` (the full buffer) over n ranks."""
    n_f = n.astype(np.float64)
    steps = np.maximum(n_f - 1, 0)
    return np.where(n > 1, steps / n_f * volume_bytes / bandwidth + steps * latency_s, 0.0)


def ring_bandwidth(
    stride: IntArray,
    size: IntArray,
    island: int,
    up: float | Array,
    out: float,
    *,
    rails: bool = True,
) -> Array:
    """Per-GPU bandwidth (bytes/s) of a ring collective over `size` ranks `stride` apart
    (Megatron rank order: tensor, context, data, pipeline), as `ring_time` uses it.

    Inside one scale-up island the ring runs on the scale-up link. Across islands NCCL
    lays its rings node-contiguously, one channel per NIC: each channel crosses each node
    boundary once, so a node's network traffic is one rank's ring volume, spread over the
    NICs of the group's `local` ranks on that node (the other NICs carry the other groups'
    rings). Per rank, a share (local − 1)/local of the ring steps runs on the scale-up link
    and 1/local on its NIC at `local` rails' worth of bandwidth, so the slower of the two
    bounds the ring: 1 / max((local − 1)/(local · up), 1/(local · out)). With one rank
    per node (tp·cp filling the node) this is one NIC per GPU. `rails=False` keeps one NIC
    per GPU whatever the layout (a profile that measured so, frameworks.yaml).
    """
    span = stride * size
    local = ring_local_ranks(stride, size, island, rails=rails)
    per_byte = np.maximum((local - 1) / (local * up), 1 / (local * out))
    return np.where(span <= island, up, 1 / per_byte).astype(np.float64)


def ring_local_ranks(stride: IntArray, size: IntArray, island: int, *, rails: bool = True) -> Array:
    """Ranks of one ring on each node whose NICs share its network traffic (`ring_bandwidth`):
    the group's ranks on a scale-up island, or 1 when a profile measured one NIC per GPU."""
    local = np.clip(island // np.maximum(stride, 1), 1, np.maximum(size, 1)).astype(np.float64)
    return local if rails else np.ones_like(local)


def ring_nic_share(stride: IntArray, size: IntArray, island: int, *, rails: bool = True) -> Array:
    """Share of one rank's ring bytes that its own NIC sends, as `ring_bandwidth` times them:
    0 when the ring stays on one scale-up island, else 1/local (each ring crosses each node
    boundary once, its network bytes spread over its local ranks' NICs)."""
    local = ring_local_ranks(stride, size, island, rails=rails)
    return np.where(stride * size <= island, 0.0, 1 / local).astype(np.float64)
