"""What a simulation runs on, built from what the user has: files in, a cluster, teams, jobs out.

The engine takes a `Cluster`, a `TeamsSpec` and a `Workload`; users have a cluster spec or
a trace that lists its own nodes (openb), maybe a teams file, and a trace file or a
`kind: workload` generator spec. This module bridges the two, and nothing else: it reads
files and raises `UserError`s (exit 2 at the CLI) but prints nothing, so the CLI and
tests can both use it.

It also says, before anything runs, which jobs can never run on the cluster they were
given (`placement_warnings`): a trace's accelerator names ("openb-V100M32", sacct's
"a100") are the trace's own and often match no node of a catalog cluster. Such jobs are
counted and reported, never silently renamed; the user decides what they mean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Final

from gpufleet.catalog.mig import mig_profiles_for
from gpufleet.cluster import Cluster
from gpufleet.cluster.topology import Node
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sim.generate import generate
from gpufleet.sim.traces import READERS, bundled_openb, read_openb, read_trace
from gpufleet.sim.traces._common import check_exists
from gpufleet.sim.traces.native import read_native
from gpufleet.sim.traces.openb import BUNDLED_PODS, bundled_file
from gpufleet.sim.workload import TraceJob, TraceNode, Workload
from gpufleet.specs.teams import (
    DEFAULT_PRIORITY_CLASSES,
    OPEN_QUOTA_GPUS,
    PriorityClass,
    Quota,
    Team,
    TeamsSpec,
)
from gpufleet.specs.workload import load_workload_spec

TRACE_CLUSTER: Final = "trace"  # CLUSTER argument: the nodes the trace itself lists
BUNDLED_PREFIX: Final = "bundled:"  # WORKLOAD argument: a trace shipped with gpufleet
POLLUX_WORKLOADS: Final = tuple(f"pollux-{i}" for i in range(1, 9))
BUNDLED: Final = ("openb", *POLLUX_WORKLOADS)
# Pollux's evaluation cluster (Qiao et al., OSDI'21, §5.3): 16 nodes of 4 T4 GPUs
POLLUX_NODES: Final = tuple(TraceNode(f"pollux-node-{i:02d}", "pollux-T4", 4) for i in range(16))
YAML_SUFFIXES: Final = frozenset({".yaml", ".yml"})
OPEN_TEAM_PRIORITY: Final = 500  # a priority class the workload names but no teams file defines


def cluster_from_nodes(nodes: tuple[TraceNode, ...], name: str = TRACE_CLUSTER) -> Cluster:
    """The cluster a trace describes: one flat level of nodes, each allowing GPU fractions.

    Only openb lists its nodes, and it is a GPU-*sharing* trace: most pods ask for part of
    one GPU, so every node allows fractions. The trace gives no topology, hence the single
    "node" level.
    """
    if not nodes:
        raise UserError("the workload lists no nodes of its own: give a cluster spec")
    return Cluster(
        ("node",),
        tuple(
            Node(n.name, n.accelerator, n.gpus, path=(), capacity=n.capacity, fractions=True)
            for n in nodes
        ),
        name=name,
    )


def open_teams(
    cluster: Cluster, workload: Workload, *, extra_teams: Iterable[str] = ()
) -> TeamsSpec:
    """Teams for a run without a teams file: every team may use the whole cluster.

    Each team of the workload (plus `extra_teams`) is guaranteed `OPEN_QUOTA_GPUS` of every
    accelerator, more than any use reaches, so quotas never hold a job back (a job waits
    only for room, and gets a backfill reservation as such) and fair share sees equal
    entitlements. A guarantee of the cluster's size counted a team's own running jobs
    against it: on a one-team trace every job blocked by room was "beyond its quota" and
    backfilling profiles reserved for none.
    The default priority classes, plus any class the workload names that they lack (at
    value 500, preemptible), so every job's class resolves.

    Quotas are built without validation: a trace cluster's accelerators ("openb-G3") are
    not catalog names, which the teams spec would otherwise refuse.
    """
    quotas = [
        Quota.model_construct(flavor=acc, guaranteed_gpus=OPEN_QUOTA_GPUS)
        for acc in sorted(cluster.gpus_by_accelerator)
    ]
    names = sorted({j.team for j in workload.jobs} | set(extra_teams)) or ["default"]
    classes = list(DEFAULT_PRIORITY_CLASSES)
    known = {c.name for c in classes}
    wanted = sorted({j.priority_class for j in workload.jobs if j.priority_class} - known)
    classes += [PriorityClass(name=n, value=OPEN_TEAM_PRIORITY, preemptible=True) for n in wanted]
    return TeamsSpec(
        priority_classes=classes,
        teams=[
            Team.model_validate({"name": n, "quotas": quotas, "default_priority": "standard"})
            for n in names
        ],
    )


def check_priority_classes(teams: TeamsSpec, workload: Workload, source: str) -> None:
    """Refuse, before running, a workload whose priority classes the teams file lacks.

    The scheduler would raise on the first such job mid-run; failing first writes nothing
    and names every missing class at once.
    """
    known = [c.name for c in teams.priority_classes]
    missing = sorted({j.priority_class for j in workload.jobs if j.priority_class} - set(known))
    if missing:
        raise UserError(
            f"{source}: the workload uses priority class{'es' * (len(missing) > 1)} "
            f"{', '.join(repr(m) for m in missing)} that the teams file does not define "
            f"(it defines {', '.join(known)})"
        )


def placement_warnings(
    cluster: Cluster, workload: Workload, teams: TeamsSpec | None = None, *, recut: bool = False
) -> tuple[str, ...]:
    """One line per reason some jobs can never run here, with how many jobs; () if none.

    Reasons: none of a job's acceptable accelerators is in the cluster (names are compared
    as written, not rewritten); more whole GPUs than the cluster could ever give it (a
    worker larger than every node of its types, or more workers than all those nodes hold
    together: a bound for every profile, gangs or not; a gang confined to one type can
    fail with less); a MIG profile no GPU is cut into; a GPU fraction with no node that
    shares GPUs; a team the teams file does not list. With `recut` (the simulator re-cuts
    idle MIG GPUs, `SimConfig.relayout_s`) a profile is possible wherever a MIG-enabled GPU's
    accelerator offers it: a 7g.80gb job was warned "never runs", then ran after a re-cut.
    """
    accelerators = set(cluster.accelerators)
    profiles = {p for node in cluster.nodes for layout in node.mig for p, _ in layout}
    if recut:
        cut = {node.accelerator for node in cluster.nodes if any(node.mig)}
        profiles |= {p.profile for acc in cut for p in mig_profiles_for(acc)}
    shares = any(node.fractions for node in cluster.nodes)
    team_names = {t.name for t in teams.teams} if teams is not None else None
    no_acc: Counter[tuple[str, ...]] = Counter()
    no_mig: Counter[str] = Counter()
    no_share = 0
    no_team: Counter[str] = Counter()
    too_big = 0
    fits: dict[tuple[int, tuple[str, ...]], int] = {}  # (GPUs per worker, types) -> workers
    for job in workload.jobs:
        if job.accelerators and accelerators.isdisjoint(job.accelerators):
            no_acc[job.accelerators] += 1
        elif job.gpus:
            shape = (job.gpus, job.accelerators)
            fit = fits.get(shape)
            if fit is None:
                fit = fits[shape] = _workers_that_fit(cluster, job)
            too_big += fit < job.workers
        if job.mig_profile is not None and job.mig_profile not in profiles:
            no_mig[job.mig_profile] += 1
        if job.gpu_fraction is not None and not shares:
            no_share += 1
        if team_names is not None and job.team not in team_names:
            no_team[job.team] += 1
    have = ", ".join(sorted(accelerators))
    lines = [
        f"{n:,} job{_s(n)} ask{_s(n, verb=True)} for {' or '.join(accs)}, which the cluster "
        f"does not have ({have}): {_never(n)}"
        for accs, n in sorted(no_acc.items())
    ]
    lines += [
        f"{n:,} job{_s(n)} ask{_s(n, verb=True)} for MIG slice {p}, which no GPU of the "
        f"cluster is cut into{' or can be re-cut into' if recut else ''}: {_never(n)}"
        for p, n in sorted(no_mig.items())
    ]
    if too_big:
        lines.append(
            f"{too_big:,} job{_s(too_big)} ask{_s(too_big, verb=True)} for more whole GPUs "
            f"than the cluster's nodes of {'their' if too_big > 1 else 'its'} accelerator "
            f"types could hold (a worker larger than every node, or more workers than the "
            f"nodes hold together): {_never(too_big)}"
        )
    if no_share:
        lines.append(
            f"{no_share:,} job{_s(no_share)} ask{_s(no_share, verb=True)} for a GPU fraction; "
            f"no node of the cluster shares GPUs (fractions: true): {_never(no_share)}"
        )
    lines += [
        f"{n:,} job{_s(n)} of team {t!r}, which the teams file does not list: {_never(n)}"
        for t, n in sorted(no_team.items())
    ]
    return tuple(lines)


def _workers_that_fit(cluster: Cluster, job: TraceJob) -> int:
    """How many of `job`'s workers the whole cluster could hold at once, on nodes of its
    acceptable accelerators, with nothing else running."""
    per_worker = job.gpus or 0
    return sum(
        node.gpus // per_worker
        for node in cluster.nodes
        if not job.accelerators or node.accelerator in job.accelerators
    )


def _never(n: int) -> str:
    return "it will never run" if n == 1 else "they will never run"


def _s(n: int, *, verb: bool = False) -> str:
    """Plural 's' for a noun, or the third-person 's' of a verb with a singular subject."""
    return ("s" if n == 1 else "") if verb else ("" if n == 1 else "s")


# -- workloads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSource:
    """A workload file read once, from which each seed's workload is drawn.

    A generator spec draws a new workload per seed (a fresh `default_rng(seed)`, as the
    generator asks); a trace is the same jobs for every seed (the seed then drives only
    failures and spot reclaims in the engine).
    """

    name: str
    draw: Callable[[int], Workload]
    varies_with_seed: bool


def assume_checkpoints(source: WorkloadSource, interval_s: float) -> WorkloadSource:
    """`source` with every training and batch job that declares no checkpoint interval
    saving its work every `interval_s` (`simulate --checkpoint-every`). Traces rarely say
    whether jobs checkpoint; Tiresias assumes they all do, and LAS preemption evicts only
    jobs that keep their work (`sched.las`). Serving and interactive jobs keep nothing."""

    def draw(seed: int) -> Workload:
        workload = source.draw(seed)
        jobs = tuple(
            replace(j, checkpoint_interval_s=interval_s)
            if j.checkpoint_interval_s is None and j.kind in ("training", "batch")
            else j
            for j in workload.jobs
        )
        return replace(workload, jobs=jobs)

    return WorkloadSource(source.name, draw, source.varies_with_seed)


def workload_source(
    path: Path | str, trace_format: str | None = None, *, nodes: Path | None = None
) -> WorkloadSource:
    """Read `path`: a `kind: workload` YAML when `trace_format` is None, else a trace.

    `path` may be `bundled:openb` for the trace shipped with gpufleet. `nodes` is an openb
    node list for the trace's own cluster (the bundled one otherwise). Every problem is a
    `UserError` naming the file: missing, of another kind, an unknown format.
    """
    text = str(path)
    if text.startswith(BUNDLED_PREFIX):
        return _bundled(text.removeprefix(BUNDLED_PREFIX), trace_format, nodes)
    path = Path(path)
    if trace_format is None:
        if path.suffix.lower() not in YAML_SUFFIXES:
            raise UserError(
                f"{path}: not a workload spec (.yaml); for a trace file give --trace-format "
                "(openb, philly, helios, sacct or gpufleet)"
            )
        if nodes is not None:
            raise UserError("--trace-nodes is for openb traces, not a workload spec")
        import numpy as np

        spec = load_workload_spec(path)
        return WorkloadSource(
            str(path), lambda seed: generate(spec, np.random.default_rng(seed)), True
        )
    workload = _read_trace(path, trace_format, nodes)
    return WorkloadSource(str(path), lambda _seed: workload, False)


def load_workload(
    path: Path | str, trace_format: str | None, seed: int, *, nodes: Path | None = None
) -> Workload:
    """The workload of one run (see `workload_source`)."""
    return workload_source(path, trace_format, nodes=nodes).draw(seed)


def _read_trace(path: Path, trace_format: str, nodes: Path | None) -> Workload:

    if nodes is None:
        return read_trace(path, trace_format)
    if trace_format not in READERS:
        raise UnknownNameError("trace format", trace_format, READERS)
    if trace_format != "openb":
        raise UserError(f"--trace-nodes is for openb traces, not {trace_format}")
    check_exists(path)
    check_exists(nodes)
    return read_openb(path, nodes)


def bundled_pollux(name: str) -> Workload:
    """One of the Pollux (OSDI'21) workloads shipped with gpufleet (data/traces/pollux), on
    the paper's cluster (CLUSTER 'trace': 16 nodes × 4 GPUs, named as the trace's T4). Its
    durations are T4 run times, so that is its reference accelerator (sim.speed)."""
    ref = resources.files("gpufleet").joinpath(
        "data", "traces", "pollux", f"workload-{name.removeprefix('pollux-')}.csv"
    )
    with resources.as_file(ref) as path:
        workload = read_native(path)
    return replace(workload, nodes=POLLUX_NODES, reference_accelerator=POLLUX_NODES[0].accelerator)


def _bundled(name: str, trace_format: str | None, nodes: Path | None) -> WorkloadSource:
    if name not in BUNDLED:
        raise UnknownNameError("bundled trace", name, BUNDLED)
    if name in POLLUX_WORKLOADS:
        if trace_format not in (None, "gpufleet") or nodes is not None:
            raise UserError(
                f"{BUNDLED_PREFIX}{name} is a gpufleet-format trace with its own nodes; drop "
                "--trace-format and --trace-nodes"
            )
        pollux = bundled_pollux(name)
        return WorkloadSource(f"{BUNDLED_PREFIX}{name}", lambda _seed: pollux, False)
    if trace_format not in (None, name):
        raise UserError(f"{BUNDLED_PREFIX}{name} is an {name} trace, not {trace_format}")

    if nodes is None:
        workload = bundled_openb()
    else:
        check_exists(nodes)
        with bundled_file(BUNDLED_PODS) as pods:
            workload = read_openb(pods, nodes)
    return WorkloadSource(f"{BUNDLED_PREFIX}{name}", lambda _seed: workload, False)
