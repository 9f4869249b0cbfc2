"""`gpufleet catalog <table>`: browse the sourced hardware, cloud and model catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from gpufleet.catalog.registry import TABLES, TableEntry
from gpufleet.catalog.table import as_records
from gpufleet.cli.output import Format, apply_filters, render, wide_console

app = typer.Typer(
    help="Browse the catalog: accelerators, systems, fabrics, storage, MIG, cloud instances.",
    no_args_is_help=True,
)

FormatOpt = Annotated[
    Format, typer.Option("--format", "-f", help="table (terminal), json or csv (all columns).")
]
FilterOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        help="KEY=VALUE (case-insensitive); also KEY!=V, KEY~=TEXT, KEY>=N, KEY<=N. Repeatable.",
    ),
]


def _canonical(table: str) -> Callable[[str, str], str]:
    """Filter values naming an accelerator accept its aliases (H100, A100-SXM4-80GB)."""

    def canonical(column: str, value: str) -> str:
        if column == "accelerator" or (table == "gpus" and column == "name"):
            from gpufleet.catalog.accelerators import accelerator_index

            index = accelerator_index()
            if value in index:
                return index.get(value).name
        return value

    return canonical


def _show(entry: TableEntry, fmt: Format, filters: list[str] | None) -> None:
    rows = entry.load()
    records = apply_filters(as_records(rows), filters or [], _canonical(entry.name))
    columns = type(rows[0]).table_columns if rows else ()
    render(records, fmt, wide_console(), title=entry.title, table_columns=columns)


def _register(entry: TableEntry) -> None:
    def command(format: FormatOpt = Format.table, filter: FilterOpt = None) -> None:
        _show(entry, format, filter)

    command.__doc__ = f"{entry.title}: every row with units, source and retrieved date."
    app.command(entry.name)(command)


for _entry in TABLES.values():
    _register(_entry)
