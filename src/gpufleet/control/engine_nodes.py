"""Node states an engine reports (Slurm's DOWN and DRAIN), folded into the store's nodes.

An executor that knows its nodes' health has an optional ``node_states()`` method
(`Executor` stays as small as it was; the reconciler asks with ``getattr``). Each cycle
the reconciler records what it says here and then handles a down node exactly as one an
admin marked down with ``PUT /api/v1/admin/nodes/{node}``: its jobs are stopped at once
and requeued elsewhere, and the scheduler places nothing on it.

Who wins when an admin and the engine disagree: the engine may take an *up* node down
or drain it, and bring back up only a node it took out itself (its reason starts with
``"<engine>: "``). A node an admin took out stays out until an admin brings it back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.control.models import NodeRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's health as the engine sees it; `reason` is the engine's (Slurm's Reason=)."""

    state: Literal["up", "down", "drain"]
    reason: str = ""


def apply_node_states(
    session: Session, reported: Mapping[str, NodeStatus], source: str, now_s: float
) -> list[str]:
    """Update the nodes the engine reported (by gpufleet node name); returns what changed,
    one line per node. Nodes the engine did not report are left as they are."""
    if not reported:
        return []
    mark = f"{source}: "
    changed = []
    rows = session.scalars(select(NodeRecord).where(NodeRecord.name.in_(list(reported))))
    for row in rows:
        status = reported[row.name]
        ours = row.reason.startswith(mark)
        if status.state == "up":
            if row.state == "up" or not ours:
                continue
            new_state, new_reason = "up", ""
        else:
            if row.state != "up" and not ours:
                continue  # an admin's decision stands
            new_reason = mark + (status.reason or status.state)
            if row.state == status.state and row.reason == new_reason:
                continue
            new_state = status.state
        changed.append(f"node {row.name}: {row.state} -> {new_state} ({new_reason or source})")
        row.state, row.reason, row.updated_s = new_state, new_reason, now_s
    for line in changed:
        log.info("%s", line)
    return changed
