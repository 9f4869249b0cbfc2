"""`gpufleet simulate --window FROM-TO`: allocation over a window the user names, checked
against a hand computation; bad windows exit 2 and run nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main

CLUSTER = {
    "kind": "cluster",
    "name": "w",
    "nodes": [{"name": "n", "count": 1, "accelerator": "h100-sxm5-80gb", "gpus_per_node": 8}],
}
# two jobs on an 8-GPU node: 8 GPUs for 1 h from t=0, then 4 GPUs for 1 h from t=2 h
JOBS = "name,team,submit_s,duration_s,gpus,workers,kind\n" + (
    "a,t,0,3600,8,1,training\nb,t,7200,3600,4,1,training\n"
)


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code, and stdout (the JSON) where it ran, else stderr (the message)."""
    (tmp_path / "c.yaml").write_text(json.dumps(CLUSTER))
    (tmp_path / "jobs.csv").write_text(JOBS)
    argv = ["simulate", "run", str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv")]
    argv += ["--trace-format", "gpufleet", "--format", "json", "--restart-overhead", "0"]
    code = main([*argv, *args])
    captured = capsys.readouterr()
    return code, captured.out if code == 0 else captured.err


def _metrics(out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(out)["metrics"]
    return data


def test_allocation_over_a_named_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys, "--window", "30min-150min")
    assert code == 0, out
    m = _metrics(out)
    # 30 min at 8 GPUs, 1 h at 0, 30 min at 4 GPUs over 2 h of 8 GPUs: (4 + 0 + 2) / 16
    assert abs(m["gpu_allocation_in_window"] - 6 / 16) < 1e-9
    assert m["window_from_s"] == 1800
    assert m["window_to_s"] == 9000
    # the whole run (3 h): (8 + 0 + 4) / 24 GPU-hours
    assert abs(m["gpu_allocation_ratio"] - 12 / 24) < 1e-9


def test_a_window_past_the_run_is_clipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(tmp_path, capsys, "--window", "2h-100h")
    assert code == 0, out
    m = _metrics(out)
    assert m["window_to_s"] == 10800  # the run ends at 3 h
    assert abs(m["gpu_allocation_in_window"] - 4 / 8) < 1e-9


def test_a_window_after_the_run_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window that starts after the run ended holds nothing: the user is told, in the
    JSON's warnings too, rather than reading a dash for a window from 30 h to 30 h."""
    code, out = _run(tmp_path, capsys, "--window", "30h-40h")
    assert code == 0, out
    data = json.loads(out)
    assert data["metrics"]["gpu_allocation_in_window"] is None
    late = [w for w in data["warnings"] if w.startswith("--window starts 30 h")]
    assert late
    assert "when the run (3 h) is over" in late[0]
    code, out = _run(tmp_path, capsys, "--window", "2h-100h")
    assert not [w for w in json.loads(out)["warnings"] if w.startswith("--window")]


def test_bad_windows_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("2h", "3h-1h", "x-2h"):
        code, out = _run(tmp_path, capsys, "--window", bad)
        assert code == 2, (bad, out)
        assert "--window" in out
    code, out = _run(tmp_path, capsys)
    assert "gpu_allocation_in_window" not in _metrics(out)
