"""Running jobs hold what they ask for, checked before anything is allocated for them.

A simulation may begin with jobs already running on known placements (`sim.engine.
InitialRun`: the control plane's queue ETAs and the portal's what-if replay the live cluster
that way), and `decide()` places the running jobs it is given (`gpufleet schedule` reads
them from a jobs file). The cluster state only checks that a placement's GPUs, slices and
shares exist and are free; it does not know what the job asked for. A running 3g.40gb
job listed on a 1g.10gb slice, on a whole GPU of a node without MIG, or a 0.25-GPU job on
a whole GPU or a 0.5 share was accepted: the run then charged its team, counted its
GPU-hours and freed capacity by the placement while the job's request said otherwise,
and with the debug checks on it ended in a `ConservationError` traceback instead of a
message about the input; `gpufleet schedule` took a running 1g.10gb job on a 3g.40gb
slice, and a 0.3-GPU job on a 0.3 share the scheduler would never give, as valid.

The shapes accepted are the ones `sim.conservation` holds a placed job to
(`expected_share`), so the check and the conservation rule cannot disagree: whole GPUs ×
workers, whole workers per node; one slice of the job's own profile on a MIG-enabled GPU;
one share of one GPU of the job's fraction in eighths (as the scheduler places fractions);
and, under a whole-GPU-only profile (`k8s-default`), one whole GPU for a slice or a
fraction. A job sized from an inference load names no request to compare and is left to
the state's own checks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Final, Protocol

from gpufleet.cluster import MILLI, Cluster
from gpufleet.errors import UnknownNameError
from gpufleet.sched.framework import InvalidPlacementError, Placement
from gpufleet.sched.quota import MILLI_PER_EIGHTH
from gpufleet.sched.requests import fraction_eighths

# a MIG slice id, "<node>/gpu<g>/mig:<profile>#<k>" (`cluster.slice_id`)
SLICE_ID: Final = re.compile(r"(?P<node>.+)/gpu(?P<gpu>\d+)/mig:(?P<profile>[^#/]+)#(?P<k>\d+)")


class Asked(Protocol):
    """What a job asks for, as a trace job (`sim.workload.TraceJob`) and a job spec
    (`specs.jobs.JobSpec`) both say it."""

    @property
    def name(self) -> str: ...
    @property
    def gpus(self) -> int | None: ...
    @property
    def workers(self) -> int: ...
    @property
    def mig_profile(self) -> str | None: ...
    @property
    def gpu_fraction(self) -> float | None: ...


def check_running_placement(
    trace: Asked,
    placements: Sequence[Placement],
    cluster: Cluster,
    *,
    profile: str,
    whole_only: bool,
    what: str = "initial run",
) -> None:
    """Raise `InvalidPlacementError` (a user error: exit 2 at a CLI) when a running job
    holds other than its request, as `profile` places it (`whole_only`: its
    `Profile.whole_gpus_only`); the message names the job (`what` it is: an initial run of
    a simulation, a running job of a cycle), what it asks, what its placement holds and
    what to list instead."""
    problem = _problem(trace, placements, cluster, profile=profile, whole_only=whole_only)
    if problem is not None:
        raise InvalidPlacementError(f"{what} {trace.name}: {problem}")


def _problem(
    trace: Asked,
    placements: Sequence[Placement],
    cluster: Cluster,
    *,
    profile: str,
    whole_only: bool,
) -> str | None:
    held = holdings(placements)
    whole = [(p.node, g) for p in placements for g in p.gpus]
    slices = [s for p in placements for s in p.mig_slices]
    shares = [p for p in placements if p.milli or p.gpu is not None]
    if trace.gpus:
        total = trace.gpus * trace.workers
        if len(whole) != total or slices or shares:
            return (
                f"the placement holds {held}; the job asks {trace.gpus} x {trace.workers} = "
                f"{total} whole GPUs: list exactly its GPUs"
            )
        per_node = Counter(node for node, _ in whole)
        split = [(node, n) for node, n in per_node.items() if n % trace.gpus]
        if split:  # a worker runs on one node: 4 GPUs of one worker split 2 + 2 is no placement
            node, n = split[0]
            return (
                f"node {node} holds {n} of its GPUs: each worker's {trace.gpus} GPUs are on "
                f"one node, so each node's count is a multiple of {trace.gpus}"
            )
        return None
    if trace.mig_profile is None and trace.gpu_fraction is None:
        return None  # sized from an inference load: no request to hold it to
    asks = (
        f"a {trace.mig_profile} slice"
        if trace.mig_profile is not None
        else f"{trace.gpu_fraction:g} of a GPU"
    )
    if whole_only:
        if len(whole) == 1 and not slices and not shares:
            return None
        return (
            f"the placement holds {held}; the job asks {asks}, which profile {profile} "
            "(whole GPUs only) runs on one whole GPU: list exactly one whole GPU"
        )
    if trace.mig_profile is not None:
        return _slice_problem(
            trace.mig_profile, cluster, held=held, whole=whole, slices=slices, shares=shares
        )
    assert trace.gpu_fraction is not None
    return _share_problem(trace.gpu_fraction, held=held, whole=whole, slices=slices, shares=shares)


def _slice_problem(
    mig_profile: str,
    cluster: Cluster,
    *,
    held: str,
    whole: Sequence[tuple[str, int]],
    slices: Sequence[str],
    shares: Sequence[Placement],
) -> str | None:
    """A MIG job holds one slice of its own profile, on a GPU the cluster cuts into slices.
    (Whether that slice exists and is free, the state says when it is allocated.)"""
    fix = f"list exactly one {mig_profile} slice of a MIG-enabled GPU"
    if whole or shares or len(slices) != 1:
        return f"the placement holds {held}; the job asks a {mig_profile} slice: {fix}"
    match = SLICE_ID.fullmatch(slices[0])
    if match is None:
        return None  # not a slice id: the state names it
    if match["profile"] != mig_profile:
        return (
            f"the placement holds slice {slices[0]}, a {match['profile']} slice; the job "
            f"asks a {mig_profile} slice: {fix}"
        )
    node, gpu = match["node"], int(match["gpu"])
    if not _mig_enabled(cluster, node, gpu):
        return (
            f"the placement holds slice {slices[0]}, but {node}/gpu{gpu} is not MIG-enabled "
            f"(the cluster cuts no slices on it); the job asks a {mig_profile} slice: {fix}"
        )
    return None


def _share_problem(
    fraction: float,
    *,
    held: str,
    whole: Sequence[tuple[str, int]],
    slices: Sequence[str],
    shares: Sequence[Placement],
) -> str | None:
    """A fraction job holds one share of one GPU, its fraction rounded up to eighths as the
    scheduler places it (0.25 as 250/1000, 0.3 as 375/1000)."""
    milli = fraction_eighths(fraction) * MILLI_PER_EIGHTH
    if not whole and not slices and len(shares) == 1 and shares[0].milli == milli:
        return None
    placed = "" if milli == round(fraction * MILLI) else f", placed in eighths as {milli / MILLI:g}"
    return (
        f"the placement holds {held}; the job asks {fraction:g} of a GPU{placed}: list exactly "
        f"one GPU of a node that shares GPUs, with fraction {milli / MILLI:g}"
    )


def _mig_enabled(cluster: Cluster, node: str, gpu: int) -> bool:
    """Whether the cluster cuts GPU `gpu` of `node` into slices (True for a node or GPU it
    does not have: the state's own error names those)."""
    try:
        found = cluster.node(node)
    except UnknownNameError:
        return True
    return gpu >= found.gpus or bool(found.layout(gpu))


def holdings(placements: Sequence[Placement]) -> str:
    """What placements hold, in words: "whole GPU h-0/gpu3", "2 whole GPUs on h-0 (0, 1)",
    "slice <id>", "0.5 of share-0/gpu0"; "nothing" when empty."""
    parts: list[str] = []
    for p in placements:
        if len(p.gpus) == 1:
            parts.append(f"whole GPU {p.node}/gpu{p.gpus[0]}")
        elif p.gpus:
            indices = ", ".join(str(g) for g in p.gpus)
            parts.append(f"{len(p.gpus)} whole GPUs on {p.node} ({indices})")
        parts += [f"slice {s}" for s in p.mig_slices]
        if p.milli or p.gpu is not None:
            parts.append(f"{p.milli / MILLI:g} of {p.node}/gpu{p.gpu}")
    return " and ".join(parts) or "nothing"
