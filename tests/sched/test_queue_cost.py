"""Issue 29's cheaper cycle keeps every decision: the fair-share order that takes a team's
run without a heap round trip yields what the heap did, and a job's facts are kept for the
very same spec object only."""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator, Sequence

from gpufleet.cluster.bench import bench_cluster
from gpufleet.sched.framework import OrderContext
from gpufleet.sched.job_facts import RequestShapes
from gpufleet.sched.orders import FairShare, _priority_key
from gpufleet.sched.team_index import team_index
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec


def reference_fair_share(jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterator[JobSpec]:
    """The fair-share order as it was written before (one heap round trip per job)."""
    queues: dict[str, list[tuple[tuple[float, tuple[float, str]], int, JobSpec]]] = {}
    for keyed in sorted((_priority_key(j, ctx), i, j) for i, j in enumerate(jobs)):
        queues.setdefault(keyed[2].team, []).append(keyed)
    heap = [(ctx.share(t), q[0][0], t) for t, q in queues.items()]
    heapq.heapify(heap)
    nxt = dict.fromkeys(queues, 0)
    while heap:
        share, key, team = heapq.heappop(heap)
        now = ctx.share(team)
        if now > share + 1e-12:
            heapq.heappush(heap, (now, key, team))
            continue
        queue, i = queues[team], nxt[team]
        yield queue[i][2]
        nxt[team] = i + 1
        if i + 1 < len(queue):
            heapq.heappush(heap, (ctx.share(team), queue[i + 1][0], team))


def drain(order: Iterator[JobSpec], admit: random.Random, used: dict[str, float]) -> list[str]:
    """Consume an order as a cycle does: some jobs are admitted, which raises their team's
    share before the next job is asked for."""
    out = []
    for job in order:
        out.append(job.name)
        if admit.random() < 0.3:
            used[job.team] = used.get(job.team, 0.0) + admit.choice((0.5, 1.0, 2.0))
    return out


def test_fair_share_yields_the_heaps_order_while_shares_move() -> None:
    for seed in range(60):
        rng = random.Random(seed)
        teams = [f"t{i}" for i in range(rng.randint(1, 5))]
        jobs = [
            JobSpec.model_validate(
                {
                    "name": f"j{i}",
                    "team": rng.choice(teams),
                    "gpus": 1,
                    "submitted_s": float(rng.randint(0, 20)),  # ties: the name decides
                }
            )
            for i in range(rng.randint(0, 60))
        ]
        priority = {j.name: rng.choice((0, 0, 10)) for j in jobs}
        start = {t: rng.choice((0.0, 0.0, 1.0, 3.0)) for t in teams}
        got, want = [], []
        for out, order in ((got, FairShare().order), (want, reference_fair_share)):
            used = dict(start)
            ctx = OrderContext(priority, 0.0, lambda t, used=used: used.get(t, 0.0))
            out.extend(drain(iter(order(jobs, ctx)), random.Random(seed), used))
        assert got == want, seed


def test_facts_are_kept_for_the_same_spec_object_only() -> None:
    cluster = bench_cluster(2)
    shapes = cluster.derived(RequestShapes)
    teams = TeamsSpec.model_validate({"kind": "teams", "teams": [{"name": "a"}]})
    index = team_index(teams)
    job = JobSpec.model_validate({"name": "j", "team": "a", "gpus": 2, "submitted_s": 0.0})
    first = shapes.facts(job, index, False)
    assert shapes.facts(job, index, False) is first
    assert shapes.facts(job, index, True) is not first  # another whole-GPU flag
    same_fields = job.replaced({"attained_gpu_s": 5.0})  # a requeued job is a new object
    assert shapes.facts(same_fields, index, False) is not first
    assert not first.made  # the memo shape is made when first asked for
    first.make()
    assert first.shape == (job.team, 2, 1, (), None, None, None, job.spot_ok, index.priority(job))
    assert shapes.job_requests(first) == shapes.requests(job, False)
    other = JobSpec.model_validate({"name": "k", "team": "a", "gpus": 1, "submitted_s": 0.0})
    assert shapes.priorities([job, other], index, False) == {
        "j": first.priority,
        "k": index.priority(other),
    }
    assert shapes.priorities([other], index, False) == {"k": index.priority(other)}
    assert set(shapes.facts_of) == {id(other)}  # only the queue's own facts are kept
