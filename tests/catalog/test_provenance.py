"""Every catalog table: each row has a source and a retrieved date, each number a unit."""

from __future__ import annotations

import datetime as dt
import types
import typing

import pytest

from gpufleet.catalog.columns import TEXT_COLUMNS, is_bool_column, unit_of
from gpufleet.catalog.registry import TABLES, TableEntry
from gpufleet.catalog.table import read_header

ENTRIES = list(TABLES.values())


def _numeric(annotation: object) -> bool:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_numeric(a) for a in args if a is not type(None))
    return annotation in (int, float)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_every_row_names_its_source_and_retrieved_date(entry: TableEntry) -> None:
    rows = entry.load()
    assert rows, f"{entry.name} is empty"
    for row in rows:
        assert row.source.strip(), row
        assert dt.date(2020, 1, 1) <= row.retrieved <= dt.date.today(), row


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_every_numeric_column_carries_its_unit(entry: TableEntry) -> None:
    rows = entry.load()
    model = type(rows[0])
    exempt: frozenset[str] = getattr(model, "dimensionless_columns", frozenset())
    missing = [
        name
        for name, field in model.model_fields.items()
        if _numeric(field.annotation) and name not in exempt and unit_of(name) is None
    ]
    assert not missing, f"{entry.name}: numeric columns without a unit: {missing}"
    bools = [
        name
        for name, field in model.model_fields.items()
        if field.annotation in (bool, bool | None)
        and not is_bool_column(name)
        and name not in exempt
    ]
    assert not bools, f"{entry.name}: boolean columns need is_/has_/supports_: {bools}"


def test_data_files_have_no_columns_outside_the_row_models() -> None:
    for entry in ENTRIES:
        rows = entry.load()
        model = type(rows[0])
        for file_name in {_file_of(entry)}:
            header = read_header(file_name)
            assert set(header) <= set(model.model_fields), (entry.name, header)
            assert TEXT_COLUMNS & {"source", "retrieved"} <= set(header)


def _file_of(entry: TableEntry) -> str:
    return {
        "gpus": "accelerators.csv",
        "mig": "mig_profiles.csv",
        "mig-layouts": "mig_layouts.csv",
        "models": "models.csv",
    }.get(entry.name, f"{entry.name}.csv")


def test_unit_rule_rejects_a_bare_number_column() -> None:
    assert unit_of("hbm_bandwidth") is None
    assert unit_of("hbm_bandwidth_gbytes_per_s") == "gbytes_per_s"
    assert unit_of("scaleup_bidir_gbytes_per_s_per_gpu") == "gbytes_per_s"
    assert unit_of("port_gbit_per_s") == "gbit_per_s"
