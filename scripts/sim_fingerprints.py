"""Fingerprints of the simulator's decisions and metrics, to show a refactor changes nothing.

Runs a fixed set of simulations (the synthetic benchmark stream on a small cluster under
every profile at 70 % and 115 % load, three with GPU failures and spot reclaims, the
bundled openb trace under six profiles, the MIG utilisation scenario under two) and prints
one hash per run over every `decide()` output (admissions, evictions, reservations,
reasons, flavors, re-layouts, order considered) and the run's metric JSON, samples and
first starts included. Equal hashes before and after a change mean byte-identical runs.

    .venv/bin/python scripts/sim_fingerprints.py > before.json   # on the old commit
    .venv/bin/python scripts/sim_fingerprints.py --check before.json

`--quick` runs the synthetic and failure cases only, with fewer jobs (a few seconds).
Not a test: a behaviour change that is meant (a new rule, a fixed bug) changes hashes too.

The hashed runs use full cycles (`SimConfig.lean_cycles=False`): a lean or quiet cycle
(`sched.lean`, `decide(quiet=)`) words no reasons. Every run is made again with them (lean
where the profile allows, quiet for every profile), and its outcome (metrics, first starts,
cycle and event counts) must equal the full run's; a difference is printed and fails the
check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gpufleet.cluster import Cluster
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.decide import decide
from gpufleet.sched.framework import Decisions
from gpufleet.sim import engine
from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.engine import FailureModel, SimConfig, SpotModel, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.workload import Workload
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec


class _Recorder:
    """Wraps `decide` (as the engine calls it) and hashes every decision it returns."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def __call__(self, *args: Any, **kwargs: Any) -> Decisions:
        d = decide(*args, **kwargs)
        seen = (
            sorted(d.admitted.items()),
            sorted((k, str(v)) for k, v in d.preempted.items()),  # the sentence, as before
            sorted(d.reserved.items()),
            sorted(d.reserved_start_s.items()),
            sorted(d.pending_reasons.items()),
            sorted(d.flavors.items()),
            d.relayouts,
            d.cycle,
            d.considered,
        )
        self.digest.update(repr(seen).encode())
        return d

    def finish(self, result: SimResult) -> str:
        self.digest.update(_outcome(result))
        return self.digest.hexdigest()[:16]


def _outcome(result: SimResult) -> bytes:
    """What a run ends with: its metrics, first starts, and cycle and event counts."""
    data = result.metrics.to_json(series=True)
    _drop_added_fields(data)
    metrics = json.dumps(data, sort_keys=True, default=str)
    first = repr(sorted(result.first_start_s.items()))
    return (metrics + first + repr((result.cycles, result.events))).encode()


LEAN_DIFFERS: list[str] = []  # runs whose lean (or quiet) replay ended differently


def _drop_added_fields(data: dict[str, Any]) -> None:
    """The means of wait and JCT, the makespan and the slowdown were added after the
    baseline (issue 29); they are computed from the same completions as the percentiles,
    which the hash keeps."""
    data.pop("makespan_s", None)  # issue 29 too, from the same completions
    data.pop("slowdown", None)
    data.pop("gpu_allocation_while_arriving", None)
    data.pop("per_size", None)
    data.pop("gang_wait_gpu_hours", None)  # the goodput ratio's parts (stop 45)
    data.pop("in_progress_gpu_hours", None)
    # what a whole-GPU-only profile gives a slice or share job beyond its request (stop 47):
    # 0 in every run where no job holds more than it asks
    data.pop("idle_held_gpu_hours", None)
    # added with the headline wait and JCT left to training, batch and interactive jobs:
    # how many jobs they cover, and the inference replicas' wait they leave out (counts and
    # waits of the same completions; the headline figures themselves are hashed as before)
    data.pop("jct_jobs", None)
    data.pop("inference_wait_s", None)
    for key in ("gpu_allocation_in_window", "window_from_s", "window_to_s"):
        data.pop(key, None)  # only with --window, which the fingerprint runs do not give
    groups = [data, *data.get("per_team", {}).values(), *data.get("per_kind", {}).values()]
    for group in groups:
        for key in ("wait_s", "jct_s"):
            if isinstance(group.get(key), dict):
                group[key].pop("mean", None)


def _teams(n: int, guaranteed: int) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: guaranteed}} for i in range(n)],
        }
    )


def _run(cluster: Cluster, teams: TeamsSpec, workload: Workload, config: SimConfig) -> str:
    recorder = _Recorder()
    engine.decide = recorder  # type: ignore[assignment]
    try:
        result = simulate(cluster, teams, workload, replace(config, lean_cycles=False))
    finally:
        engine.decide = decide
    lean = simulate(cluster, teams, workload, replace(config, lean_cycles=True))
    if _outcome(lean) != _outcome(result):
        LEAN_DIFFERS.append(f"{config.profile} on {cluster.name}, {len(workload.jobs)} jobs")
    return recorder.finish(result)


def fingerprints(quick: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    jobs = 400 if quick else 1500
    nodes = 64
    teams = _teams(4, nodes * 2)
    for profile in PROFILES:
        for load in (0.7, 1.15):
            workload = synthetic_workload(nodes, jobs, load, seed=3)
            config = SimConfig(profile=profile, seed=1)
            out[f"syn-{profile}-{load}"] = _run(bench_cluster(nodes), teams, workload, config)
    c = bench_cluster(nodes)
    spot = Cluster(
        c.levels,
        tuple(replace(n, capacity="spot") if i % 5 == 0 else n for i, n in enumerate(c.nodes)),
        name=c.name,
    )
    for profile in ("default", "fifo", "k8s-default"):
        config = SimConfig(
            profile=profile,
            seed=2,
            failures=FailureModel(gpu_mtbf_h=2000.0),
            spot=SpotModel(reclaim_per_node_per_day=2.0),
        )
        workload = synthetic_workload(nodes, jobs, 0.9, seed=4)
        out[f"fail-spot-{profile}"] = _run(spot, teams, workload, config)
    if quick:
        return out
    from gpufleet.sim.experiments import profile_setup, utilization_scenario
    from gpufleet.sim.generate import generate
    from gpufleet.sim.setup import cluster_from_nodes, open_teams
    from gpufleet.sim.traces import bundled_openb

    openb = bundled_openb()
    openb_cluster = cluster_from_nodes(openb.nodes)
    openb_teams = open_teams(openb_cluster, openb)
    for profile in ("default", "fifo", "k8s-default", "slurm-like", "fgd", "tiresias"):
        config = SimConfig(profile=profile)
        out[f"openb-{profile}"] = _run(openb_cluster, openb_teams, openb, config)
    scenario = utilization_scenario(days=3)
    cluster = Cluster.from_spec(scenario.cluster)
    workload = generate(scenario.workload, np.random.default_rng(0))
    for profile in ("default", "k8s-default"):
        setup = profile_setup(profile, cluster, scenario.teams, workload)
        config = SimConfig(profile=profile, horizon_s=3 * 86_400.0)
        out[f"util-{profile}"] = _run(setup.cluster, setup.teams, setup.workload, config)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="synthetic and failure runs only")
    parser.add_argument("--check", type=Path, help="compare with fingerprints written earlier")
    args = parser.parse_args()
    got = fingerprints(args.quick)
    for run in LEAN_DIFFERS:
        print(f"lean or quiet cycles end differently: {run}", file=sys.stderr)
    if args.check is None:
        json.dump(got, sys.stdout, indent=1, sort_keys=True)
        print()
        return 1 if LEAN_DIFFERS else 0
    want = json.loads(args.check.read_text())
    differ = sorted(k for k in got if k in want and want[k] != got[k])
    missing = sorted(k for k in got if k not in want)
    for name in differ:
        print(f"differs: {name}")
    for name in missing:
        print(f"not in {args.check}: {name}")
    print(f"{len(got) - len(differ) - len(missing)} of {len(got)} runs identical")
    return 1 if differ or LEAN_DIFFERS else 0


if __name__ == "__main__":
    raise SystemExit(main())
