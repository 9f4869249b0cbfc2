"""`topology-best-fit` against a brute-force reference, on random clusters and histories.

The plugin answers from the state's counters (worker room per group, per
domain, in all) and skips tiers it already found full in the same free epoch;
the reference visits every node every time, as the plugin once did. Both must
give the same placement or the same reason, word for word, after any mix of
allocations, releases and rolled-back what-ifs, with one plugin instance kept
across all of them (so its full-tier memory is exercised). Lives with the
cluster tests because what it checks is that the counters and the free epoch
answer for the nodes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.cluster import Cluster, Node, State, StateView, Whole, expand_group
from gpufleet.sched.framework import Placed, Placement, Status
from gpufleet.sched.plugins import TopologyBestFit, group_members
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))
ACCS = ("h100-sxm5-80gb", "a100-sxm4-80gb")
LEVELS = (("node",), ("leaf", "node"), ("block", "leaf", "node"))
NAME = TopologyBestFit.name


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    levels = draw(st.sampled_from(LEVELS))
    depth = len(levels) - 1
    path = st.tuples(*[st.sampled_from(["x", "y"]) for _ in range(depth)])
    nodes: list[Node] = []
    for g in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([2, 4, 8]))
        count = draw(st.integers(1, 6))
        paths = sorted(draw(st.lists(path, min_size=count, max_size=count)))
        nodes += expand_group(
            f"g{g}",
            draw(st.sampled_from(ACCS)),
            gpus,
            paths,
            domain_gpus=draw(st.sampled_from([None, 2, gpus, 2 * gpus, 3 * gpus])),
            capacity=draw(st.sampled_from(["on-demand", "spot"])),
        )
    return Cluster(levels, tuple(nodes))


def _fit(
    view: StateView, job: JobSpec, req: Request, nodes: Sequence[str]
) -> tuple[Placement, ...] | None:
    c = view.cluster
    acc, workers, per = req.accelerator, req.workers, req.gpus_per_worker
    cands = []
    for name in nodes:
        node = c.node(name)
        if node.accelerator != acc or (node.capacity == "spot" and not job.spot_ok):
            continue
        if view.free_gpus(name) >= per:
            cands.append((view.free_gpus(name), c.node_index(name), name))
    if sum(free // per for free, _, _ in cands) < workers:
        return None
    out: list[Placement] = []
    for free, _, name in sorted(cands):
        ids = view.free_gpu_ids(name)
        for j in range(min(free // per, workers - len(out))):
            out.append(Placement(name, ids[j * per : (j + 1) * per]))
    return tuple(out)


def _spot_note(view: StateView, job: JobSpec, acc: str) -> str:
    c = view.cluster
    spot = any(
        n.accelerator == acc and n.capacity == "spot" and view.free_gpus(n.name) >= 1
        for n in c.nodes
    )
    return (
        "; spot nodes excluded (this job may not run on spot)" if spot and not job.spot_ok else ""
    )


def reference(view: StateView, job: JobSpec, req: Request) -> Placed:
    """Every tier, every group, every node, every time."""
    c = view.cluster
    acc, workers, per = req.accelerator, req.workers, req.gpus_per_worker
    total, shape = workers * per, f"{req.workers}×{req.gpus_per_worker}"
    required = job.topology.required
    if required is not None:
        if required not in c.levels:
            known = ", ".join(c.levels)
            why = f"cannot run: topology level '{required}' is not in this cluster ({known})"
            return Placed(status=Status("unschedulable", why, NAME))
        frees = {g: view.free_in_group(required, g, acc) for g in c.groups(required)}
        for group in sorted((g for g in frees if frees[g] >= total), key=frees.__getitem__):
            fit = _fit(view, job, req, group_members(c, required, group))
            if fit is not None:
                return Placed(fit)
        most = max(frees.values(), default=0)
        if most >= total:
            why = (
                f"waiting: no {required} can hold {shape} {acc} GPUs with each worker "
                f"on one node (free GPUs are fragmented; most free in one {required}: {most})"
            )
        else:
            why = (
                f"waiting: no {required} has {total} free {acc} GPUs for {shape} "
                f"(most free in one {required}: {most})"
            )
        return Placed(status=Status("wait", why + _spot_note(view, job, acc), NAME))
    domains = {d: view.free_in_domain(d) for d in c.domains}
    tiers = [("domain", [d for d in c.domains if domains[d] >= total and _domain_acc(c, d) == acc])]
    tiers[0][1].sort(key=domains.__getitem__)
    for level in c.levels[::-1]:
        frees = {g: view.free_in_group(level, g, acc) for g in c.groups(level)}
        tiers.append(
            (level, sorted((g for g in frees if frees[g] >= total), key=frees.__getitem__))
        )
    tiers.append(("anywhere", [""]))
    for level, groups in tiers:
        for group in groups:
            members = [n.name for n in c.nodes] if level == "anywhere" else None
            nodes = members or group_members(c, level, group)
            fit = _fit(view, job, req, nodes)
            if fit is not None:
                return Placed(fit)
    room = sum(
        view.free_gpus(n.name) // per
        for n in c.nodes
        if n.accelerator == acc and (n.capacity != "spot" or job.spot_ok)
    )
    why = (
        f"waiting: room for {room} of {workers} workers of {per} {acc} GPUs on single "
        f"nodes ({view.free_total(acc)} free {acc} GPUs in all)"
    )
    return Placed(status=Status("wait", why + _spot_note(view, job, acc), NAME))


def _domain_acc(c: Cluster, domain: str) -> str:
    node, _ = c.domain_members(domain)[0]
    return c.node(node).accelerator


shapes = st.tuples(
    st.sampled_from(ACCS),
    st.sampled_from([1, 1, 2, 3, 4, 6]),  # workers
    st.sampled_from([1, 2, 3, 4, 8]),  # GPUs per worker
    st.sampled_from([None, None, "leaf", "block", "node", "rack"]),
    st.booleans(),  # spot ok
)
# (action, shape): 0 place (and keep it), 1 place in a what-if after freeing a job, 2 free a job
steps = st.lists(st.tuples(st.integers(0, 5), shapes, st.integers(0, 10**6)), max_size=30)


@settings(
    max_examples=max(1, int(300 * SCALE)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cluster=clusters(), moves=steps)
def test_best_fit_matches_the_brute_force_reference(
    cluster: Cluster, moves: list[tuple[int, tuple[str, int, int, str | None, bool], int]]
) -> None:
    plugin = TopologyBestFit()
    state = State(cluster)
    n = 0

    def ask(view: StateView, shape: tuple[str, int, int, str | None, bool]) -> Placed:
        nonlocal n
        acc, workers, per, required, spot_ok = shape
        n += 1
        spec: dict[str, object] = {
            "name": f"j{n}",
            "team": "t",
            "gpus": per,
            "workers": workers,
            "allow_spot": spot_ok,
            "kind": "batch",
        }
        if required is not None:
            spec["topology"] = {"required": required}
        job = JobSpec.model_validate(spec)
        req = Request(acc, "gpus", workers, per)
        got = plugin.place(view, job, req)
        want = reference(view, job, req)
        # the plugin also hands out its reason as a record (sched.waits); the reference
        # writes the sentence only, which the record must word exactly
        assert (got.placements, got.status.code, got.status.reason, got.status.plugin) == (
            want.placements,
            want.status.code,
            want.status.reason,
            want.status.plugin,
        )
        return got

    def keep(view: StateView, placed: Placed) -> None:
        if placed.status.ok and isinstance(view, State):
            view.allocate(f"k{n}", *[Whole(p.node, p.gpus) for p in placed.placements])

    for action, shape, pick in moves:
        jobs = state.jobs()
        if action <= 2:
            keep(state, ask(state, shape))
            ask(state, shape)  # the same shape again, often from the full-tier memory
        elif action == 3 and jobs:
            with state.branch() as w:
                w.release_job(jobs[pick % len(jobs)])
                placed = ask(w, shape)
                if placed.status.ok:
                    w.allocate("what-if", *[Whole(p.node, p.gpus) for p in placed.placements])
                ask(w, shape)
        elif jobs:
            state.release_job(jobs[pick % len(jobs)])
        ask(state, shape)
