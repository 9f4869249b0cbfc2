"""`--horizon` and `--window` on one clock: time after the workload's first arrival.

`--horizon` was a time on the workload's own clock while `--window` (and `duration_s`,
`makespan_s`, the window fields) count from the first arrival. A native trace need not
start at 0: with its first arrival at 100,000 s, `--horizon 1d` ended the run before
anything arrived and printed duration 0, 4 unfinished and no warning. Now the horizon
counts from the first arrival too, and a horizon that ends before most jobs arrive is
warned about. `gpu_allocation_while_arriving` was None whenever the horizon cut the
arrivals (the last arrival, where its window ends, never came); the window now ends at
the end of the run when that comes first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main

FIRST = 100_000
CLUSTER = (
    "kind: cluster\nname: w\nnodes:\n"
    "  - {name: n, count: 1, accelerator: h100-sxm5-80gb, gpus_per_node: 8}\n"
)
# four 1-hour 8-GPU jobs, an hour apart, the first at 100,000 s on the workload's clock
JOBS = "name,team,submit_s,duration_s,gpus,kind\n" + "".join(
    f"j{i},t,{FIRST + 3600 * i},3600,8,training\n" for i in range(4)
)
WORKLOAD = """\
kind: workload
horizon: 1d
teams:
  - name: lab
    workloads:
      - kind: training
        arrivals_per_day: 6
        gpus: {choices: [1, 2]}
        duration: {exponential_mean: 1h}
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    (tmp_path / "c.yaml").write_text(CLUSTER)
    (tmp_path / "jobs.csv").write_text(JOBS)
    argv = ["simulate", "run", str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv")]
    argv += ["--trace-format", "gpufleet", "--format", "json", "--restart-overhead", "0"]
    code = main([*argv, *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data: dict[str, Any] = json.loads(captured.out)
    return data


def test_the_horizon_counts_from_the_first_arrival(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run(tmp_path, capsys, "--horizon", "1d")
    m = data["metrics"]
    assert m["duration_s"] == 86_400
    assert m["jobs_completed"] == 4
    assert m["jobs_unfinished"] == 0
    assert data["warnings"] == []
    # --window on the same clock: the second hour after the first arrival is empty
    m = _run(tmp_path, capsys, "--horizon", "1d", "--window", "1h-2h")["metrics"]
    assert m["gpu_allocation_in_window"] == 1.0  # j1 runs from 1 h to 2 h after j0 arrived


def test_a_horizon_before_most_arrivals_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run(tmp_path, capsys, "--horizon", "800s")
    m = data["metrics"]
    assert m["duration_s"] == 800
    assert m["jobs_unfinished"] == 4
    (warning,) = data["warnings"]
    assert warning.startswith("--horizon 800s ends the run 13.3 min after the first arrival")
    assert "3 of 4 jobs arrive after it" in warning
    # the run ended before the last arrival: the whole run is "while arriving"
    assert m["gpu_allocation_while_arriving"] == pytest.approx(m["gpu_allocation_ratio"])
    assert m["gpu_allocation_while_arriving"] == 1.0


def test_a_horizon_that_lets_most_jobs_arrive_is_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run(tmp_path, capsys, "--horizon", "3h")
    assert data["warnings"] == []
    assert data["metrics"]["jobs_unfinished"] == 1  # j3 arrives as the horizon ends
    assert data["metrics"]["gpu_allocation_while_arriving"] == 1.0


def test_compare_cuts_every_seed_its_horizon_after_that_seeds_first_arrival(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generator draws a new workload per seed, each with its own first arrival."""
    (tmp_path / "c.yaml").write_text(CLUSTER)
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    out = tmp_path / "cmp"
    argv = ["simulate", "compare", str(tmp_path / "c.yaml"), str(tmp_path / "w.yaml")]
    argv += ["--profiles", "fifo", "--seeds", "2", "--horizon", "12h", "--out", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["metrics"]["fifo"]["duration_s"]["values"] == [43_200.0, 43_200.0]
    assert summary["config"]["horizon_s"] == 43_200.0
    assert "first arrival" in summary["config"]["horizon_from"]
