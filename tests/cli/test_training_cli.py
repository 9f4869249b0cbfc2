"""`gpufleet estimate training` and `gpufleet search training` on the command line.

Exit codes: 0 when a configuration runs, 1 when it does not fit (or nothing does),
2 for bad input. JSON output keeps the stable fields documented on TrainingEstimate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main

EXAMPLE = Path(__file__).parents[2] / "examples" / "training-llama3-405b.yaml"

SPEC = """\
kind: training
model: {{preset: llama-3-8b}}
training: {{seq_len: 8192, global_batch: 512, tokens: 1T}}
hardware: {hardware}
"""
H100_64 = "{accelerator: h100-sxm5-80gb, count: 64}"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, hardware: str = H100_64, extra: str = "") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(hardware=hardware) + extra, encoding="utf-8")
    return path


def estimate_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run(["estimate", "training", str(path), "--format", "json"], capsys)
    assert err == ""
    return code, json.loads(out)


STABLE_FIELDS = {
    "tokens_per_s": float,
    "step_time_s": float,
    "tflops_per_gpu": float,
    "mfu": float,
    "hfu": float,
    "memory_capacity_bytes": int,
    "fits": bool,
    "train_time_days": float,
    "gpu_hours": float,
    "goodput_fraction": float,
    "wall_clock_days_with_failures": float,
    "gpu_hours_with_failures": float,
}
MEMORY_FIELDS = ("weights", "gradients", "optimizer", "activations", "other", "total")
COMM_FIELDS = ("tp", "pp", "dp", "cp", "ep", "exposed")
PARALLELISM_FIELDS = {
    "tp": int,
    "pp": int,
    "dp": int,
    "cp": int,
    "ep": int,
    "microbatch": int,
    "virtual_stages": int,
    "zero_stage": int,
    "recompute": str,
    "sequence_parallel": bool,
    "microbatches_per_step": int,
    "offload": str,
    "chosen_by": str,
}


def pinned(tmp_path: Path) -> Path:
    """The example with the knobs it leaves out pinned to the old defaults (microbatch 1, no
    interleaving, ZeRO 1, selective recomputation): a layout that does not fit."""
    text = EXAMPLE.read_text("utf-8").replace(
        "  sequence_parallel: true\n",
        "  sequence_parallel: true\n  microbatch: 1\n  virtual_stages: 1\n  zero_stage: 1\n"
        "  recompute: selective\n",
    )
    path = tmp_path / "pinned.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_fits_once_its_left_out_knobs_are_searched(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = estimate_json(EXAMPLE, capsys)
    assert code == 0
    assert data["fits"] is True
    assert data["parallelism"]["virtual_stages"] > 1


def test_published_llama3_405b_layout_does_not_fit_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = estimate_json(pinned(tmp_path), capsys)

    assert code == 1
    assert data["fits"] is False
    for name, kind in STABLE_FIELDS.items():
        assert isinstance(data[name], kind), name
    memory = data["memory_per_gpu_bytes"]
    assert set(memory) == set(MEMORY_FIELDS)
    assert all(isinstance(memory[k], int) and memory[k] >= 0 for k in MEMORY_FIELDS)
    parts = sum(memory[k] for k in MEMORY_FIELDS if k != "total")
    assert abs(memory["total"] - parts) <= 3  # each part rounded to whole bytes
    # the driver-reported size of an "80 GB" H100 (81,920 MiB, AWS DescribeInstanceTypes)
    assert memory["total"] > data["memory_capacity_bytes"] == 81_920 * 2**20
    assert set(data["comm_time_s"]) == set(COMM_FIELDS)
    assert all(isinstance(data["comm_time_s"][k], float) for k in COMM_FIELDS)
    par = data["parallelism"]
    assert set(par) == set(PARALLELISM_FIELDS)
    for name, kind in PARALLELISM_FIELDS.items():
        assert isinstance(par[name], kind), name
    assert (par["tp"], par["pp"], par["dp"], par["chosen_by"]) == (8, 16, 128, "spec")
    assert par["microbatches_per_step"] == 2048 // 128
    assert data["gpus"] == 16384
    assert 0 < data["mfu"] <= data["hfu"] < 1
    assert 0 < data["goodput_fraction"] < 1
    assert data["wall_clock_days_with_failures"] > data["train_time_days"]
    assert data["assumptions"]
    for item in data["assumptions"]:
        assert set(item) == {"name", "value", "source"}
        assert all(isinstance(v, str) and v for v in item.values())
    first = data["reasons"][0]
    assert first.startswith("does not fit: needs ")
    assert "; try " in first
    assert first.split("; try ", 1)[1].strip()


def test_table_output_says_it_does_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["estimate", "training", str(pinned(tmp_path))], capsys)
    assert code == 1
    assert err == ""
    assert "does not fit: needs" in out
    assert "16384 × h100-sxm5-80gb" in out


def test_a_spec_that_fits_exits_0_with_dp_derived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, extra="parallelism: {tp: 2}\n")

    code, data = estimate_json(spec, capsys)

    assert code == 0
    assert data["fits"] is True
    assert not any(r.startswith("does not fit") for r in data["reasons"])
    assert data["memory_per_gpu_bytes"]["total"] <= data["memory_capacity_bytes"]
    par = data["parallelism"]
    assert (par["tp"], par["pp"], par["dp"], par["cp"]) == (2, 1, 32, 1)  # as given
    # the knobs the spec left out were searched, not defaulted (issue 28)
    assert par["chosen_by"].startswith("spec; searched: microbatch")
    assert par["microbatches_per_step"] == 512 // 32 // par["microbatch"]
    assert data["gpus"] == 64


def test_without_parallelism_the_layout_is_chosen_by_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = estimate_json(write(tmp_path), capsys)

    assert code == 0
    assert data["fits"] is True
    par = data["parallelism"]
    assert "search" in par["chosen_by"]
    assert par["tp"] * par["pp"] * par["dp"] * par["cp"] == 64


def test_estimate_without_a_gpu_count_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, hardware="{accelerator: h100-sxm5-80gb}")

    code, out, err = run(["estimate", "training", str(spec), "--format", "json"], capsys)

    assert code == 2
    assert out == ""
    assert err.startswith("error: hardware.count: needed to estimate one configuration")
    assert err.strip() == (
        "error: hardware.count: needed to estimate one configuration; "
        "use `gpufleet search training` to choose the GPU count"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["estimate", "search"])
def test_unknown_format_is_bad_input(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([command, "training", str(EXAMPLE), "--format", "yaml"], capsys)
    assert code == 2
    assert out == ""
    assert err.strip() == "error: --format: 'yaml' is not one of table, json"


def test_search_json_top_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["search", "training", str(EXAMPLE), "--format", "json", "--top", "3"], capsys
    )

    assert code == 0
    assert err == ""
    data = json.loads(out)
    assert set(data) == {"candidates_evaluated", "rejected", "top", "pareto", "assumptions"}
    top = data["top"]
    assert 1 <= len(top) <= 3
    times = [c["train_time_s"] for c in top]
    assert times == sorted(times)
    for c in top:
        assert c["memory_bytes"] <= 81_920 * 2**20
        assert c["tp"] * c["pp"] * c["dp"] * c["cp"] == c["gpus"]
        assert c["train_time_s"] * c["tokens_per_s"] == pytest.approx(15.6e12)
    rejected = data["rejected"]
    assert rejected
    assert all(isinstance(n, int) and n >= 0 for n in rejected.values())
    assert rejected["does not fit in GPU memory"] > 0
    assert data["candidates_evaluated"] > 0
    assert data["pareto"]


def test_search_with_nothing_feasible_exits_1_in_json_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["search", "training", str(EXAMPLE), "--max-gpus", "8"]
    table_code, _, _ = run(argv, capsys)
    json_code, out, _ = run([*argv, "--format", "json"], capsys)
    assert json.loads(out)["top"] == []
    assert table_code == 1
    assert json_code == 1


def test_search_tries_the_users_own_gpu_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3,072 H100s: not a power of two, searched exactly, and the ceiling without --max-gpus;
    --max-gpus below it says the count was not searched."""
    spec = write(tmp_path, hardware="{accelerator: h100-sxm5-80gb, count: 3072}")
    code, out, _ = run(["search", "training", str(spec), "--format", "json", "--top", "50"], capsys)
    assert code == 0
    gpus = [c["gpus"] for c in json.loads(out)["top"]]
    assert gpus[0] == 3072
    assert max(gpus) == 3072
    code, out, _ = run(["search", "training", str(spec), "--max-gpus", "1000"], capsys)
    assert code == 0
    assert "hardware.count (3,072) above max_gpus (1,000), not searched" in " ".join(out.split())


@pytest.mark.parametrize("fmt", ["json", "markdown", "table"])
def test_validate_training_command_prints_every_row(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["validate", "training", "--format", fmt], capsys)
    assert code == 0
    assert "meg21-1.7b" in out
    assert "llama3-405b-8k-8192gpu" in out  # the hold-out rows too
    if fmt == "json":
        data = json.loads(out)
        assert data["summary"]["throughput_median_abs"] <= 0.10
        assert len(data["holdout"]) == 4


def test_validate_training_write_needs_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["validate", "training", "--write"], capsys)
    assert code == 2
    assert "--write needs --fit" in err


def test_validate_training_modern_rows_print_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["validate", "training", "--rows", "modern"], capsys)
    assert code == 0
    assert err == ""
    found = re.search(r"modern training rows: (\d+) compared, (\d+) skipped; median \|error\|", out)
    assert found is not None
    assert int(found[1]) + int(found[2]) == 157
    for title in ("By accelerator", "By source", "Worst rows", "Skipped rows by reason"):
        assert title in out
    assert "meg21-1.7b" not in out  # the calibration rows only with --rows calibration/all


def test_validate_training_rows_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["validate", "training", "--rows", "modern", "--format", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert len(data["rows"]) + len(data["skipped"]) == 157
    assert data["summary"]["validated"] == len(data["rows"])
    for row in data["rows"]:
        assert row["error"] == pytest.approx(row["predicted"] / row["published"] - 1)
    code, out, _ = run(["validate", "training", "--rows", "all", "--format", "json"], capsys)
    both = json.loads(out)
    assert set(both) == {"calibration", "modern"}
    assert len(both["calibration"]["rows"]) == 35


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rows", "newest"], "error: --rows: 'newest' is not one of calibration, modern, all"),
        (["--rows", "all", "--fit"], "error: --fit fits one row set"),
    ],
)
def test_validate_training_rows_bad_input(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["validate", "training", *argv], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith(message)
