"""When Tiresias's clock-driven moves happen, to the float the scheduler compares with.

Under least-attained-service preemption a running job becomes a victim when its service
crosses a queue threshold, and a waiting job that has run may evict again once its
starvation promotion is due (`sched.las`). Neither is an arrival or a finish, so the
simulator queues an event at each time given here and runs a cycle then; without it the
move waited for whatever happened next, and on one node with two jobs `tiresias` was FIFO.

The times are solved in closed form, and the solved time may fall a rounding step short of
the comparison `LasQueues` makes at it (about a third of crossings do); each is stepped
forward to the first float at which the scheduler agrees, so the cycle sees the move.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpufleet.sched.las import LasQueues, attained_at
from gpufleet.specs.jobs import JobSpec

# more than any rounding needs (one or two steps in practice); past it the time stands and a
# cycle there sees nothing new, which only delays the move to the next event
_MAX_STEPS = 64


def crossings_s(
    queues: LasQueues, attained_gpu_s: float, started_s: float, held_milli: int
) -> list[float]:
    """When a run from `started_s` holding `held_milli`, with `attained_gpu_s` of service
    before it (as the caller's running view counts it), moves into each next queue; times
    that never come (it holds nothing) are left out."""
    out = []
    solved = queues.crossings_s(attained_gpu_s, started_s, held_milli)
    for threshold, at_s in zip(queues.thresholds_gpu_s, solved, strict=True):
        if not math.isfinite(at_s):
            continue

        def reached(t: float, threshold: float = threshold) -> bool:
            return attained_at(attained_gpu_s, started_s, held_milli, t) >= threshold

        out.append(_first_at_or_after(at_s, reached))
    return out


def promotion_s(queues: LasQueues, job: JobSpec) -> float | None:
    """When a waiting job goes back to queue 0 by the starvation rule; None when it sits
    there already (it has no service past the first threshold)."""
    if queues.served(job) == 0:
        return None
    return _first_at_or_after(queues.promoted_at_s(job), lambda t: queues.pending(job, t) == 0)


def _first_at_or_after(t: float, holds: Callable[[float], bool]) -> float:
    for _ in range(_MAX_STEPS):
        if holds(t):
            return t
        t = math.nextafter(t, math.inf)
    return t
