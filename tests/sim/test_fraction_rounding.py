"""A GPU fraction is placed in eighths of a GPU, rounded up (`sched.requests.FRACTION_STEPS`):
a 0.05-GPU job holds 0.125, a 0.32-GPU job 0.375. The rounding is held, not work.

Every profile counted the eighths as useful work: `gpufleet simulate trace bundled:openb`
reported 52,161 GPU-hours completed and goodput 100 % for a trace whose jobs ask for
51,498.7 GPU-hours (Σ gpu_fraction or gpus × duration). Work is counted on what a job asked
for; the rounding is `idle_held_gpu_hours`, as the rest of a whole GPU is under a
whole-GPU-only profile. What a job holds (allocation, per-team GPU-hours, the `gpus` column
of `--jobs-out`) is still what it was given.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main
from gpufleet.cluster import Cluster, Node
from gpufleet.sim.conservation import check, check_ledger
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.setup import cluster_from_nodes, open_teams
from gpufleet.sim.traces import bundled_openb
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload

A100 = "a100-sxm4-80gb"
HOUR = 3600.0


def _job(name: str, submit_s: float, duration_s: float, **kw: Any) -> TraceJob:
    kw.setdefault("team", "research")
    return TraceJob(name, submit_s=submit_s, duration_s=duration_s, **kw)


def _workload() -> Workload:
    """A 0.05-GPU job and a 0.32-GPU job of 2 h, and a 0.5-GPU job of 1 h (a whole number
    of eighths: nothing rounded), on one shared GPU."""
    jobs = (
        _job("tiny", 0.0, 2 * HOUR, gpu_fraction=0.05),
        _job("third", 0.0, 2 * HOUR, gpu_fraction=0.32),
        _job("half", 0.0, HOUR, gpu_fraction=0.5),
    )
    return Workload(jobs, CleaningReport("test", len(jobs), len(jobs)))


def _run(profile: str, workload: Workload | None = None, **config: Any) -> SimResult:
    w = workload or _workload()
    cluster = Cluster(("node",), (Node("share-0", A100, 2, fractions=True),))
    return simulate(cluster, open_teams(cluster, w), w, SimConfig(profile=profile, **config))


@pytest.mark.parametrize("profile", ["default", "fifo", "slurm-like", "tiresias"])
def test_the_eighths_a_fraction_is_rounded_up_to_are_held_not_work(profile: str) -> None:
    result = _run(profile)
    m = result.metrics
    assert check(result) == []
    asked_h = 0.05 * 2 + 0.32 * 2 + 0.5 * 1
    held_h = 0.125 * 2 + 0.375 * 2 + 0.5 * 1
    assert m.gpu_hours_completed == pytest.approx(asked_h)
    assert m.idle_held_gpu_hours == pytest.approx(held_h - asked_h)
    assert m.goodput_ratio == pytest.approx(asked_h / held_h)
    # what it held is unchanged: the allocation and the team's GPU-hours count the eighths
    assert result.ledger is not None
    assert result.ledger.held_gpu_s / 3600 == pytest.approx(held_h)
    assert m.per_team["research"]["gpu_hours"] == pytest.approx(held_h)
    # a row per job: what it held, and what it asked for
    rows = {j.name: (j.gpus, j.requested_gpus) for j in m.jobs}
    assert rows == {"tiny": (0.125, 0.05), "third": (0.375, 0.32), "half": (0.5, 0.5)}


def test_under_k8s_default_the_whole_gpu_beyond_the_fraction_is_idle_held() -> None:
    m = _run("k8s-default").metrics
    assert m.gpu_hours_completed == pytest.approx(0.05 * 2 + 0.32 * 2 + 0.5)
    assert m.idle_held_gpu_hours == pytest.approx(0.95 * 2 + 0.68 * 2 + 0.5)


def test_a_rounded_fraction_cut_by_the_horizon_has_only_its_request_in_progress() -> None:
    result = _run("default", horizon_s=HOUR)
    m = result.metrics
    assert check(result) == []
    assert m.jobs_unfinished == 2  # tiny and third, half-way through
    assert m.in_progress_gpu_hours == pytest.approx(0.05 + 0.32)
    assert m.idle_held_gpu_hours == pytest.approx(0.075 + 0.055)


def test_work_hidden_in_the_rounding_or_the_rounding_counted_as_work_is_caught() -> None:
    result = _run("default")
    assert result.ledger is not None
    held = result.ledger.jobs["third"]
    assert held.idle_gpu_s == pytest.approx(held.held_gpu_s * 0.055 / 0.375)
    old = replace(held, useful_gpu_s=held.useful_gpu_s + held.idle_gpu_s, idle_gpu_s=0.0)
    jobs = {**result.ledger.jobs, "third": old}
    found = check_ledger(result.metrics, replace(result.ledger, jobs=jobs))
    assert any("job third " in v.message and "beyond its request" in v.message for v in found)


@pytest.mark.parametrize("profile", ["default", "k8s-default"])
def test_openb_completes_the_gpu_hours_its_trace_asks_for(profile: str) -> None:
    """The bundled openb trace asks for 51,498.7 GPU-hours (Σ gpus or gpu_milli / 1000 ×
    duration over the kept pods) and every pod completes: that is the work done, less the
    0.7 GPU-hours of inference windows (QoS LS pods) that passed while a replica waited for
    the next 10 s scheduling cycle (a replica serves inside its window only). Its 3,077
    shares are placed in eighths, which hold 663 GPU-hours more (under `default`)."""
    w = bundled_openb()
    demand_h = math.fsum(j.total_gpus * j.duration_s for j in w.jobs) / 3600
    assert demand_h == pytest.approx(51_498.7, abs=0.05)
    cluster = cluster_from_nodes(w.nodes)
    result = simulate(cluster, open_teams(cluster, w), w, SimConfig(profile=profile))
    m = result.metrics
    assert m.jobs_unfinished == 0
    assert m.preemptions == m.failures == 0  # so a replica served from its start to its end
    served_h = math.fsum(
        j.requested_gpus * (j.end_s - j.first_start_s if j.kind == "inference" else j.duration_s)
        for j in m.jobs
    )
    assert m.gpu_hours_completed == pytest.approx(served_h / 3600, rel=1e-9)
    assert m.gpu_hours_completed == pytest.approx(demand_h, abs=1.0)
    if profile == "default":
        assert m.gpu_hours_completed == pytest.approx(51_498.0, abs=0.05)
        assert m.idle_held_gpu_hours == pytest.approx(662.8, abs=0.05)
        assert m.goodput_ratio is not None
        assert m.goodput_ratio < 0.99


def test_jobs_out_shows_what_a_rounded_fraction_held_and_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(
        "kind: cluster\nname: s\nnodes:\n  - {name: s, count: 1, accelerator: a100-sxm4-80gb, "
        "gpus_per_node: 1, fractions: true}\n"
    )
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("name,team,submit_s,duration_s,gpu_fraction\nx,t,0,3600,0.32\n")
    out = tmp_path / "rows.csv"
    argv = ["simulate", str(cluster), str(jobs), "--trace-format", "gpufleet"]
    assert main([*argv, "--jobs-out", str(out), "--format", "json"]) == 0
    capsys.readouterr()
    with out.open(encoding="utf-8") as stream:
        (row,) = list(csv.DictReader(stream))
    assert (float(row["gpus"]), float(row["requested_gpus"])) == (0.375, 0.32)
