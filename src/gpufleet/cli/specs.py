"""`gpufleet schema` and `gpufleet validate`: the spec formats and a checker for files."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpufleet.errors import UserError, suggest
from gpufleet.specs.kinds import SCHEMAS, load_spec


def schema(
    name: Annotated[str, typer.Argument(help=f"One of: {', '.join(SCHEMAS)}.")],
) -> None:
    """Print the JSON Schema of a spec kind (for editors and CI validation)."""
    model = SCHEMAS.get(name.lower())
    if model is None:
        hint = suggest(name, SCHEMAS, limit=1)
        tail = f"; did you mean '{hint[0]}'?" if hint else f"; one of {', '.join(SCHEMAS)}"
        raise UserError(f"unknown schema '{name}'{tail}")
    typer.echo(json.dumps(model.model_json_schema(), indent=2))


class SpecFormat(StrEnum):
    table = "table"
    json = "json"


def check(
    path: Annotated[Path, typer.Argument(help="A spec YAML file (any kind).")],
    format: Annotated[
        SpecFormat,
        typer.Option(
            "--format", "-f", help="table: a one-line verdict; json: the spec as understood."
        ),
    ] = SpecFormat.table,
) -> None:
    """Check a spec file; --format json prints it as gpufleet understood it.

    The JSON has defaults filled in and catalog names made canonical: what the
    planner and scheduler will use.
    """
    spec = load_spec(path)
    if format is SpecFormat.json:
        typer.echo(spec.model_dump_json(indent=2))
        return
    console = Console()
    kind = getattr(spec, "kind", type(spec).__name__)
    console.print(f"[green]ok[/green] {path}: valid {kind} spec")
