"""The headline wait and JCT are over the jobs papers measure; inference replicas apart.

An inference replica is wanted for a window [arrival, arrival + duration] and ends at the
window's end however late it starts, so its "completion time" is its serving window. Mixed
into `jct_s` they dragged the figure the guide calls "the average JCT papers report": on
the guide's run 1 (examples/sim-workload-mixed.yaml, seed 1) JCT mean 3.53 h and p99
exactly 172,800 s (a 2-day window), 2.96 h without the 44 replicas. `wait_s`, `jct_s` (and
the CDFs compare plots, and `per_size`) now cover training, batch and interactive jobs, as
`slowdown` already did; `jct_jobs` says how many; inference replicas are in
`per_kind.inference` and `inference_wait_s`, in every output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.cluster import Cluster, Node
from gpufleet.report.comparison import compare_files, metric_label, render_markdown
from gpufleet.sim.compare import Run, scalars, summarize
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.metrics import SimMetrics
from gpufleet.sim.setup import open_teams
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload

H100 = "h100-sxm5-80gb"
HOUR = 3600.0
WINDOW = 48 * HOUR
# one 2-GPU node: a replica serving 48 h on one GPU, and two 1-hour training jobs that take
# turns on the other (the second waits an hour)
JOBS_CSV = (
    "name,team,submit_s,duration_s,gpus,kind\n"
    f"serve,prod,0,{WINDOW:.0f},1,inference\n"
    "t1,lab,0,3600,1,training\n"
    "t2,lab,0,3600,1,training\n"
)
CLUSTER_YAML = (
    "kind: cluster\nname: two\nnodes:\n"
    f"  - {{name: n, count: 1, accelerator: {H100}, gpus_per_node: 2}}\n"
)


def _workload() -> Workload:
    jobs = (
        TraceJob("serve", "prod", 0.0, WINDOW, gpus=1, kind="inference"),
        TraceJob("t1", "lab", 0.0, HOUR, gpus=1, kind="training"),
        TraceJob("t2", "lab", 0.0, HOUR, gpus=1, kind="training"),
    )
    return Workload(jobs, CleaningReport("test", 3, 3))


def _metrics() -> SimMetrics:
    w = _workload()
    cluster = Cluster(("node",), (Node("n", H100, 2),))
    return simulate(cluster, open_teams(cluster, w), w, SimConfig(profile="fifo")).metrics


def test_headline_wait_and_jct_leave_inference_replicas_out() -> None:
    m = _metrics()
    training = [j for j in m.jobs if j.kind == "training"]
    assert m.jobs_completed == 3
    assert m.jct_jobs == 2
    assert m.jct_s["mean"] == pytest.approx(sum(j.jct_s for j in training) / 2)
    assert m.jct_s["p99"] is not None
    assert m.jct_s["p99"] < 3 * HOUR
    assert m.wait_s["mean"] == pytest.approx(sum(j.wait_s for j in training) / 2)
    assert len(m.jcts) == len(m.waits) == 2  # what compare's CDFs are drawn from
    assert m.per_size["1 GPU"]["jobs_completed"] == 2
    # the replica is reported apart
    assert m.per_kind["inference"]["jct_s"]["mean"] == WINDOW
    assert m.inference_wait_s["mean"] == 0.0
    data = m.to_json()
    assert data["jct_jobs"] == 2
    assert data["inference_wait_s"] == {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0}


def test_without_inference_replicas_there_is_no_inference_wait_field() -> None:
    w = Workload(_workload().jobs[1:], CleaningReport("test", 2, 2))
    cluster = Cluster(("node",), (Node("n", H100, 2),))
    m = simulate(cluster, open_teams(cluster, w), w, SimConfig()).metrics
    assert m.jct_jobs == m.jobs_completed == 2
    assert "inference_wait_s" not in m.to_json()


def test_compare_says_which_jobs_its_wait_and_jct_cover() -> None:
    m = _metrics()
    row = scalars(m)
    assert row["jct_jobs"] == 2
    assert row["inference_wait_s.p95"] == 0.0
    summary = summarize([Run("fifo", 0, m)])
    assert "inference_wait_s.mean" in summary["metrics"]["fifo"]
    assert metric_label("inference_wait_s.p95") == "Inference wait p95"
    md = render_markdown(summary)
    assert "| Inference wait p95 |" in md
    assert "training, batch and interactive jobs" in md
    html = compare_files(summary)["compare.html"].decode("utf-8")
    assert "training, batch and interactive jobs" in html


def test_the_terminal_and_json_say_which_jobs_the_headline_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(CLUSTER_YAML)
    (tmp_path / "jobs.csv").write_text(JOBS_CSV)
    argv = ["simulate", str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv")]
    argv += ["--trace-format", "gpufleet", "--profile", "fifo"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "wait, JCT, slowdown and per size: 2 training, batch and interactive jobs" in out
    assert "Per kind" in out
    assert "inference" in out
    assert main([*argv, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["metrics"]
    assert data["jct_jobs"] == 2
    assert data["per_kind"]["inference"]["jct_s"]["mean"] == WINDOW
