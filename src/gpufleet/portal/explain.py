"""One sentence on why a team gets what it gets: "what's my fair share right now, and why?"
(KAI-Scheduler#2056), from the same numbers the team page shows.

The sentence follows the cluster's scheduling profile: under a fair-share order the team
with the lowest weighted dominant share goes next; under other orders the share does not
decide who goes first, and the sentence says what does.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.api.schemas import TeamOut
from gpufleet.portal.fmt import gpus, pct
from gpufleet.specs.profiles import PROFILES


def fair_share_why(team: TeamOut, capacity: Mapping[str, int], profile: str) -> str:
    """Why `team` stands where it does, in one sentence."""
    p = PROFILES.get(profile)
    order = p.queue_order if p is not None else "fair-share"
    held = [(q.used_gpus / capacity[q.flavor], q) for q in team.quotas if capacity.get(q.flavor)]
    guaranteed = ", ".join(f"{q.guaranteed_gpus} {q.flavor}" for q in team.quotas) or "none"
    if order != "fair-share":
        return (
            f"This cluster's profile '{profile}' orders the queue by {order}, not by fair "
            f"share, so {team.name}'s jobs go in that order once jobs within each team's "
            f"guarantee ({guaranteed} for {team.name}) have been served."
        )
    if not held or max(share for share, _ in held) == 0:
        return (
            f"{team.name} holds no GPUs now, so its weighted share is 0 and its waiting jobs "
            f"are looked at before those of teams that hold more, with jobs that fit its "
            f"guarantee ({guaranteed}) first."
        )
    share, q = max(held, key=lambda item: item[0])
    borrowed = sum(x.borrowed_gpus for x in team.quotas)
    borrowing = (
        f"; it borrows {gpus(borrowed)} GPUs beyond its guarantee, which lending teams can reclaim"
        if borrowed > 0
        else ""
    )
    return (
        f"{team.name} holds {gpus(q.used_gpus)} of the cluster's {capacity[q.flavor]} "
        f"{q.flavor} GPUs ({pct(share)}), its largest share of any flavor, which divided by "
        f"its weight {team.weight:g} gives a fair-share score of {team.fair_share:.2f}: the "
        f"team with the lowest score is served next, and jobs within a team's guarantee "
        f"({guaranteed} for {team.name}) go before any borrowing{borrowing}."
    )
