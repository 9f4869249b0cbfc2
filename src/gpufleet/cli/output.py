"""Render records as a Rich table, JSON or CSV, and filter them by KEY=VALUE.

Every reporting command goes through here, so `--format json` has the same
stable snake_case keys everywhere and filters behave the same on every table.
"""

from __future__ import annotations

import csv
import io
import json
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table

from gpufleet.catalog.columns import unit_of
from gpufleet.errors import UserError, suggest
from gpufleet.formatting import format_bytes
from gpufleet.quantities import parse_bytes


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


Record = Mapping[str, Any]

_FILTER = re.compile(r"^\s*(?P<key>[A-Za-z0-9_]+)\s*(?P<op>>=|<=|!=|~=|=|>|<)\s*(?P<value>.*)$")
_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


def parse_filters(exprs: Sequence[str], columns: Sequence[str]) -> list[Callable[[Record], bool]]:
    """`KEY=VALUE` (case-insensitive, list cells match any item), `!=`, `~=` (contains),
    and `>=`, `<=`, `>`, `<` on numbers. Unknown keys are errors with suggestions."""
    return [_parse_filter(expr, columns) for expr in exprs]


def _canonical_expr(expr: str, canonical: Callable[[str, str], str]) -> str:
    match = _FILTER.match(expr)
    if match is None or match["op"] not in {"=", "!="}:
        return expr
    return f"{match['key']}{match['op']}{canonical(match['key'], match['value'].strip())}"


def _parse_filter(expr: str, columns: Sequence[str]) -> Callable[[Record], bool]:
    match = _FILTER.match(expr)
    if match is None:
        raise UserError(
            f"--filter '{expr}': expected KEY=VALUE (also !=, ~=, >=, <=, >, <), e.g. vendor=NVIDIA"
        )
    key, op, value = match["key"], match["op"], match["value"].strip()
    if key not in columns:
        # `memory` should point at `memory_bytes`: a unit suffix is the usual omission.
        hint = [c for c in columns if unit_of(c) and c.startswith(f"{key}_")][:1]
        hint = hint or suggest(key, columns, limit=1)
        tail = f"; did you mean '{hint[0]}'?" if hint else ""
        raise UserError(f"--filter '{expr}': unknown column '{key}'{tail}")
    if op in _NUMERIC_OPS:
        bound = _number(key, value, expr)
        compare = _NUMERIC_OPS[op]

        def numeric(rec: Record) -> bool:
            cell = rec.get(key)
            return isinstance(cell, int | float) and compare(float(cell), bound)

        return numeric
    wanted = value.lower()

    def cells(rec: Record) -> list[str]:
        cell = rec.get(key)
        items = cell if isinstance(cell, list | tuple) else [cell]
        return ["" if c is None else _plain(c).lower() for c in items]

    if op == "~=":
        return lambda rec: any(wanted in c for c in cells(rec))
    if op == "!=":
        return lambda rec: all(not _equal(c, wanted) for c in cells(rec))
    return lambda rec: any(_equal(c, wanted) for c in cells(rec))


def _number(column: str, value: str, expr: str) -> float:
    """A filter bound; `_bytes` columns also take sizes with units (80GB, 80GiB)."""
    try:
        return float(value)
    except ValueError:
        pass
    if unit_of(column) == "bytes":
        try:
            return float(parse_bytes(value))
        except ValueError as exc:
            raise UserError(f"--filter '{expr}': {exc}") from None
    raise UserError(f"--filter '{expr}': '{value}' is not a number") from None


def _equal(cell: str, wanted: str) -> bool:
    if cell == wanted:
        return True
    try:
        return float(cell) == float(wanted)
    except ValueError:
        return False


def _plain(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_format(value: str, allowed: tuple[str, ...] = ("table", "json")) -> str:
    """A `--format` value, or a user error listing the accepted ones."""
    if value not in allowed:
        raise UserError(f"--format: '{value}' is not one of {', '.join(allowed)}")
    return value


def apply_filters(
    records: Sequence[Record],
    exprs: Sequence[str],
    canonical: Callable[[str, str], str] | None = None,
) -> list[Record]:
    """Keep records matching every filter; `canonical(column, value)` may rewrite an
    equality value first (an alias such as H100 to the catalog's canonical name)."""
    columns = list(records[0]) if records else []
    if exprs and not records:
        return []
    if canonical is not None:
        exprs = [_canonical_expr(e, canonical) for e in exprs]
    tests = parse_filters(exprs, columns)
    return [r for r in records if all(t(r) for t in tests)]


def wide_console() -> Console:
    """Piped output (CI logs, `make run`) is not wrapped at 80 columns."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    return console


def render(
    records: Sequence[Record],
    fmt: Format,
    console: Console,
    *,
    title: str = "",
    table_columns: Sequence[str] = (),
) -> None:
    if fmt is Format.json:
        console.file.write(json.dumps(list(records), indent=2, ensure_ascii=False) + "\n")
        return
    if fmt is Format.csv:
        console.file.write(to_csv(records))
        return
    columns = list(table_columns) or (list(records[0]) if records else [])
    table = Table(title=title or None, header_style="bold", show_lines=False)
    for col in columns:
        numeric = any(isinstance(r.get(col), int | float) for r in records)
        table.add_column(header(col), justify="right" if numeric else "left", overflow="fold")
    for rec in records:
        table.add_row(*(human(col, rec.get(col)) for col in columns))
    console.print(table)
    console.print(f"{len(records)} row{'' if len(records) == 1 else 's'}", style="dim")


def to_csv(records: Sequence[Record]) -> str:
    out = io.StringIO()
    if not records:
        return ""
    writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: _csv_cell(v) for k, v in rec.items()})
    return out.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


_UNIT_LABELS: dict[str, str] = {
    "tflops": "TFLOPS",
    "tops": "TOPS",
    "bytes": "",
    "gbytes_per_s": "GB/s",
    "mbytes_per_s": "MB/s",
    "mbytes_per_s_per_tib": "MB/s/TiB",
    "gbit_per_s": "Gb/s",
    "tbit_per_s": "Tb/s",
    "w": "W",
    "kw": "kW",
    "usd_per_hour": "$/h",
    "usd_per_gb_month": "$/GB-mo",
    "usd": "$",
    "fraction": "",
    "s": "s",
    "ns": "ns",
    "us": "µs",
}


def header(column: str) -> str:
    """`memory_bandwidth_gbytes_per_s` -> `memory bandwidth (GB/s)` for terminal tables."""
    unit = unit_of(column)
    if unit is None or unit not in _UNIT_LABELS:
        return column.replace("_", " ")
    stem = column.replace(f"_{unit}", "", 1)
    label = _UNIT_LABELS[unit]
    words = stem.replace("_", " ")
    return f"{words} ({label})" if label else words


def human(column: str, value: Any) -> str:
    """Terminal-friendly cell: bytes as GB/GiB, lists joined, blanks as '-'."""
    if value is None or value in ("", [], ()):
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if column.endswith("_bytes") and isinstance(value, int | float):
        return format_bytes(value)
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)
