"""EASY backfill: a reservation for the head-of-line gang, and the rule for jumping it.

Without a reservation a 64-GPU gang behind a stream of 1-GPU jobs waits for
ever: every GPU that frees is taken by a small job before 64 are free at once.
EASY backfill (Lifka 1995; Slurm's `sched/backfill`) fixes it with one
reservation: the first job (in queue order) that passes its quota check but
finds no room gets the earliest time and place at which it would fit, computed
from the running jobs' expected ends. Later jobs may still start now, but only

- on GPUs the reservation does not need (the free reserved GPUs are masked by a
  placeholder holder on the cycle's what-if), or
- on reserved GPUs when they are expected to end before the reservation starts
  (their runtime estimate, or their max runtime, says so).

Expected runtime = `runtime_estimate_s`, else `max_runtime_s`; a running job
without either (or without `started_s`) is taken never to end, so it never
frees GPUs for a reservation, and a pending job without either never jumps onto
reserved GPUs. Only whole-GPU requests get reservations: slices and fractions
are small and are not starved this way.

Finding the start: release running jobs in order of expected end on a what-if
and ask the placement plugin after each release. Fit is monotone in the freed
prefix (more free GPUs never hurt a placement that does not depend on what is
busy), so the first fitting prefix is found by doubling then bisection:
O(n log n) releases for n running jobs with known ends. The search starts at
the first prefix that frees enough GPUs in all and on enough single nodes for
the workers (upper bounds read off the state without a what-if): before it no
placement can fit, and from it a gang of whole nodes usually fits at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.cluster import Branch, StateView, Whole
from gpufleet.sched.framework import Placement, PlacementPlugin
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec

HOLDER = "\x00reservation"  # the placeholder that masks free reserved GPUs; never a job name


def expected_runtime_s(job: JobSpec) -> float | None:
    return job.runtime_estimate_s or job.max_runtime_s


def expected_end_s(job: JobSpec) -> float | None:
    """When a running job is expected to end (None: unknown, taken as never)."""
    runtime = expected_runtime_s(job)
    if job.started_s is None or runtime is None:
        return None
    return job.started_s + runtime


@dataclass(frozen=True)
class Reservation:
    """Where and when the head-of-line job will start, and whose ends it waits for."""

    job: str
    accelerator: str
    gpus: int
    start_s: float
    placements: tuple[Placement, ...]
    waits_for: tuple[str, ...]

    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.node for p in self.placements))


def _fits_after(
    b: Branch, plugin: PlacementPlugin, job: JobSpec, request: Request, released: Sequence[str]
) -> tuple[Placement, ...] | None:
    with b.branch() as w:  # rolls back
        for name in released:
            w.release_all(name)
        placed = plugin.place(w, job, request)
        return placed.placements if placed.status.ok else None


def find(
    b: Branch,
    plugin: PlacementPlugin,
    job: JobSpec,
    request: Request,
    *,
    ends: Sequence[tuple[float, str]],
    now_s: float,
) -> Reservation | None:
    """The earliest (start, placement) for `job` as running jobs end; None if never known.

    `ends` lists (expected end, job) for jobs holding GPUs on `b`, any order.
    """
    if request.kind != "gpus":
        return None
    order = sorted(ends)
    names = [n for _, n in order]
    need = request.total_gpus - b.free_total(request.accelerator)
    k = 0
    while need > 0 and k < len(names):
        need -= b.usage(names[k]).gpus.get(request.accelerator, 0)
        k += 1
    if need > 0:
        return None
    # no placement fits before enough single nodes could hold the workers (an upper bound,
    # from what each prefix frees per node): on a fragmented cluster the free total says
    # "fits" long before a gang of whole nodes does, and each prefix tried is a what-if
    rooms = b.worker_rooms_after(names, request.accelerator, request.gpus_per_worker)
    for i, room in enumerate(rooms):
        if i >= k and room >= request.workers:
            k = i
            break
    else:
        return None
    lo, hi, step = k - 1, k, 1  # invariant: prefix lo does not fit (or is untested below k)
    found = _fits_after(b, plugin, job, request, names[:hi])
    while found is None:
        if hi >= len(names):
            return None
        lo, hi = hi, min(len(names), hi + step)
        step *= 2
        found = _fits_after(b, plugin, job, request, names[:hi])
    while hi - lo > 1:  # bisect for the first fitting prefix in (lo, hi]
        mid = (lo + hi) // 2
        fit = _fits_after(b, plugin, job, request, names[:mid])
        if fit is None:
            lo = mid
        else:
            hi, found = mid, fit
    start = max(now_s, order[hi - 1][0]) if hi > 0 else now_s
    return Reservation(
        job.name, request.accelerator, request.total_gpus, start, found, tuple(names[:hi])
    )


def mask(b: Branch, reservation: Reservation) -> None:
    """Hold the reservation's currently free GPUs under `HOLDER` on `b`."""
    for p in reservation.placements:
        free = set(b.free_gpu_ids(p.node))
        ids = tuple(g for g in p.gpus if g in free)
        if ids:
            b.allocate(HOLDER, Whole(p.node, ids))


def reserved_free(view: StateView, accelerator: str) -> int:
    """Free `accelerator` GPUs that `mask` holds for the cycle's reservation (0: none)."""
    if not view.holds(HOLDER):
        return 0
    return view.usage(HOLDER).gpus.get(accelerator, 0)


def unmask(b: Branch, placements: Sequence[Placement]) -> None:
    """Give `HOLDER`'s GPUs that `placements` use back, so a job ending in time can take them."""
    held = set(b.holdings(HOLDER).gpus)
    for p in placements:
        used = (*p.gpus, p.gpu) if p.gpu is not None else p.gpus  # whole GPUs, or a share's GPU
        ids = tuple(g for g in used if (p.node, g) in held)
        if ids:
            b.release(HOLDER, Whole(p.node, ids))


def ends_before(job: JobSpec, reservation: Reservation, now_s: float) -> bool:
    runtime = expected_runtime_s(job)
    return runtime is not None and now_s + runtime <= reservation.start_s
