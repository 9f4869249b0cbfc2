"""`gpufleet wizard`: answers files, the interactive interview, bad answers, overwriting.

The command runs through a tiny Typer app that registers `wizard` and reports user errors
the way `gpufleet.cli.main.main` does (message on stderr, exit 2). Every run passes
`--no-run` unless it is about running the planner, so these tests do not depend on it.
"""

from __future__ import annotations

import io
import math
import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
import yaml
from rich.console import Console

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.models import get_model_preset
from gpufleet.cli.wizard import PLAN_KEYS, WORKLOAD_KEYS, run_wizard, wizard, write_atomic
from gpufleet.cli.wizard.explain import hbm_note, model_note
from gpufleet.errors import EXIT_USER_ERROR, UserError
from gpufleet.estimate.inference import (
    ENGINE_RESERVE_BYTES,
    kv_bytes_per_token,
    weight_bytes_per_gpu,
)
from gpufleet.specs.inference import TokenLength
from gpufleet.specs.load import load
from gpufleet.specs.plan import InferenceWorkload, PlanSpec, TrainingWorkload

DOCS = Path(__file__).parents[2] / "docs" / "guide" / "wizard.md"

app = typer.Typer(pretty_exceptions_enable=False)
app.command("wizard")(wizard)


@app.callback()
def _root() -> None:
    """A stand-in for the gpufleet app."""


def invoke(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `wizard ARGS` as gpufleet.cli.main.main would: user errors exit 2."""
    code: int
    try:
        app(args=["wizard", *args], prog_name="gpufleet", standalone_mode=True)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_USER_ERROR
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


def write_answers(tmp_path: Path, answers: dict[str, Any], name: str = "answers.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(answers, sort_keys=False), encoding="utf-8")
    return path


def answer(
    tmp_path: Path,
    answers: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    *extra: str,
) -> tuple[int, str, str, Path]:
    spec = tmp_path / "plan.yaml"
    path = write_answers(tmp_path, answers)
    code, out, err = invoke(
        ["--answers", str(path), "--spec", str(spec), "--no-run", *extra], capsys
    )
    return code, out, err, spec


# (a) a 70B pretraining run; seq_len, team and the on-prem prices are left to suggestions.
PRETRAIN_70B: dict[str, Any] = {
    "kind": "training",
    "model": "meta-llama/Meta-Llama-3-70B",
    "tokens": "15T",
    "global_batch": 1024,
    "precision": "bf16",
    "deadline": "90d",
    "max_gpus": 4096,
    "budget_usd": "$60M",
    "name": "pretrain-70b",
    "deployment": "both",
    "providers": ["aws", "gcp"],
    "regions": "us-east-1, us-central1",
    "expected_utilization": "70%",
    "accelerators": ["h100", "h200"],
    "plan_name": "frontier",
}
# The same answers typed at the prompts, in the order the wizard asks; "15X" is re-asked.
PRETRAIN_70B_TYPED = [
    "training",  # kind
    "meta-llama/Meta-Llama-3-70B",  # model
    "15X",  # tokens: a bad answer, asked again
    "15T",
    "",  # seq_len: the suggestion (8192)
    "1024",  # global_batch
    "bf16",  # precision
    "90d",  # deadline
    "4096",  # max_gpus
    "$60M",  # budget_usd
    "",  # team: none
    "pretrain-70b",  # name
    "n",  # another workload?
    "both",  # deployment
    "aws, gcp",  # providers
    "us-east-1, us-central1",  # regions
    "70%",  # expected_utilization
    "",  # rack_power_kw
    "",  # electricity_usd_per_kwh
    "h100 h200",  # accelerators
    "frontier",  # plan_name
]

# (b) a chat service in the cloud.
CHAT: dict[str, Any] = {
    "kind": "serving",
    "model": "llama-3-8b",
    "request_rate": 50,
    "input_tokens": 1500,
    "output_tokens": 300,
    "precision": "FP8",
    "ttft_p99_ms": 800,
    "tpot_p99_ms": 60,
    "max_gpus": 64,
    "name": "chat",
    "deployment": "cloud",
    "providers": "aws",
}

# (c) both kinds, two teams.
TWO_TEAMS: dict[str, Any] = {
    "deployment": "on-prem",
    "expected_utilization": 0.8,
    "rack_power_kw": 60,
    "plan_name": "shared",
    "workloads": [
        {
            "kind": "training",
            "team": "research",
            "name": "pretrain-8b",
            "model": "llama-3-8b",
            "tokens": "2T",
            "deadline": "30d",
        },
        {
            "kind": "inference",
            "team": "product",
            "name": "chat-70b",
            "model": "Llama-3-70B",
            "request_rate": 20,
            "input_tokens": {"mean": 1024, "p99": 3000},
            "output_tokens": 256,
            "precision": "fp8",
            "tpot_p99_ms": "none",
        },
    ],
}


def test_pretraining_70b(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, spec_path = answer(tmp_path, PRETRAIN_70B, capsys)
    assert code == 0, err
    assert f"wrote {spec_path}" in out
    spec = load(PlanSpec, spec_path)
    assert spec.name == "frontier"
    assert spec.deployment == "both"
    assert spec.providers == ["aws", "gcp"]
    assert spec.regions == ["us-east-1", "us-central1"]
    assert spec.expected_utilization == pytest.approx(0.7)
    assert spec.accelerators == ["h100-sxm5-80gb", "h200-sxm-141gb"]
    (w,) = spec.workloads
    assert isinstance(w, TrainingWorkload)
    assert w.name == "pretrain-70b"
    assert w.team is None
    assert w.model == get_model_preset("llama-3-70b").arch()
    assert w.training.tokens == 15 * 10**12
    assert w.training.seq_len == 8192  # the suggestion: the model's context
    assert w.training.global_batch == 1024
    assert w.training.precision == "bf16"
    assert w.constraints.deadline == 90 * 86_400
    assert w.constraints.max_gpus == 4096
    assert w.constraints.budget_usd == 60e6
    # The file keeps quantities as written and names canonical.
    raw = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    assert raw["workloads"][0]["model"] == {"preset": "llama-3-70b"}
    assert raw["workloads"][0]["training"]["tokens"] == "15T"
    assert raw["workloads"][0]["constraints"]["deadline"] == "90d"
    assert not list(tmp_path.glob("*.partial"))


def test_chat_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err, spec_path = answer(tmp_path, CHAT, capsys)
    assert code == 0, err
    spec = load(PlanSpec, spec_path)
    assert spec.deployment == "cloud"
    assert spec.providers == ["aws"]
    assert spec.name == "chat"  # one workload: the plan takes its name
    (w,) = spec.workloads
    assert isinstance(w, InferenceWorkload)
    assert w.model.name == "llama-3-8b"
    assert w.serving.request_rate == 50
    assert w.serving.input_tokens == 1500
    assert w.serving.output_tokens == 300
    assert w.serving.precision == "fp8"
    assert w.serving.slo.ttft_p99_ms == 800
    assert w.serving.slo.tpot_p99_ms == 60
    assert w.constraints.max_gpus == 64
    raw = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    assert "expected_utilization" not in raw  # asked only for on-prem or both
    assert "on_prem" not in raw


def test_two_teams_training_and_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, spec_path = answer(tmp_path, TWO_TEAMS, capsys)
    assert code == 0, err
    assert "2 workloads" in out
    spec = load(PlanSpec, spec_path)
    assert spec.name == "shared"
    assert spec.deployment == "on-prem"
    assert spec.expected_utilization == pytest.approx(0.8)
    assert spec.on_prem.rack_power_kw == 60
    assert spec.on_prem.electricity_usd_per_kwh == pytest.approx(0.10)
    train, serve = spec.workloads
    assert isinstance(train, TrainingWorkload)
    assert isinstance(serve, InferenceWorkload)
    assert (train.name, train.team) == ("pretrain-8b", "research")
    assert (serve.name, serve.team) == ("chat-70b", "product")
    assert train.training.tokens == 2 * 10**12
    assert train.training.global_batch == 512  # 4,194,304 tokens ÷ 8192
    assert train.constraints.deadline == 30 * 86_400
    assert serve.model.name == "llama-3-70b"
    assert serve.serving.input_tokens == TokenLength(mean=1024, p99=3000)
    assert serve.serving.slo.ttft_p99_ms == 800  # the suggestion
    assert serve.serving.slo.tpot_p99_ms is None  # answered none


def test_interactive_interview_writes_the_same_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answered = tmp_path / "answered"
    answered.mkdir()
    code, _, err, from_file = answer(answered, PRETRAIN_70B, capsys)
    assert code == 0, err
    typed = tmp_path / "typed.yaml"
    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None)
    stream = io.StringIO("\n".join(PRETRAIN_70B_TYPED) + "\n")
    code = run_wizard(None, tmp_path / "out", typed, False, console=console, stream=stream)
    assert code == 0
    assert stream.read() == ""  # every line was a question's answer
    assert yaml.safe_load(typed.read_text(encoding="utf-8")) == yaml.safe_load(
        from_file.read_text(encoding="utf-8")
    )
    shown = screen.getvalue()
    assert "unknown count suffix 'X' in '15X'" in shown  # the bad answer, then asked again
    assert "[tokens]" in shown  # each prompt names its key
    assert "llama-3-70b: 70.6 B parameters" in shown  # from parameter_count
    assert "16 bytes per parameter" in shown
    assert "H100-days" in shown
    assert "4,194,304 ÷ 8,192 = 512" in shown  # the global-batch suggestion explained


def test_interactive_serving_explains_hbm(tmp_path: Path) -> None:
    typed = [
        "serving",
        "llama-3-70b",
        "",  # request_rate
        "",  # input_tokens
        "",  # output_tokens
        "fp8",
        "",  # engine: vllm
        "",  # ttft
        "none",  # tpot: no target
        "",  # max_gpus
        "product",  # team
        "",  # name: serve-llama-3-70b
        "n",
        "cloud",
        "",  # providers
        "",  # regions
        "",  # accelerators
        "",  # plan_name
    ]
    screen = io.StringIO()
    console = Console(file=screen, width=200, color_system=None)
    spec_path = tmp_path / "chat.yaml"
    stream = io.StringIO("\n".join(typed) + "\n")
    assert run_wizard(None, tmp_path, spec_path, False, console=console, stream=stream) == 0
    spec = load(PlanSpec, spec_path)
    (w,) = spec.workloads
    assert isinstance(w, InferenceWorkload)
    assert w.name == "serve-llama-3-70b"
    assert w.serving.slo.tpot_p99_ms is None
    assert w.serving.slo.ttft_p99_ms == 800
    assert w.serving.engine == "vllm"  # asked, and a production engine by default
    # KV bytes per token and requests that fit after fp8 weights, from the estimators.
    arch = get_model_preset("llama-3-70b").arch()
    shown = " ".join(screen.getvalue().split())
    assert f"{kv_bytes_per_token(arch, 'bf16') / 1024:,.0f} KiB of KV cache in bf16" in shown
    weights = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    per_request = kv_bytes_per_token(arch, "fp8") * 4096
    for name in ("h100-sxm5-80gb", "h200-sxm-141gb"):
        device = get_accelerator(name)
        fits = math.floor((device.memory_bytes - ENGINE_RESERVE_BYTES - weights) / per_request)
        assert f"{device.display_name} " in shown
        assert f"one GPU holds about {fits:,} concurrent 4,096-token requests" in shown
    assert "fp8 halves weight and KV-cache memory" in shown


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tokens", "15X", "unknown count suffix 'X' in '15X'"),
        ("seq_len", -4, "must be greater than 0"),
        ("global_batch", "many", "expected a whole number, got 'many'"),
        ("deadline", "soon", "expected a duration such as 90d"),
        ("precision", "fp4", "must be one of 'bf16' or 'fp8'"),
        ("budget_usd", "lots", "expected an amount in USD"),
        ("model", "lama-3-70b", "did you mean 'llama-3-70b'?"),
        ("model", "70B", "'70B' is a size, not a model; presets near 70B parameters"),
        ("kind", "evaluation", "answer training or serving"),
        ("expected_utilization", 70, "write 0.7 or 70%"),
        ("regions", "us-easst-1", "did you mean 'us-east-1'"),
        ("accelerators", "h1000", "unknown accelerator 'h1000'"),
        ("providers", "oracle", "must be one of 'aws', 'gcp' or 'azure'"),
    ],
)
def test_bad_answer_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: object, message: str
) -> None:
    code, _, err, spec_path = answer(tmp_path, {**PRETRAIN_70B, key: value}, capsys)
    assert code == EXIT_USER_ERROR
    assert f"answers.yaml: {key}: " in err
    assert message in err
    assert "Traceback" not in err
    assert not spec_path.exists()


def test_bad_answer_in_a_workload_entry_names_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = yaml.safe_load(yaml.safe_dump(TWO_TEAMS))
    answers["workloads"][1]["ttft_p99_ms"] = -5
    code, _, err, _ = answer(tmp_path, answers, capsys)
    assert code == EXIT_USER_ERROR
    assert "workloads[1].ttft_p99_ms: must be greater than 0" in err


def test_serving_lengths_must_fit_the_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, _ = answer(tmp_path, {**CHAT, "input_tokens": 8000}, capsys)
    assert code == EXIT_USER_ERROR
    assert "output_tokens: input + output tokens (8,300) exceed the model's context (8,192)" in err


def test_fp8_training_refuses_accelerators_without_fp8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = {**PRETRAIN_70B, "precision": "fp8", "accelerators": "h100, a100-sxm4-80gb"}
    code, _, err, _ = answer(tmp_path, answers, capsys)
    assert code == EXIT_USER_ERROR
    assert "accelerators: a100-sxm4-80gb has no fp8 units" in err


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({**PRETRAIN_70B, "tokns": "1T"}, "tokns: unknown question key; did you mean 'tokens'?"),
        (
            {**PRETRAIN_70B, "deploymnt": "cloud"},
            "deploymnt: unknown question key; did you mean 'deployment'?",
        ),
        (
            {**TWO_TEAMS, "workloads": [{**TWO_TEAMS["workloads"][0], "deadlin": "3d"}]},
            "workloads[0].deadlin: unknown question key; did you mean 'deadline'?",
        ),
    ],
)
def test_unknown_key_gets_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: dict[str, Any], message: str
) -> None:
    code, _, err, spec_path = answer(tmp_path, answers, capsys)
    assert code == EXIT_USER_ERROR
    assert message in err
    assert not spec_path.exists()


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            {**CHAT, "tokens": "1T"},
            "tokens: not used with these answers: it is asked only for training workloads",
        ),
        (
            {**CHAT, "expected_utilization": 0.5},
            "expected_utilization: not used with these answers: it is asked only when "
            "deployment is on-prem or both",
        ),
        ({**TWO_TEAMS, "tokens": "1T"}, "tokens: a workload question"),
        (
            {**TWO_TEAMS, "workloads": [{**TWO_TEAMS["workloads"][0], "deployment": "cloud"}]},
            "workloads[0].deployment: a plan question; put it at the top level",
        ),
        ({"deployment": "cloud"}, "kind: missing"),
    ],
)
def test_answers_that_would_be_ignored_are_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: dict[str, Any], message: str
) -> None:
    code, _, err, _ = answer(tmp_path, answers, capsys)
    assert code == EXIT_USER_ERROR
    assert message in err


def test_existing_spec_is_not_overwritten_without_consent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = tmp_path / "plan.yaml"
    spec_path.write_text("# mine\n", encoding="utf-8")
    code, _, err, _ = answer(tmp_path, PRETRAIN_70B, capsys)
    assert code == EXIT_USER_ERROR
    assert "already exists and was left unchanged" in err
    assert "overwrite: true" in err
    assert spec_path.read_text(encoding="utf-8") == "# mine\n"
    assert not list(tmp_path.glob("*.partial"))

    code, _, err, _ = answer(tmp_path, {**PRETRAIN_70B, "overwrite": True}, capsys)
    assert code == 0, err
    assert load(PlanSpec, spec_path).name == "frontier"


def test_interactive_overwrite_declined(tmp_path: Path) -> None:
    spec_path = tmp_path / "plan.yaml"
    spec_path.write_text("# mine\n", encoding="utf-8")
    console = Console(file=io.StringIO(), width=120)
    with pytest.raises(UserError, match="left unchanged"):
        run_wizard(None, tmp_path, spec_path, False, console=console, stream=io.StringIO("n\n"))
    assert spec_path.read_text(encoding="utf-8") == "# mine\n"


def test_input_that_ends_early_writes_nothing(tmp_path: Path) -> None:
    spec_path = tmp_path / "plan.yaml"
    console = Console(file=io.StringIO(), width=120)
    stream = io.StringIO("training\nllama-3-8b\n")
    with pytest.raises(UserError, match="input ended at question 'tokens'; nothing was written"):
        run_wizard(None, tmp_path, spec_path, False, console=console, stream=stream)
    assert not spec_path.exists()


def test_custom_model_and_model_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    custom = {
        "kind": "training",
        "model": "custom",
        "model_layers": 32,
        "model_hidden": 4096,
        "model_heads": 32,
        "model_kv_heads": 8,
        "model_ffn_hidden": 14336,
        "model_max_seq_len": 8192,
        "model_vocab": 128256,
        "tokens": "1T",
        "deployment": "cloud",
    }
    code, _, err, spec_path = answer(tmp_path, custom, capsys)
    assert code == 0, err
    (w,) = load(PlanSpec, spec_path).workloads
    llama = get_model_preset("llama-3-8b").arch()
    assert w.model.model_dump(exclude={"name"}) == llama.model_dump(exclude={"name"})

    mapping = {**CHAT, "model": {"preset": "llama-3-8b", "layers": 40}, "overwrite": True}
    code, _, err, spec_path = answer(tmp_path, mapping, capsys)
    assert code == 0, err
    (w,) = load(PlanSpec, spec_path).workloads
    assert w.model.layers == 40

    bad = {**custom, "model_kv_heads": 6, "overwrite": True}
    code, _, err, _ = answer(tmp_path, bad, capsys)
    assert code == EXIT_USER_ERROR
    assert "model_kv_heads: heads (32) must be a multiple of kv_heads (6)" in err


def test_run_calls_the_planner_and_returns_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Path, Path]] = []

    def run_plan(spec_path: Path, out_dir: Path) -> int:
        calls.append((spec_path, out_dir))
        return 1

    fake = types.ModuleType("gpufleet.cli.plan")
    fake.run_plan = run_plan  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpufleet.cli.plan", fake)
    spec_path, out_dir = tmp_path / "plan.yaml", tmp_path / "reports"
    path = write_answers(tmp_path, CHAT)
    code, _, err = invoke(
        ["--answers", str(path), "--spec", str(spec_path), "--out", str(out_dir)], capsys
    )
    assert code == 1, err
    assert calls == [(spec_path, out_dir)]
    assert spec_path.exists()


def test_run_without_the_planner_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gpufleet.cli.plan", None)  # import fails
    spec_path = tmp_path / "plan.yaml"
    path = write_answers(tmp_path, CHAT)
    code, _, err = invoke(["--answers", str(path), "--spec", str(spec_path)], capsys)
    assert code == EXIT_USER_ERROR
    assert "the planner cannot run" in err
    assert "--no-run" in err
    assert spec_path.exists()  # the answers are not lost


def test_write_atomic_replaces_a_stale_partial(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "plan.yaml"
    target.parent.mkdir()
    (target.parent / "plan.yaml.partial").write_text("stale", encoding="utf-8")
    write_atomic(target, "kind: plan\n", overwrite=False)
    assert target.read_text(encoding="utf-8") == "kind: plan\n"
    assert not (target.parent / "plan.yaml.partial").exists()
    with pytest.raises(UserError, match="already exists"):
        write_atomic(target, "other\n", overwrite=False)
    assert target.read_text(encoding="utf-8") == "kind: plan\n"


def test_docs_list_every_key_and_their_examples_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DOCS.read_text(encoding="utf-8")
    for key in [*PLAN_KEYS, *WORKLOAD_KEYS, "workloads"]:
        assert f"`{key}`" in text, key
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    examples = [yaml.safe_load(b) for b in blocks if not b.startswith("kind: plan")]
    assert len(examples) >= 2
    for index, example in enumerate(examples):
        spec_path = tmp_path / f"plan-{index}.yaml"
        path = write_answers(tmp_path, example, f"answers-{index}.yaml")
        code, _, err = invoke(
            ["--answers", str(path), "--spec", str(spec_path), "--no-run"], capsys
        )
        assert code == 0, err
        load(PlanSpec, spec_path)


def test_interactive_custom_model(tmp_path: Path) -> None:
    typed = [
        "train",  # kind (an alias)
        "70B",  # a size: the wizard lists presets near it and asks again
        "custom",
        "32",  # model_layers
        "4096",  # model_hidden
        "33",  # model_heads: does not divide hidden, asked again
        "32",
        "8",  # model_kv_heads
        "",  # model_ffn_type: swiglu
        "14336",  # model_ffn_hidden
        "",  # model_vocab: 128256
        "8192",  # model_max_seq_len
        "1T",  # tokens
        *[""] * 8,  # seq_len, global_batch, precision, deadline, max_gpus, budget, team, name
        "n",
        "cloud",
        *[""] * 4,  # providers, regions, accelerators, plan_name
    ]
    screen = io.StringIO()
    console = Console(file=screen, width=200, color_system=None)
    spec_path = tmp_path / "plan.yaml"
    stream = io.StringIO("\n".join(typed) + "\n")
    assert run_wizard(None, tmp_path, spec_path, False, console=console, stream=stream) == 0
    assert stream.read() == ""
    (w,) = load(PlanSpec, spec_path).workloads
    assert w.name == "train-custom"
    llama = get_model_preset("llama-3-8b").arch()
    assert w.model.model_dump(exclude={"name"}) == llama.model_dump(exclude={"name"})
    shown = screen.getvalue()
    assert "'70B' is a size, not a model; presets near 70B parameters: llama-3-70b" in shown
    assert "hidden (4096) must be a multiple of heads (33)" in shown


def test_the_model_note_and_the_memory_note_give_one_fp8_weight_figure() -> None:
    """Issue 27: the wizard said 70.6 GB of fp8 weights in one note and 72.7 GB in the next
    (one counted the embeddings at one byte, the other as served, at 16 bits)."""
    arch = get_model_preset("llama-3-70b").arch()
    weights = re.search(r"([\d.,]+ GB) in fp8", model_note(arch))
    assert weights is not None
    assert f"After {weights[1]} of fp8 weights" in hbm_note(arch, 4_000)


def test_a_spec_path_under_a_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    path = write_answers(tmp_path, CHAT)
    spec = blocker / "plan.yaml"
    code, _, err = invoke(["--answers", str(path), "--spec", str(spec), "--no-run"], capsys)
    assert code == EXIT_USER_ERROR
    assert f"--spec {spec}: cannot write there ({blocker} is not a folder)" in err
    assert "Traceback" not in err


def test_an_answers_file_may_name_the_serving_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wizard asks for the engine and the guide lists `engine` as an answer, but the
    answers file refused it as an unknown key."""
    code, _, err, spec_path = answer(tmp_path, {**CHAT, "engine": "tensorrt-llm"}, capsys)
    assert code == 0, err
    (w,) = load(PlanSpec, spec_path).workloads
    assert isinstance(w, InferenceWorkload)
    assert w.serving.engine == "tensorrt-llm"
