"""Plugin registries and the named profiles: a new policy is one class plus one line here.

Profiles are what users pick (`--profile`); each names one plugin per
extension point (design 0009). Descriptions show in `gpufleet schedule --help`
and the scheduling guide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.errors import UnknownNameError
from gpufleet.sched.framework import PlacementPlugin, Profile, QueueOrder
from gpufleet.sched.orders import FairShare, Fifo, PriorityOrder, Tiresias
from gpufleet.sched.plugins import TopologyBestFit
from gpufleet.sched.preempt import PREEMPTIONS, PreemptionPlugin
from gpufleet.sched.scoring import BinPack, Fgd, Spread

QUEUE_ORDERS: Mapping[str, QueueOrder] = {
    p.name: p for p in (Fifo(), PriorityOrder(), FairShare(), Tiresias())
}
PLACEMENTS: Mapping[str, PlacementPlugin] = {
    p.name: p for p in (TopologyBestFit(), BinPack(), Spread(), Fgd())
}

PROFILES: Mapping[str, Profile] = {
    "default": Profile(
        "fair-share",
        "topology-best-fit",
        description="jobs within their team's guarantee first; fair share across teams "
        "(priority, then FIFO, within a team); topology packing; quota reclaim then priority "
        "preemption; EASY backfill",
    ),
    "priority": Profile(
        "priority",
        "topology-best-fit",
        description="jobs within their team's guarantee first; then priority and FIFO "
        "cluster-wide; topology packing; quota reclaim then "
        "priority preemption; EASY backfill",
    ),
    "fifo": Profile(
        "fifo",
        "topology-best-fit",
        preemption=(),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="best-effort FIFO: a job that does not fit never blocks later ones; "
        "no preemption, no reservations",
    ),
    "strict-fifo": Profile(
        "fifo",
        "topology-best-fit",
        preemption=(),
        head_of_line="strict",
        guaranteed_first=False,
        description="strict FIFO: the first job that does not fit blocks every later one",
    ),
    "tiresias": Profile(
        "tiresias",
        "topology-best-fit",
        preemption=("quota-reclaim",),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="Tiresias 2D-LAS order (least attained GPU-seconds first, starvation "
        "promotion); best effort",
    ),
    "binpack": Profile(
        "fair-share",
        "binpack",
        description="the default profile, placing each worker on the fullest node that fits "
        "(MostAllocated), without topology tiers",
    ),
    "spread": Profile(
        "fair-share",
        "spread",
        description="the default profile, placing each worker on the emptiest node "
        "(LeastAllocated, kube-scheduler's default)",
    ),
    "fgd": Profile(
        "fair-share",
        "fgd",
        description="the default profile with fragmentation gradient descent placement (Weng "
        "et al., ATC'23): least growth of GPU capacity the pending request mix cannot use",
    ),
}


@dataclass(frozen=True)
class Resolved:
    """A profile's plugins, looked up once per cycle."""

    profile: Profile
    queue_order: QueueOrder
    placement: PlacementPlugin
    preemptions: tuple[PreemptionPlugin, ...]


def resolve(profile: str) -> Resolved:
    """The plugins of a profile by name; an unknown name raises with suggestions."""
    if profile not in PROFILES:
        raise UnknownNameError("scheduling profile", profile, PROFILES)
    p = PROFILES[profile]
    return Resolved(
        p,
        QUEUE_ORDERS[p.queue_order],
        PLACEMENTS[p.placement],
        tuple(PREEMPTIONS[n] for n in p.preemption),
    )
