"""`gpufleet wizard`: paths checked before the first question, defaults stated in the prompts,
and answers past a sane bound (a unit mistake) refused.

Each test here failed before its fix: a --spec under a file was refused only after the whole
interview, the deadline prompt said "a default" without saying which, and `tokens: 1e30`
planned "12,380,136,828,156,233,383,936 H100-days".
"""

from __future__ import annotations

import io
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from rich.console import Console

from gpufleet.cli.wizard import run_wizard, wizard
from gpufleet.errors import EXIT_USER_ERROR, UserError
from gpufleet.plan.assemble import DEFAULT_DEADLINE_S
from gpufleet.plan.planner import DEFAULT_ACCELERATORS
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec, TrainingWorkload

DOCS = Path(__file__).parents[2] / "docs" / "guide" / "wizard.md"
DEFAULT_DAYS = f"{DEFAULT_DEADLINE_S / 86_400:g} days"

app = typer.Typer(pretty_exceptions_enable=False)
app.command("wizard")(wizard)


@app.callback()
def _root() -> None:
    """A stand-in for the gpufleet app."""


def invoke(
    tmp_path: Path, answers: dict[str, Any], capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """`wizard --answers FILE ARGS` as gpufleet.cli.main.main runs it; (exit code, stderr)."""
    path = tmp_path / "answers.yaml"
    path.write_text(yaml.safe_dump(answers, sort_keys=False), encoding="utf-8")
    code: int
    try:
        app(args=["wizard", "--answers", str(path), *args], prog_name="gpufleet")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_USER_ERROR
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    return code, capsys.readouterr().err


TRAIN: dict[str, Any] = {
    "kind": "training",
    "model": "llama-3-8b",
    "tokens": "2T",
    "deployment": "cloud",
    "providers": "aws",
}
SERVE: dict[str, Any] = {
    "kind": "serving",
    "model": "llama-3-8b",
    "deployment": "cloud",
    "providers": "aws",
}
CUSTOM = {"model": "custom", "model_layers": 32, "model_hidden": 4096, "model_heads": 32}


# --- 1. an output path that cannot be written is refused before the first question ---


@pytest.mark.parametrize(
    ("spec", "out", "message"),
    [
        ("a-file/plan.yaml", None, "--spec {spec}: cannot write there ({tmp}/a-file is not a"),
        ("/proc/gpufleet-wizard/plan.yaml", None, "--spec {spec}: cannot write there"),
        ("plan.yaml", "a-file", "--out {out}: exists and is not a folder"),
        ("plan.yaml", "a-file/reports", "--out {out}: cannot write there"),
    ],
)
def test_an_unwritable_output_is_refused_before_the_first_question(
    tmp_path: Path, spec: str, out: str | None, message: str
) -> None:
    """No input at all: the old wizard asked `kind` first and ended with 'input ended'."""
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    spec_path = tmp_path / spec
    out_path = tmp_path / (out or "reports")
    screen = io.StringIO()
    console = Console(file=screen, width=200, color_system=None)
    with pytest.raises(UserError) as caught:
        run_wizard(
            None, out_path, spec_path, out is not None, console=console, stream=io.StringIO("")
        )
    text = str(caught.value)
    assert message.format(spec=spec_path, out=out_path, tmp=tmp_path) in text
    assert "with a path you can write (nothing was asked yet)" in text
    assert "[kind]" not in screen.getvalue()
    assert not spec_path.exists()


def test_an_out_under_a_file_is_refused_before_the_spec_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --run the reports go to --out: the old wizard wrote the spec and then failed in
    the planner. With --no-run nothing goes there, so it is not checked."""
    calls: list[Path] = []
    fake = types.ModuleType("gpufleet.cli.plan")
    fake.run_plan = lambda spec, out: calls.append(out) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpufleet.cli.plan", fake)
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    spec_path, out = tmp_path / "plan.yaml", tmp_path / "a-file" / "reports"
    code, err = invoke(tmp_path, TRAIN, capsys, "--spec", str(spec_path), "--out", str(out))
    assert code == EXIT_USER_ERROR, err
    assert f"--out {out}: cannot write there" in err
    assert "Traceback" not in err
    assert calls == []
    assert not spec_path.exists()
    code, err = invoke(
        tmp_path, TRAIN, capsys, "--spec", str(spec_path), "--out", str(out), "--no-run"
    )
    assert code == 0, err
    assert spec_path.exists()


# --- 2. each optional question says what blank means ---


def test_prompts_say_what_blank_means(tmp_path: Path) -> None:
    typed = [
        "training",
        "llama-3-8b",
        "1e30",  # tokens: refused (a unit mistake), asked again
        "2T",
        *[""] * 4,  # seq_len, global_batch, precision, deadline (blank: the planner's default)
        *[""] * 4,  # max_gpus, budget_usd, team, name
        "n",
        "cloud",
        "aws",
        "",  # regions: every aws region
        "",  # accelerators: the standard set
        "",  # plan_name
    ]
    screen = io.StringIO()
    console = Console(file=screen, width=400, color_system=None)
    spec_path = tmp_path / "plan.yaml"
    stream = io.StringIO("\n".join(typed) + "\n")
    assert run_wizard(None, tmp_path, spec_path, False, console=console, stream=stream) == 0
    assert stream.read() == ""
    shown = screen.getvalue()

    def prompt(key: str) -> str:
        found = re.findall(rf"^(.*\[{key}\].*)$", shown, flags=re.MULTILINE)
        assert found, key
        return str(found[-1])

    assert f"(blank: {DEFAULT_DAYS}, the planner's default)" in prompt("deadline")
    assert f"the planner assumes {DEFAULT_DAYS}" in shown
    assert re.search(r"\(blank: all \d+ aws regions in the catalog\)", prompt("regions"))
    standard = ", ".join(DEFAULT_ACCELERATORS)
    assert f"(blank: the planner's standard set: {standard})" in prompt("accelerators")
    assert "(blank: no limit)" in prompt("max_gpus")
    assert "1e30 is more than 1,000 trillion tokens" in shown
    (w,) = load(PlanSpec, spec_path).workloads
    assert isinstance(w, TrainingWorkload)
    assert w.constraints.deadline is None  # blank leaves it to the planner
    assert w.training.tokens == 2 * 10**12


def test_docs_state_the_defaults_of_blank_answers() -> None:
    rows = {
        m[1]: m[0] for m in re.finditer(r"^\| `(\w+)` \|.*$", DOCS.read_text("utf-8"), re.MULTILINE)
    }
    assert f"the planner assumes {DEFAULT_DAYS}" in rows["deadline"]
    assert "every region" in rows["regions"]
    for name in DEFAULT_ACCELERATORS:
        assert f"`{name}`" in rows["accelerators"], name


# --- 3. answers past a sane bound are a unit mistake, not a plan ---


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            {**TRAIN, "tokens": 1e30},
            "tokens: 1e+30 is more than 1,000 trillion tokens (1e15), far past the largest "
            "training runs (tens of trillions): check the unit (15T = 15 trillion",
        ),
        ({**TRAIN, "tokens": "1001T"}, "tokens: 1001T is more than 1,000 trillion tokens"),
        (
            {**TRAIN, **CUSTOM, "model_layers": 4096},
            "model_layers: 4,096 layers is more than 1,000; the deepest published models have "
            "about 130",
        ),
        (
            {**TRAIN, "model": {"preset": "llama-3-8b", "layers": 5000}},
            "model: 5,000 layers is more than 1,000",
        ),
        (
            {**SERVE, "input_tokens": 9000},
            "input_tokens: a prompt of 9,000 tokens exceeds the model's context (8,192)",
        ),
        (
            {**SERVE, "input_tokens": {"mean": 1000, "p99": 9000}},
            "input_tokens: a prompt of 9,000 tokens exceeds the model's context (8,192)",
        ),
        (
            {**SERVE, **CUSTOM, "input_tokens": "20000000"},
            "input_tokens: a prompt of 20,000,000 tokens exceeds 10,000,000 tokens, the longest "
            "context of any published model",
        ),
    ],
)
def test_absurd_sizes_are_refused_naming_the_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: dict[str, Any], message: str
) -> None:
    spec_path = tmp_path / "plan.yaml"
    code, err = invoke(tmp_path, answers, capsys, "--spec", str(spec_path), "--no-run")
    assert code == EXIT_USER_ERROR
    assert message in " ".join(err.split())
    assert "Traceback" not in err
    assert not spec_path.exists()


def test_the_bounds_themselves_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1,000T tokens, 1,000 layers and a 10M-token prompt on a model of no stated context
    are at the bounds, not past them; one more is refused."""
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({**TRAIN, "tokens": "1000T"}, {"tokens": "1000.1T"}),
        ({**TRAIN, **CUSTOM, "model_layers": 1000}, {"model_layers": 1001}),
        (
            {**SERVE, **CUSTOM, "input_tokens": 10_000_000 - 300},
            {"input_tokens": 10_000_000 - 299},
        ),
    ]
    for index, (good, bad) in enumerate(cases):
        spec_path = tmp_path / f"plan-{index}.yaml"
        code, err = invoke(tmp_path, good, capsys, "--spec", str(spec_path), "--no-run")
        assert code == 0, err
        spec_path.unlink()
        code, err = invoke(tmp_path, {**good, **bad}, capsys, "--spec", str(spec_path), "--no-run")
        assert code == EXIT_USER_ERROR, bad
        assert not spec_path.exists()
