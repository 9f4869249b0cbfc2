"""What the cost model buys: one accelerator's GPU-hours over a horizon.

Every other cost module takes a `Demand`, so it sits at the bottom of the package with the
hour constants they share; the prices, the purchase mix and the sensitivity all read it, and it
reads none of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

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

    `instance_gpus` is how many GPUs the cloud rents at once (the GPUs of one instance of the
    offer priced): the mix reserves whole instances. `burst_gangs` are the burst's runs as
    (gang GPUs, GPU-hours), so that `on_instances` can round each gang up to whole instances;
    without them the burst's GPU-hours are priced as given. `burst_spans` are the runs'
    (start hour, end hour), in the order of `burst_gangs`, so that `gpus_at_once` counts
    only the gangs that run together: a year of runs that never overlap never needs every
    gang at once (year-of-runs rented, and reserved, the sum of its runs' GPUs, 1,296,
    where 528 are in use at the busiest hour). Without spans every gang is taken to run at
    once.
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
    instance_gpus: int = 1
    burst_gangs: tuple[tuple[int, float], ...] = ()
    burst_spans: tuple[tuple[float, float], ...] = ()

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
        if self.instance_gpus < 1:
            raise ValueError(f"instance_gpus {self.instance_gpus} is not a whole instance")
        for gpus, hours in self.burst_gangs:
            if gpus < 1 or hours < 0:
                raise ValueError(f"burst gang of {gpus} GPUs for {hours} GPU-hours is not a run")
        if self.burst_spans and len(self.burst_spans) != len(self.burst_gangs):
            raise ValueError(
                f"{len(self.burst_spans)} burst spans for {len(self.burst_gangs)} burst gangs"
            )
        for start, end in self.burst_spans:
            if not 0 <= start < end:
                raise ValueError(f"burst span {start}-{end} h is not a run")
        window = self.burst_window_hours
        if window is not None and not 0 < window <= self.horizon_hours:
            raise ValueError(f"burst_window_hours {window} is not within the horizon")

    def on_instances(self, gpus_per_instance: int) -> Demand:
        """The demand as whole instances of `gpus_per_instance` GPUs are rented for it.

        The services share instances, so the baseline's GPUs round up once; each training
        gang runs on instances of its own (whole nodes, as `plan/spot.py` and the on-prem
        design assume), so it rounds up on its own and its run's GPU-hours grow with it.
        The idle GPUs are paid for: they are what the cloud rents. The spot and block
        shares of the burst are kept as they were (rounding moves them by at most the idle
        GPUs of a gang).
        """
        n = gpus_per_instance
        gangs = tuple(
            (whole_instances(g, n), hours * whole_instances(g, n) / g)
            for g, hours in self.burst_gangs
        )
        idle_hours = sum(h for _, h in gangs) - sum(h for _, h in self.burst_gangs)
        return replace(
            self,
            baseline_gpus=whole_instances(self.baseline_gpus, n),
            burst_gpu_hours=self.burst_gpu_hours + idle_hours,
            instance_gpus=n,
            burst_gangs=gangs,
        )

    @property
    def gpus_at_once(self) -> int | None:
        """GPUs in use at the busiest hour: the baseline (every hour) and the gangs running
        then (`busiest`). None when the burst's gangs are not known: its GPUs at once cannot
        be told from its GPU-hours."""
        if self.burst_gpu_hours > 0 and not self.burst_gangs:
            return None
        gangs = [g for g, _ in self.burst_gangs]
        return self.baseline_gpus + busiest(gangs, self.burst_spans)

    @property
    def window_hours(self) -> float:
        return self.horizon_hours if self.burst_window_hours is None else self.burst_window_hours

    @property
    def gpu_hours(self) -> float:
        """All GPU-hours the demand needs (spot overhead excluded)."""
        return self.baseline_gpus * self.horizon_hours + self.burst_gpu_hours


def whole_instances(gpus: int, gpus_per_instance: int) -> int:
    """`gpus` rounded up to whole instances of `gpus_per_instance`."""
    return math.ceil(gpus / gpus_per_instance) * gpus_per_instance


def busiest(gangs: Sequence[int], spans: Sequence[tuple[float, float]]) -> int:
    """The most GPUs of `gangs` running at one time, each from its span's start (inclusive)
    to its end (exclusive); without spans, every gang at once. The busiest time is always
    some gang's start, so only those are tried."""
    if not spans:
        return sum(gangs)
    return max(
        (sum(g for g, (s, e) in zip(gangs, spans, strict=True) if s <= t < e) for t, _ in spans),
        default=0,
    )
