"""What a simulation run returns: its metrics, counters and (when kept) the ledger the
conservation checks read. Apart from the engine so that `conservation` reads it without a
circle back to the engine that calls the checks (design 0015, layers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.sim.ledger import Ledger
from gpufleet.sim.metrics import SimMetrics


@dataclass(frozen=True)
class SimResult:
    metrics: SimMetrics
    cycles: int
    events: int
    decide_s: float  # wall time inside decide(), for the benchmark
    # job -> when it first held all its GPUs (queue ETAs read it); jobs never started absent
    first_start_s: Mapping[str, float] = field(default_factory=dict)
    # the integrals behind the metrics, for `sim.conservation` (None: not kept)
    ledger: Ledger | None = field(default=None, repr=False)
