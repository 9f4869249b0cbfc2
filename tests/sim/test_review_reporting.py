"""What a researcher reads beside a paper's figures: a trace `compare` ran once says why in
the files it writes, not only on the terminal; and the jobs a horizon left unfinished are
named where the JCT rows and the `--jobs-out` file leave them out.

Every number here was checked against an independent computation from the `--jobs-out`
rows and the trace (mean, numpy-linear percentiles, makespan, allocation, per team, per
kind and per size): they agreed; these are the gaps that were found beside them.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main

CLUSTER = {
    "kind": "cluster",
    "name": "w",
    "nodes": [{"name": "n", "count": 1, "accelerator": "h100-sxm5-80gb", "gpus_per_node": 8}],
}
# on one 8-GPU node, under fifo: x (4 GPUs, 1 min) ends; y (4 GPUs, 2 h) runs past a 1 h
# horizon; z (8 GPUs) waits behind y: 1 completed, 2 unfinished
JOBS = "name,team,submit_s,duration_s,gpus,workers,kind\n" + (
    "x,t,0,60,4,1,training\ny,t,0,7200,4,1,training\nz,t,10,60,8,1,training\n"
)


def _argv(tmp_path: Path) -> list[str]:
    (tmp_path / "c.yaml").write_text(json.dumps(CLUSTER))
    (tmp_path / "jobs.csv").write_text(JOBS)
    return [str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv"), "--trace-format", "gpufleet"]


def _words(text: str) -> str:
    """The terminal's text with its wrapping undone (captions wrap at the table's width)."""
    return " ".join(text.split())


def test_a_trace_run_once_says_why_in_compare_json_md_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--seeds 3` on a fixed trace ran each profile once; the terminal said so, but
    compare.json, .md and .html read "1 seed (seeds 0)" with no reason, and a reader of
    the report alone could take the missing interval for a missing seed."""
    out = tmp_path / "cmp"
    argv = ["simulate", "compare", "trace", "bundled:pollux-1", "--profiles", "fifo"]
    code = main([*argv, "--seeds", "3", "--format", "json", "--out", str(out)])
    assert code == 0
    capsys.readouterr()
    summary = json.loads((out / "compare.json").read_text("utf-8"))
    assert summary["seeds"] == [0]
    kind = summary["workload"]["kind"]
    assert "nothing random is simulated (no --gpu-mtbf-h)" in kind
    assert "ran once (--seeds 3 asked)" in kind
    for name in ("compare.md", "compare.html"):
        assert "ran once (--seeds 3 asked)" in (out / name).read_text("utf-8"), name


def test_a_trace_with_failures_says_nothing_of_running_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    argv = ["simulate", "compare", "trace", "bundled:pollux-1", "--profiles", "fifo"]
    code = main(
        [*argv, "--seeds", "2", "--gpu-mtbf-h", "5000", "--format", "json", "--out", str(out)]
    )
    assert code == 0
    capsys.readouterr()
    summary = json.loads((out / "compare.json").read_text("utf-8"))
    assert summary["seeds"] == [0, 1]
    assert summary["workload"]["kind"] == "trace: the same jobs for every seed"


def test_the_jct_rows_and_jobs_out_name_the_unfinished_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a horizon, the caption read "1 training, batch and interactive jobs" and the
    file line "wrote 1 jobs": nothing near the JCT mean or the file said that 2 of the 3
    jobs were left out of both (only the `Jobs unfinished` row, further down)."""
    path = tmp_path / "per-job.csv"
    argv = ["simulate", "run", *_argv(tmp_path), "--profile", "fifo", "--horizon", "1h"]
    assert main([*argv, "--restart-overhead", "0", "--jobs-out", str(path)]) == 0
    text = _words(capsys.readouterr().out)
    assert "wait, JCT, slowdown and per size: 1 training, batch and interactive jobs" in text
    assert "that completed; 2 jobs unfinished at the end (never started or still running)" in text
    assert "are in none of them" in text
    assert f"wrote 1 completed job to {path}; 2 unfinished at the end are not in it" in text
    with path.open(encoding="utf-8") as stream:
        assert [r["name"] for r in csv.DictReader(stream)] == ["x"]


def test_nothing_unfinished_adds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "per-job.csv"
    argv = ["simulate", "run", *_argv(tmp_path), "--profile", "fifo", "--restart-overhead", "0"]
    assert main([*argv, "--jobs-out", str(path)]) == 0
    text = _words(capsys.readouterr().out)
    assert "3 training, batch and interactive jobs that completed" in text
    assert "unfinished at the end" not in text
    assert f"wrote 3 completed jobs to {path}" in text


def test_compare_jobs_out_counts_the_unfinished_of_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "per-job.csv"
    argv = ["simulate", "compare", *_argv(tmp_path), "--profiles", "fifo,default"]
    argv += ["--horizon", "1h", "--restart-overhead", "0", "--out", str(tmp_path / "cmp")]
    assert main([*argv, "--jobs-out", str(path)]) == 0
    text = _words(capsys.readouterr().out)
    assert f"wrote 2 completed jobs of 2 runs to {path}; 4 unfinished at the end" in text


def test_percentiles_are_numpy_linear_and_slowdown_is_not_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's worked figures: the percentiles interpolate linearly between ranks (the
    nearest rank would read the p50 of 3 JCTs as one of them too, but p95 as the largest),
    and a 1-s job that waits 3,599 s has slowdown 3,600, which the mean carries; bounded
    slowdown (τ = 10 s) is computed from the `--jobs-out` rows."""
    (tmp_path / "c.yaml").write_text(json.dumps(CLUSTER))
    (tmp_path / "jobs.csv").write_text(
        "name,team,submit_s,duration_s,gpus,workers,kind\n"
        "a,t,1000000,3600,8,1,training\nb,t,1000001,1,1,1,training\n"
        "c,u,1000002,60,4,1,batch\n"
    )
    path = tmp_path / "per-job.csv"
    argv = ["simulate", "run", str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv")]
    argv += ["--trace-format", "gpufleet", "--profile", "fifo", "--restart-overhead", "0"]
    assert main([*argv, "--format", "json", "--jobs-out", str(path)]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    # JCTs 3600, 3600, 3658: linear p95 = 3600 + 0.9 * 58
    assert m["jct_s"]["p95"] == pytest.approx(3652.2)
    assert m["slowdown"]["mean"] == pytest.approx((1 + 3600 + 3658 / 60) / 3)
    assert round(m["slowdown"]["mean"]) == 1221
    with path.open(encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    bounded = [max(1.0, float(r["jct_s"]) / max(float(r["duration_s"]), 10.0)) for r in rows]
    assert sum(bounded) / len(bounded) == pytest.approx(140.66, abs=0.01)
