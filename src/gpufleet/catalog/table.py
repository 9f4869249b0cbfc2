"""Load a catalog CSV file into frozen pydantic rows.

Catalog files are plain CSV (UTF-8, header row) so that a reviewer can read a
diff of a price change. Empty cells mean "the sources do not say" and load as
None; nothing is filled in. Cells holding several values use `;`.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Sequence
from importlib import resources
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from gpufleet.errors import CatalogError

LIST_SEPARATOR = ";"


class CatalogRow(BaseModel):
    """Base of every catalog row: provenance is mandatory, rows are immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    # Columns whose cells hold `;`-separated lists, per subclass.
    list_columns: ClassVar[frozenset[str]] = frozenset()
    # Columns `gpufleet catalog <table>` shows in table format (json/csv show all).
    table_columns: ClassVar[tuple[str, ...]] = ()

    source: str
    retrieved: dt.date
    notes: str = ""

    @field_validator("source")
    @classmethod
    def _source_present(cls, value: str) -> str:
        if not value:
            raise ValueError("every catalog row needs a source")
        return value


RowT = TypeVar("RowT", bound=CatalogRow)


def data_file(name: str) -> str:
    """Text of a file shipped in gpufleet/catalog/data."""
    return resources.files("gpufleet.catalog").joinpath("data", name).read_text("utf-8")


def read_header(name: str) -> list[str]:
    reader = csv.reader(data_file(name).splitlines())
    return next(reader)


def _cell(model: type[CatalogRow], column: str, raw: str) -> Any:
    text = raw.strip()
    if column in model.list_columns:
        return tuple(part.strip() for part in text.split(LIST_SEPARATOR) if part.strip())
    if text == "":
        return None if column not in {"notes", "derivation"} else ""
    return text


def load_rows(name: str, model: type[RowT]) -> tuple[RowT, ...]:
    """Parse data/<name> into `model` rows; any bad row is a CatalogError naming its line."""
    reader = csv.DictReader(data_file(name).splitlines())
    fields = set(model.model_fields)
    header = reader.fieldnames or []
    unknown = [c for c in header if c not in fields]
    if unknown:
        raise CatalogError(f"{name}: columns {unknown} are not fields of {model.__name__}")
    rows: list[RowT] = []
    for line_no, raw in enumerate(reader, start=2):
        values = {k: _cell(model, k, v or "") for k, v in raw.items()}
        try:
            rows.append(model.model_validate(values))
        except ValidationError as exc:
            raise CatalogError(f"{name}:{line_no}: {exc}") from exc
    return tuple(rows)


def as_records(rows: Sequence[CatalogRow]) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts with stable snake_case keys."""
    return [_provenance_last(row.model_dump(mode="json")) for row in rows]


def _provenance_last(record: dict[str, Any]) -> dict[str, Any]:
    """Facts first, then where they came from: the order people read a row in."""
    tail: dict[str, Any] = {
        k: record.pop(k) for k in ("source", "retrieved", "notes") if k in record
    }
    return {**record, **tail}
