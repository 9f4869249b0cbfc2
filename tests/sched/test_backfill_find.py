"""`backfill.find` against a reference that tries every prefix of the running jobs' ends.

The search starts at the first prefix that could hold the gang's workers on single nodes
(`StateView.worker_rooms_after`) and then doubles and bisects: on a fragmented cluster it
usually needs one what-if where the plain search needed several. Whatever it skips, the
reservation (start, placement, the jobs it waits for) must be the one the first fitting
prefix gives, for any fragmentation, gang shape and order of ends.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cluster import Cluster, State, Whole, expand_group
from gpufleet.sched import backfill
from gpufleet.sched.plugins import TopologyBestFit
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec

ACC = "h100-sxm5-80gb"
NOW_S = 1_000.0


def _cluster(nodes: int, per_leaf: int) -> Cluster:
    paths = [("b0", f"l{i // per_leaf}") for i in range(nodes)]
    return Cluster(("block", "leaf", "node"), tuple(expand_group("n", ACC, 8, paths)))


@st.composite
def fragmented(draw: st.DrawFn) -> tuple[State, list[tuple[float, str]], Request]:
    cluster = _cluster(draw(st.integers(1, 6)), draw(st.integers(1, 4)))
    state = State(cluster)
    ends: list[tuple[float, str]] = []
    for node in cluster.nodes:  # mostly busy nodes, so that most gangs must wait
        busy = list(range(8 - draw(st.integers(0, 8).filter(lambda k: k < 4 or k == 8))))
        while busy:
            take = draw(st.integers(1, len(busy)))
            name = f"r{len(ends)}"
            state.allocate(name, Whole(node.name, tuple(busy[:take])))
            busy = busy[take:]
            ends.append((NOW_S + draw(st.integers(0, 20)) * 600.0, name))
    workers = draw(st.integers(1, 3))
    per = draw(st.sampled_from((1, 2, 4, 8) if workers == 1 else (8,)))
    return state, ends, Request(ACC, "gpus", workers, gpus_per_worker=per)


def _first_fitting_prefix(
    state: State, job: JobSpec, req: Request, ends: list[tuple[float, str]]
) -> backfill.Reservation | None:
    order = sorted(ends)
    names = [n for _, n in order]
    plugin = TopologyBestFit()
    for k in range(len(names) + 1):
        with state.branch() as w:
            for name in names[:k]:
                w.release_all(name)
            placed = plugin.place(w, job, req)
        if placed.status.ok:
            start = max(NOW_S, order[k - 1][0]) if k else NOW_S
            return backfill.Reservation(
                job.name, ACC, req.total_gpus, start, placed.placements, tuple(names[:k])
            )
    return None


@settings(max_examples=300, deadline=None)
@given(case=fragmented())
def test_find_gives_the_first_fitting_prefix(
    case: tuple[State, list[tuple[float, str]], Request],
) -> None:
    state, ends, req = case
    job = JobSpec.model_validate(
        {"name": "big", "team": "t", "gpus": req.gpus_per_worker, "workers": req.workers}
    )
    want = _first_fitting_prefix(state, job, req, ends)
    with state.branch() as b:
        got = backfill.find(b, TopologyBestFit(), job, req, ends=ends, now_s=NOW_S)
    assert got == want
