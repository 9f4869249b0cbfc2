"""Plugin registries: each extension point's plugins by name, and the profiles resolved to them.

A new policy is one class plus one line here, and a profile entry in `specs.profiles` (the
table users pick from; design 0009) if it should be selectable by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.errors import UnknownNameError
from gpufleet.sched.fgd import Fgd
from gpufleet.sched.framework import PlacementPlugin, QueueOrder
from gpufleet.sched.orders import FairShare, Fifo, Multifactor, PriorityOrder, Tiresias
from gpufleet.sched.plugins import TopologyBestFit
from gpufleet.sched.preempt import PREEMPTIONS, PreemptionPlugin
from gpufleet.sched.scoring import BinPack, Spread
from gpufleet.specs.profiles import PROFILES, Profile

QUEUE_ORDERS: Mapping[str, QueueOrder] = {
    p.name: p for p in (Fifo(), PriorityOrder(), FairShare(), Tiresias(), Multifactor())
}
PLACEMENTS: Mapping[str, PlacementPlugin] = {
    p.name: p for p in (TopologyBestFit(), BinPack(), Spread(), Fgd())
}


@dataclass(frozen=True)
class Resolved:
    """A profile's plugins, looked up once per cycle."""

    profile: Profile
    queue_order: QueueOrder
    placement: PlacementPlugin
    preemptions: tuple[PreemptionPlugin, ...]


_RESOLVED: dict[str, Resolved] = {}  # profile name -> its plugins (every cycle asks)


def resolve(profile: str) -> Resolved:
    """The plugins of a profile by name; an unknown name raises with suggestions."""
    p = PROFILES.get(profile)
    found = _RESOLVED.get(profile)
    if found is not None and found.profile is p:
        return found
    if p is None:
        raise UnknownNameError("scheduling profile", profile, PROFILES)
    found = _RESOLVED[profile] = Resolved(
        p,
        QUEUE_ORDERS[p.queue_order],
        PLACEMENTS[p.placement],
        tuple(PREEMPTIONS[n] for n in p.preemption),
    )
    return found
