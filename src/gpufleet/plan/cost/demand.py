"""What the cost model buys: one accelerator's GPU-hours over a horizon.

Every other cost module takes a `Demand`, so it sits at the bottom of the package with the
hour constants they share; the prices, the purchase mix and the sensitivity all read it, and it
reads none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_YEAR = 8_760.0


@dataclass(frozen=True)
class Demand:
    """What the plan needs from one accelerator type over the horizon.

    `baseline_gpus` run every hour of the horizon (inference fleets, long training) and are
    never put on spot. `burst_gpu_hours` is work above that (training runs); the
    `interruptible_fraction` of it tolerates spot, at `spot_overhead_fraction` extra work for
    lost progress since the last checkpoint and restarts. `burst_window_hours`, when given,
    is the time the burst must fit in (a training deadline): reserved GPUs then lend the burst
    only their hours inside that window. Without it the burst may spread over the horizon.
    """

    accelerator: str
    baseline_gpus: int
    burst_gpu_hours: float
    interruptible_fraction: float
    spot_overhead_fraction: float
    horizon_hours: float
    burst_window_hours: float | None = None
    # what the clouds will actually let you have at once (None: not capped): spot GPUs in
    # use together, and GPUs in capacity blocks; `block_fraction` is the share of the burst in
    # runs small enough for one block (a gang runs whole or not at all)
    spot_max_gpus: float | None = None
    block_max_gpus: float | None = None
    block_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.baseline_gpus < 0:
            raise ValueError(f"baseline_gpus {self.baseline_gpus} is negative")
        if self.burst_gpu_hours < 0:
            raise ValueError(f"burst_gpu_hours {self.burst_gpu_hours} is negative")
        if not 0.0 <= self.interruptible_fraction <= 1.0:
            raise ValueError(f"interruptible_fraction {self.interruptible_fraction} is not 0-1")
        if self.spot_overhead_fraction < 0:
            raise ValueError(f"spot_overhead_fraction {self.spot_overhead_fraction} is negative")
        if self.horizon_hours <= 0:
            raise ValueError(f"horizon_hours {self.horizon_hours} is not positive")
        if not 0.0 <= self.block_fraction <= 1.0:
            raise ValueError(f"block_fraction {self.block_fraction} is not 0-1")
        for name in ("spot_max_gpus", "block_max_gpus"):
            cap = getattr(self, name)
            if cap is not None and cap < 0:
                raise ValueError(f"{name} {cap} is negative")
        window = self.burst_window_hours
        if window is not None and not 0 < window <= self.horizon_hours:
            raise ValueError(f"burst_window_hours {window} is not within the horizon")

    @property
    def window_hours(self) -> float:
        return self.horizon_hours if self.burst_window_hours is None else self.burst_window_hours

    @property
    def gpu_hours(self) -> float:
        """All GPU-hours the demand needs (spot overhead excluded)."""
        return self.baseline_gpus * self.horizon_hours + self.burst_gpu_hours
