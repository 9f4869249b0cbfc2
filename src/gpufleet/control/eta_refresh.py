"""The ETA child's work: read the live queue, estimate each pending job's start with
`eta.estimate_starts`, write the queue snapshot's ETA columns.

Apart from `eta` (pure: a queue in, start times out) because it reads the store through
`jobs.live_queue`, and `jobs` imports `eta`'s running-job form: one direction each way.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.eta import estimate_starts, queue_cycle_s
from gpufleet.control.jobs import live_queue
from gpufleet.control.models import QueueSnapshot


def refresh_etas(
    sessions: sessionmaker[Session], cluster: Cluster, profile: str, now_s: float
) -> int:
    """Re-simulate the live queue forward and store every pending job's estimated start in
    the queue snapshot (only its ETA columns, so the reconciler's order and reasons stay).

    Reads the store in its own session, so it can run in another thread or process than
    the reconciler; coarser simulated cycles for long queues keep it cheap, at the price
    of ETAs accurate to about one such cycle. Returns how many pending jobs got an ETA."""
    with sessions() as s:
        queue = live_queue(s, cluster, now_s)
    if queue.teams is None:
        return 0
    etas: dict[str, float | None] = {}
    if queue.pending:
        result = estimate_starts(
            cluster,
            queue.teams,
            queue.running,
            queue.pending,
            now_s=now_s,
            profile=profile,
            cycle_interval_s=queue_cycle_s(len(queue.pending)),
        )
        etas = dict(result.start_s)
    with sessions.begin() as s:
        s.execute(
            update(QueueSnapshot)
            .where(QueueSnapshot.name == "main")
            .values(etas=etas, eta_at_s=now_s)
        )
    return len(etas)
