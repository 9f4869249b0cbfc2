"""The capacity planner end to end: golden plan.json, infeasibility advice, the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main
from gpufleet.plan.planner import InfeasiblePlanError, plan
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

ROOT = Path(__file__).parents[2]
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUFLEET_UPDATE_GOLDEN") == "1"  # regenerate: GPUFLEET_UPDATE_GOLDEN=1


def _spec(data: dict[str, Any]) -> PlanSpec:
    return validate(PlanSpec, {"kind": "plan", **data}, "inline")


CHAT = {
    "name": "chat-8b",
    "deployment": "both",
    "accelerators": ["h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm4-80gb"],
    "workloads": [
        {
            "name": "chat",
            "kind": "inference",
            "model": "llama-3-8b",
            "serving": {
                "precision": "fp8",
                "engine": "vllm",
                "input_tokens": 1500,
                "output_tokens": 300,
                "request_rate": 50,
                "slo": {"ttft_p99_ms": 800, "tpot_p99_ms": 60},
            },
        }
    ],
}


@pytest.fixture(scope="module")
def chat_plan() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(plan(_spec(CHAT)).model_dump_json())
    return result


def test_plan_json_matches_the_golden_file(chat_plan: dict[str, Any]) -> None:
    golden = GOLDEN / "chat-8b.plan.json"
    text = json.dumps(chat_plan, indent=2, sort_keys=True) + "\n"
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_plan_has_the_stable_fields(chat_plan: dict[str, Any]) -> None:
    for key in ("recommendation", "alternatives", "design", "cloud", "cost", "assumptions"):
        assert key in chat_plan
    design = chat_plan["design"]
    for key in ("nodes", "racks", "power_kw", "fabric", "storage"):
        assert key in design
    assert {"leaf_switches", "spine_switches"} <= set(design["fabric"])
    cost = chat_plan["cost"]
    for key in (
        "on_demand",
        "reserved",
        "spot",
        "mix",
        "savings_vs_on_demand",
        "tco",
        "break_even_months",
    ):
        assert key in cost
    assert all(a["source"] for a in chat_plan["assumptions"])


def test_recommendation_is_the_cheapest_feasible_option(chat_plan: dict[str, Any]) -> None:
    """Cheapest in the figure the summary states for it: the plan each would give."""
    rec = chat_plan["recommendation"]
    rec_cost = chat_plan["summary"]["cost_usd"]
    for alt in chat_plan["alternatives"]:
        assert alt["plan_cost_usd"] is not None
        assert rec_cost <= alt["plan_cost_usd"]
    assert rec["why"]
    # a request rate is served within its SLO by the chosen configuration
    chat = rec["workloads"][0]
    assert chat["metrics"]["ttft_at_full_slots_ms"] <= 800
    assert chat["metrics"]["tpot_at_full_slots_ms"] <= 60
    assert chat["metrics"]["in_flight_per_replica"] < chat["parallelism"]["slots_per_replica"]


def test_infeasible_plan_says_what_would_make_it_feasible() -> None:
    spec = _spec(
        {
            "name": "impossible",
            "accelerators": ["h100-sxm5-80gb"],
            "workloads": [
                {
                    "name": "pretrain-70b",
                    "kind": "training",
                    "model": "llama-3-70b",
                    "training": {"seq_len": 8192, "global_batch": 1024, "tokens": "15T"},
                    "constraints": {"deadline": "1d", "max_gpus": 512},
                }
            ],
        }
    )
    with pytest.raises(InfeasiblePlanError) as info:
        plan(spec)
    advice = info.value.advice
    assert any("misses the deadline" in a for a in advice)
    assert any("extend the deadline" in a for a in advice)


def test_plan_command_writes_four_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpufleet.report.render import pdf_available

    out = tmp_path / "report"
    code = main(["plan", str(ROOT / "examples" / "plan-pretrain-8b.yaml"), "--out", str(out)])
    assert code == 0
    names = sorted(p.name for p in out.iterdir())
    expected = ["plan.html", "plan.json", "plan.md"] + (
        ["plan.pdf"] if pdf_available() is None else []
    )
    assert names == sorted(expected)
    stdout = capsys.readouterr().out
    assert "reports in" in stdout


def test_plan_command_infeasible_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "plan.yaml"
    spec.write_text(
        "kind: plan\naccelerators: [h100]\nworkloads:\n"
        "  - {name: big, kind: training, model: llama-3-70b,\n"
        "     training: {seq_len: 8192, global_batch: 1024, tokens: 15T},\n"
        "     constraints: {deadline: 1d, max_gpus: 64}}\n"
    )
    out = tmp_path / "out"
    assert main(["plan", str(spec), "--out", str(out)]) == 1
    assert not out.exists()
    assert "no feasible plan" in capsys.readouterr().out


def test_plan_command_bad_spec_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "plan.yaml"
    spec.write_text("kind: plan\nworkloads:\n  - {name: x, kind: trainng, model: llama-3-8b}\n")
    assert main(["plan", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "workloads[0]" in err
    assert not (tmp_path / "out").exists()


def test_a_service_without_an_engine_is_planned_on_vllm_and_says_so() -> None:
    """Plans defaulted to plain Hugging Face generation ('generic'), several times slower than
    what anyone deploys (issue 27)."""
    data = json.loads(json.dumps(CHAT))
    del data["workloads"][0]["serving"]["engine"]
    result = plan(_spec(data))
    assert result.recommendation.workloads[0].parallelism["engine"] == "vllm"
    assert any(a.name == "engine[chat]" and a.value == "vllm" for a in result.assumptions)
    data["workloads"][0]["serving"]["engine"] = "generic"  # asked for: kept
    generic = plan(_spec(data))
    assert generic.recommendation.workloads[0].parallelism["engine"] == "generic"
