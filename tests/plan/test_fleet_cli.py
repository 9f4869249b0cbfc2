"""`gpufleet plan` with a multi-team spec: the reports end to end, and bad input (exit 2,
one message, nothing written)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main

from .fleet_cases import ROOT, SACCT_SAMPLE, tiny, write_spec


def _small(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "horizon": "30h",
        "warmup": "4h",
        "arrival_sensitivity": 0,
        "compare_profiles": [],
    }
    return tiny(**{**base, **changes})


def test_a_multi_team_plan_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small()
    data["teams"].append(
        {
            "name": "research",
            "targets": {"wait_p95": "8h"},
            "priority": "opportunistic",
            "trace": {"path": "past.sacct", "format": "sacct"},
        }
    )
    shutil.copy(SACCT_SAMPLE, tmp_path / "past.sacct")  # the trace path is relative to the spec
    path = write_spec(tmp_path, data)
    out = tmp_path / "out"
    code = main(["plan", str(path), "--out", str(out), "--seeds", "2", "--workers", "1"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert {p.name for p in out.iterdir()} >= {"plan.json", "plan.md", "plan.html"}
    assert not list(out.glob("*.partial"))
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["kind"] == "multi-team-plan"
    assert [t["team"] for t in plan["teams"]] == ["alpha", "beta", "research"]
    assert plan["teams"][2]["trace"][0].startswith("past.sacct: read")
    assert plan["policies"] == []
    assert plan["sensitivity"] == []
    rec = plan["recommendation"]
    assert f"{rec['gpus']:,} × h100-sxm5-80gb" in printed
    assert "simulations (2 seeds, 1 worker)" in printed
    assert "## Recommended quotas" in (out / "plan.md").read_text(encoding="utf-8")


def test_the_multi_team_example_validates() -> None:
    assert main(["check", str(ROOT / "examples" / "plan-multi-team.yaml")]) == 0


BAD = [
    pytest.param(
        _small(teams=[{"name": "x"}]),
        [],
        "teams[0]: give workloads, a trace, or both",
        id="empty-team",
    ),
    pytest.param(_small(horizon="two weeks"), [], "horizon: expected a duration", id="horizon"),
    pytest.param(
        _small(profile="fast"), [], "profile: unknown scheduling profile 'fast'", id="profile"
    ),
    pytest.param(_small(), ["--seeds", "0"], "--seeds: must be at least 1, got 0", id="seeds-zero"),
    pytest.param(_small(), ["--workers", "0"], "--workers: must be at least 1", id="workers-zero"),
    pytest.param(
        {
            "kind": "plan",
            "workloads": [
                {
                    "name": "a",
                    "kind": "inference",
                    "model": "llama-3-8b",
                    "serving": {"input_tokens": 100, "output_tokens": 10},
                }
            ],
        },
        ["--seeds", "3"],
        "--seeds and --workers are for multi-team plans",
        id="seeds-on-a-workload-plan",
    ),
]


def _with_trace(path: str, fmt: str) -> dict[str, Any]:
    data = _small()
    data["teams"][1]["trace"] = {"path": path, "format": fmt}
    return data


BAD += [
    pytest.param(
        _with_trace("nowhere.sacct", "sacct"), [], "teams.beta.trace: ", id="missing-trace"
    ),
    pytest.param(
        _with_trace(str(SACCT_SAMPLE), "philly"),
        [],
        "teams.beta.trace: ",
        id="trace-of-another-format",
    ),
]


@pytest.mark.parametrize(("data", "args", "message"), BAD)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: dict[str, Any],
    args: list[str],
    message: str,
) -> None:
    path = write_spec(tmp_path, data)
    out = tmp_path / "out"
    code = main(["plan", str(path), "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert "error:" in err
    assert message in " ".join(err.split())
    assert "Traceback" not in err
    assert not out.exists()


def test_out_must_be_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec(tmp_path, _small())
    out = tmp_path / "taken"
    out.write_text("a file", encoding="utf-8")
    assert main(["plan", str(path), "--out", str(out)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "a file"


def test_yaml_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("kind: plan\nteams: [\n", encoding="utf-8")
    assert main(["plan", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "YAML syntax error" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
