"""What the workloads ask of the cluster beyond its GPUs: traffic between nodes, and data.

The fabric and the storage are both sized from it, so it sits below them; it comes from the
training estimate, and `None` in its place means an inference-only cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TrafficNeed:
    """What the workloads move across nodes and read/write, per GPU and per cluster.

    `dp_bytes_per_step` is the gradient volume each GPU all-reduces per step (its
    data-parallel shard of the gradients); `step_time_s` the training step time.
    `checkpoint_bytes` is one full checkpoint; `dataset_bytes` the training set on disk;
    `tokens_per_s` the cluster's training throughput; `bytes_per_token` the on-disk size of
    one token (None: `DEFAULT_BYTES_PER_TOKEN`, logged).
    """

    dp_bytes_per_step: float
    step_time_s: float
    tp_crosses_nodes: bool
    checkpoint_bytes: float
    dataset_bytes: float
    tokens_per_s: float
    bytes_per_token: float | None = None
    # GPUs the scale-out fabric must join (None: every GPU of the cluster). Serving replicas
    # that stay inside a node need only front-end Ethernet, so a plan's training nodes get
    # the fabric and its inference nodes do not: one serving node must not add a switch tier
    fabric_gpus: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise ValueError(f"step_time_s must be > 0, got {self.step_time_s}")
        for name in ("dp_bytes_per_step", "checkpoint_bytes", "dataset_bytes", "tokens_per_s"):
            value: float = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.fabric_gpus is not None and self.fabric_gpus < 1:
            raise ValueError(f"fabric_gpus must be >= 1, got {self.fabric_gpus}")
        if self.bytes_per_token is not None and not self.bytes_per_token > 0:
            raise ValueError(f"bytes_per_token must be > 0, got {self.bytes_per_token}")
