"""The CLI surface: version, help everywhere, catalog output formats with stable keys."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gpufleet import __version__
from gpufleet.catalog.columns import TEXT_COLUMNS, unit_of
from gpufleet.catalog.registry import TABLES
from gpufleet.cli.main import main
from gpufleet.specs.kinds import SCHEMAS

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))

REQUIRED_ACCELERATORS = {
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "a100-pcie-80gb",
    "h100-sxm5-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200-sxm-192gb",
    "gb200",
    "mi250x",
    "mi300x",
    "mi325x",
    "gaudi3",
    "tpu-v4",
    "tpu-v5e",
    "tpu-v5p",
    "trainium1",
    "trainium2",
    "l40s",
    "l4",
    "a10g",
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    assert out.strip() == f"gpufleet {__version__}"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["catalog"],
        ["schema"],
        ["check"],
        *[["catalog", name] for name in TABLES],
    ],
    ids=lambda a: " ".join(a) or "root",
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*argv, "--help"], capsys)
    assert code == 0
    assert "Usage:" in out


def test_gpus_json_lists_every_required_accelerator_with_units_and_provenance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["catalog", "gpus", "--format", "json"], capsys)
    assert code == 0
    records = json.loads(out)
    assert {r["name"] for r in records} >= REQUIRED_ACCELERATORS
    for rec in records:
        assert rec["source"]
        assert rec["retrieved"]
        for key, value in rec.items():
            assert key == key.lower()
            assert " " not in key
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert unit_of(key) is not None, key
        assert set(TEXT_COLUMNS) & set(rec) >= {"source", "retrieved", "notes"}


@pytest.mark.parametrize("table", list(TABLES))
def test_every_table_renders_in_every_format(
    table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["catalog", table, "--format", "json"], capsys)
    assert code == 0
    records = json.loads(out)
    assert records
    code, out, _ = run(["catalog", table, "--format", "csv"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(records)
    assert list(rows[0]) == list(records[0])
    code, out, _ = run(["catalog", table], capsys)
    assert code == 0
    assert f"{len(records)} rows" in out


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param(["vendor=amd"], {"mi250x", "mi300x", "mi325x"}, id="case-insensitive"),
        pytest.param(["aliases=trn1"], {"trainium1"}, id="list-membership"),
        pytest.param(["memory_bytes>=190e9", "vendor=NVIDIA"], {"b200-sxm-192gb"}, id="numeric"),
        pytest.param(["name~=tpu", "kind!=tpu"], set(), id="contains-and-not"),
    ],
)
def test_filters(
    filters: list[str], expected: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["catalog", "gpus", "--format", "json"]
    for f in filters:
        argv += ["--filter", f]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert {r["name"] for r in json.loads(out)} == expected


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schema_prints_json_schema(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["schema", name], capsys)
    assert code == 0
    schema = json.loads(out)
    assert schema["type"] == "object"
    assert schema["properties"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["check", str(path), "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["kind"] in SCHEMAS


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_conform_to_the_printed_json_schema(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Editors and CI validate specs with `gpufleet schema`; it must accept what we accept."""
    import jsonschema
    import yaml

    data = yaml.safe_load(path.read_text())
    code, out, _ = run(["schema", data["kind"]], capsys)
    assert code == 0
    jsonschema.validate(data, json.loads(out))


def test_filters_accept_aliases_and_sizes_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["catalog", "instances", "--format", "json", "--filter", "accelerator=H100"]
    code, out, _ = run([*argv, "--filter", "provider=aws"], capsys)
    assert code == 0
    names = {r["name"] for r in json.loads(out)}
    assert names == {"p5.48xlarge", "p5.4xlarge"}
    code, out, _ = run(
        ["catalog", "gpus", "--format", "json", "--filter", "memory_bytes>=190GB"], capsys
    )
    assert {r["name"] for r in json.loads(out)} == {"b200-sxm-192gb", "mi300x", "mi325x"}


def test_bare_command_prints_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([], capsys)
    assert code == 0
    assert "catalog" in out
