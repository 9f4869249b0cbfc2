"""One job's life in a simulation, as the engine keeps it and the metrics recorder reads it.

Its own module so that `metrics` can name the type without importing the engine that
imports `metrics` (design 0015, layers).
"""

from __future__ import annotations

from gpufleet.sim.workload import TraceJob
from gpufleet.specs.jobs import JobSpec


class Run:
    """One job's life in the simulation (mutable, the engine's own; one per job, so
    the fields that start the same for every job are class defaults, set per job only
    once they change)."""

    attempt = 0
    first_start_s: float | None = None
    start_s = 0.0  # of the current attempt
    overhead_s = 0.0  # restart overhead of the current attempt
    gpus = 0.0  # GPUs its last attempt held (kept after it stops, for useful work)
    attained_gpu_s = 0.0
    served_s = 0.0  # inference: time running inside its window
    started = False  # every unit holds its GPUs and the clock runs
    # its own account of what it held (the conservation checks hold the recorder to it):
    # GPU-seconds up to `held_since_s`, and the milli-GPUs its units hold since then
    held_gpu_s = 0.0
    held_milli = 0
    held_since_s = 0.0
    flavor: str | None = None  # accelerator of its last full start
    # speed per accelerator (sim.speed): wall seconds per reference second of its last
    # attempt (`remaining_s` is in reference seconds), and, only when a speed table is in
    # use, the wall seconds of useful work it has done (None: its trace duration)
    time_factor = 1.0
    useful_s: float | None = None
    # where its held GPU-seconds went besides useful work (held = useful + lost + gang
    # wait, checked by sim.conservation): work lost to interruptions and restart overhead,
    # and GPU-seconds its pods held before the last of them bound (profiles without gangs)
    lost_gpu_s = 0.0
    gang_wait_gpu_s = 0.0
    attempt_held_from = 0.0  # `held_gpu_s` when its first pod of this attempt bound
    # GPUs its last attempt held beyond its request (`beyond_request`): the eighths a fraction
    # is rounded up to, or the rest of the whole GPU a whole-GPU-only profile (k8s-default)
    # runs a slice or a fraction on. Its work, useful or lost, is counted on what it asked
    # for; `idle_gpu_s` is the rest it held (held = useful + lost + gang wait + idle). 0 for
    # every other job.
    beyond_gpus = 0.0
    idle_gpu_s = 0.0

    def __init__(self, trace: TraceJob, remaining_s: float) -> None:
        self.trace = trace
        self.remaining_s = remaining_s  # useful work still to do, reference seconds
        self.milli: dict[str, int] = {}  # flavor -> milli-GPUs held now
        # the scheduler's entities: the job itself, or one pod per worker when the profile
        # binds pods one by one (`Profile.gang` False); their pending views, built at arrival
        self.units: dict[str, JobSpec] = {}
        self.held: set[str] = set()  # units holding GPUs now

    completed = False
    done_before_s = 0.0  # a live start's running job: its work before the clock started

    @property
    def work_gpus(self) -> float:
        """GPUs its work is counted on: those its last attempt held, less any it held beyond
        its request (a 0.25-GPU job on a whole GPU works on 0.25 of it, a 0.32-GPU job on
        three eighths on 0.32)."""
        return self.gpus - self.beyond_gpus

    def useful_gpu_s(self) -> float:
        """A completed run's useful GPU-seconds: an inference replica's time serving inside
        its window, else its work (its trace duration; with speeds per accelerator, the wall
        seconds that work took where it ran), less what a job already running when the
        simulation started had done before it; on the GPUs it asked for, not the eighths its
        fraction was rounded up to nor the whole GPU a whole-GPU-only profile ran its slice or
        fraction on (`beyond_gpus`)."""
        if self.trace.kind == "inference":
            return self.served_s * self.work_gpus
        if self.useful_s is not None:
            return self.useful_s * self.work_gpus
        return (self.trace.duration_s - self.done_before_s) * self.work_gpus

    def spend(self) -> None:
        """It completed and never runs again: its pending specs and containers go (a long
        run would keep them all alive otherwise, for nothing but the collector to walk)."""
        self.completed = True
        del self.units, self.held, self.milli


def beyond_request(
    trace: TraceJob, held_gpus: float, flavor: str | None, whole_only: bool
) -> float:
    """GPUs a job that started holding `held_gpus` (on `flavor`) holds beyond its request.

    A fraction is placed in eighths of a GPU, rounded up (`sched.requests.FRACTION_STEPS`:
    0.05 holds 0.125, 0.32 holds 0.375), and a whole-GPU-only profile runs a slice or a
    fraction on one whole GPU: what is held beyond the request does no work the job asked
    for, so counting it as useful credited rounding as throughput (openb under `default`:
    52,161 GPU-hours completed for a trace that asks for 51,499). Whole GPUs are held as
    asked; a MIG slice placed as a slice weighs its compute share by where it lies (142 or
    143 thousandths for 1/7), which is its share, not rounding; a request sized from an
    inference load has no share to compare with. 0 for all of these.
    """
    if trace.gpus or (trace.gpu_fraction is None and not whole_only):
        return 0.0
    asked = trace.requested_gpus(flavor)
    return 0.0 if asked is None else max(0.0, held_gpus - asked)
