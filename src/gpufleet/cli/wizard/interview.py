"""The interview, the spec file and the planner: `gpufleet wizard` from start to finish.

Nothing is written until every question is answered and the whole plan validates,
and then atomically, so an interrupted or refused interview never leaves a
half-written or clobbered spec behind. The planner is imported only when it runs:
the spec is the wizard's product, and it is kept even when planning cannot start.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TextIO, cast

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from gpufleet.cli.wizard.askers import Asker, Interactive, Scripted, check_keys
from gpufleet.cli.wizard.plan_questions import plan_questions
from gpufleet.cli.wizard.questions import ask_workload
from gpufleet.errors import UserError, os_reason
from gpufleet.outputs import check_writable
from gpufleet.specs.load import read_yaml, validate
from gpufleet.specs.plan import PlanSpec


def check_outputs(spec_out: Path, out: Path, run: bool) -> None:
    """Before any question: refuse a --spec file (and, with --run, an --out folder) that could
    not be written at the end, so a bad path costs no answers. --spec's folder must be or
    become a folder that can be written; --out follows `gpufleet plan --out`'s rules
    (`outputs.check_writable`, as `simulate --out`). Without --run nothing goes to --out."""
    if spec_out.is_dir():
        raise UserError(f"--spec {spec_out}: is a directory; give a file path such as plan.yaml")
    checks = [("--spec", spec_out, False), *([("--out", out, True)] if run else [])]
    for option, path, folder in checks:
        try:
            check_writable(path, option, folder=folder)
        except UserError as exc:
            raise UserError(
                f"{exc}; pass {option} with a path you can write (nothing was asked yet)"
            ) from None


def _confirm_overwrite(asker: Asker, spec_out: Path, scripted: bool) -> bool:
    """Before any question: an existing spec is replaced only when the user says so."""
    if isinstance(asker, Scripted):
        asker.mark_used("overwrite")
    if not spec_out.exists():
        return False
    if asker.confirm("overwrite", f"{spec_out} exists. Replace it", default=False):
        return True
    how = "add `overwrite: true` to the answers file" if scripted else "answer yes"
    raise UserError(
        f"{spec_out} already exists and was left unchanged; {how} to replace it, "
        "or pass --spec PATH to write elsewhere"
    )


def _interview(asker: Asker, spec_out: Path, scripted: bool) -> tuple[dict[str, Any], bool]:
    overwrite = _confirm_overwrite(asker, spec_out, scripted)
    workloads: list[dict[str, Any]] = []
    for index, w in enumerate(asker.workloads()):
        workloads.append(ask_workload(w, index, [x["name"] for x in workloads]))
    plan = plan_questions(asker, workloads)
    asker.finish()
    return plan, overwrite


HEADER = (
    "# Written by `gpufleet wizard`. Edit freely; `gpufleet check {spec}` validates it and\n"
    "# `gpufleet plan {spec} --out DIR` plans it. Fields: docs/guide/specs.md.\n"
)


def render_spec(plan: Mapping[str, Any], spec_out: Path) -> str:
    body = yaml.safe_dump(
        dict(plan), sort_keys=False, default_flow_style=None, allow_unicode=True, width=100
    )
    return HEADER.format(spec=spec_out) + body


def write_atomic(path: Path, text: str, *, overwrite: bool) -> None:
    """Write `path.partial`, then rename it into place: never a half-written spec.

    Without `overwrite` the rename is a hard link, which fails if `path` appeared meanwhile.
    """
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot create its folder ({os_reason(exc)})") from None
    try:
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            partial.replace(path)
            return
        try:
            path.hardlink_to(partial)
        except FileExistsError:
            raise UserError(f"{path} already exists and was left unchanged") from None
        except OSError:  # a filesystem without hard links
            if path.exists():
                raise UserError(f"{path} already exists and was left unchanged") from None
            partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


RunPlan = Callable[[Path, Path], int]


def _run_plan_function(spec_out: Path, out: Path) -> RunPlan:
    """`gpufleet.cli.plan.run_plan`, imported only when the plan is run."""
    problem = ""
    try:
        module = importlib.import_module("gpufleet.cli.plan")
    except ImportError as exc:
        problem = f"cannot import gpufleet.cli.plan ({exc})"
    else:
        function = getattr(module, "run_plan", None)
        if callable(function):
            return cast(RunPlan, function)
        problem = "gpufleet.cli.plan has no run_plan function"
    raise UserError(
        f"wrote {spec_out}, but the planner cannot run: {problem}; run "
        f"`gpufleet plan {spec_out} --out {out}` once it is installed, or pass --no-run"
    )


def _load_answers(path: Path) -> Mapping[str, Any]:
    data = read_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise UserError(
            f"{path}: expected a mapping of question keys to answers, got {type(data).__name__}"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise UserError(f"{path}: question keys are text, got {bad[0]!r}")
    return data


def run_wizard(
    answers: Path | None,
    out: Path,
    spec_out: Path,
    run: bool,
    *,
    console: Console | None = None,
    stream: TextIO | None = None,
) -> int:
    """Interview (or read `answers`), write the spec to `spec_out`, and plan it into `out`.

    Returns the planner's exit code, or 0 with `run` false. `console` and `stream` are where
    the interview prints and reads (default: the terminal); tests pass StringIO objects.
    """
    console = console or Console()
    check_outputs(spec_out, out, run)
    asker: Asker
    if answers is not None:
        data = _load_answers(answers)
        check_keys(data, str(answers))
        asker = Scripted(data, str(answers))
    else:
        console.print(
            "[bold]gpufleet wizard[/bold]: a few questions about what you train or serve, "
            "then a plan spec and a capacity plan. Blank takes the suggestion in "
            "parentheses; the key in brackets is the name to use in an --answers file.",
            highlight=False,
        )
        asker = Interactive(console, stream)
    try:
        plan, overwrite = _interview(asker, spec_out, scripted=answers is not None)
    except EOFError:
        key = asker.key if isinstance(asker, Interactive) else ""
        raise UserError(
            f"input ended at question '{key}'; nothing was written "
            "(use --answers FILE to answer from a file)"
        ) from None
    except KeyboardInterrupt:
        console.print("\ncancelled; nothing was written")
        raise typer.Exit(130) from None
    validate(PlanSpec, plan, f"{spec_out} (from the wizard's answers)")
    text = render_spec(plan, spec_out)
    write_atomic(spec_out, text, overwrite=overwrite)
    if isinstance(asker, Interactive):
        console.print(Syntax(text, "yaml", background_color="default"))
    count = len(plan["workloads"])
    console.print(
        f"[green]wrote[/green] {escape(str(spec_out))} ({count} workload{'s' * (count != 1)})",
        highlight=False,
        soft_wrap=True,
    )
    if not run:
        console.print(
            f"next: gpufleet plan {escape(str(spec_out))} --out {escape(str(out))}",
            highlight=False,
            soft_wrap=True,
        )
        return 0
    return _run_plan_function(spec_out, out)(spec_out, out)


def wizard(
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="A YAML file of answers by question key: ask nothing (docs/guide/wizard.md).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Where the plan's reports go (with --run).")
    ] = Path("gpufleet-plan"),
    spec_out: Annotated[
        Path, typer.Option("--spec", help="Where to write the plan spec (YAML).")
    ] = Path("plan.yaml"),
    run: Annotated[
        bool, typer.Option("--run/--no-run", help="Run the planner on the written spec.")
    ] = True,
) -> int:
    """Answer a few questions; get a plan spec and a capacity plan.

    Asks what you train or serve, how big, by when, budget, cloud or on-prem and where,
    explaining each trade-off. Writes the spec, then runs `gpufleet plan` on it. Exit code:
    the planner's; 2 for a bad answer in --answers mode.
    """
    code = run_wizard(answers, out, spec_out, run)
    if code:
        raise typer.Exit(code)
    return code
