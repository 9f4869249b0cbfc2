"""`simulate --checkpoint-every`: traces rarely say whether jobs checkpoint, LAS preemption
evicts only jobs that do (`sched.las`), so a user replaying a trace under `tiresias` states
the paper's assumption with one option."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main

CLUSTER = """\
kind: cluster
name: one-node
nodes:
  - {name: n, count: 1, accelerator: h100-sxm5-80gb, gpus_per_node: 8}
"""
# A: 8 GPUs for 10 h from 0; B: 8 GPUs for 1 h from 1 h; C: a service replica (keeps nothing)
JOBS = """\
name,team,submit_s,duration_s,gpus,workers,kind
A,t,0,36000,8,1,training
B,t,3600,3600,8,1,batch
C,t,90000,600,8,1,inference
"""


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, dict[str, str]], dict[str, object]]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER, encoding="utf-8")
    (tmp_path / "jobs.csv").write_text(JOBS, encoding="utf-8")
    out, rows = tmp_path / "out", tmp_path / "jobs-out.csv"
    code = main(
        [
            "simulate",
            "run",
            str(tmp_path / "cluster.yaml"),
            str(tmp_path / "jobs.csv"),
            "--trace-format",
            "gpufleet",
            "--profile",
            "tiresias",
            "--format",
            "json",
            "--out",
            str(out),
            "--jobs-out",
            str(rows),
            *extra,
        ]
    )
    if code:
        return code, {}, {}
    with rows.open(encoding="utf-8") as f:
        jobs = {r["name"]: r for r in csv.DictReader(f)}
    return code, jobs, json.loads((out / "result.json").read_text(encoding="utf-8"))


def test_without_it_a_trace_that_gives_no_checkpoints_is_never_evicted(tmp_path: Path) -> None:
    code, jobs, result = _run(tmp_path)
    assert code == 0
    assert float(jobs["B"]["first_start_s"]) == 36_000.0  # waits for A: LAS order, no eviction
    assert result["metrics"]["preemptions"] == 0  # type: ignore[index]


def test_with_it_a_newcomer_evicts_the_long_job_when_it_crosses_the_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, jobs, result = _run(tmp_path, "--checkpoint-every", "10min")
    assert code == 0
    # A crosses 16 GPU-hours at 2 h, B evicts it then; A resumes from its 2 h checkpoint
    assert float(jobs["B"]["first_start_s"]) == 7_200.0
    assert float(jobs["A"]["end_s"]) == 36_000.0 + 3_600.0 + 300.0  # + B's hour + the restart
    assert result["metrics"]["preemptions"] == 1  # type: ignore[index]
    err = capsys.readouterr().err
    assert "--checkpoint-every 10min: 2 training and batch jobs" in err


@pytest.mark.parametrize("value", ["0s", "-5min", "soon"])
def test_a_bad_interval_is_refused_and_nothing_is_written(tmp_path: Path, value: str) -> None:
    code, _, _ = _run(tmp_path, "--checkpoint-every", value)
    assert code == 2
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "jobs-out.csv").exists()
