"""Golden files: every file of every target for each scenario, byte for byte.

An intended change to an export shows up as a diff here; regenerate and review it:
GPUFLEET_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/export/test_golden.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .scenarios import SCENARIOS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUFLEET_UPDATE_GOLDEN") == "1"

CASES = [
    pytest.param(name, target, id=f"{name}-{target}")
    for name, scenario in SCENARIOS.items()
    for target in scenario.targets
]


@pytest.mark.parametrize(("scenario", "target"), CASES)
def test_export_matches_golden(scenario: str, target: str) -> None:
    files = SCENARIOS[scenario].bundle(target).with_notes_file()
    where = GOLDEN / scenario / target
    if UPDATE:
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        for name, text in files.items():
            (where / name).write_text(text, encoding="utf-8")
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in where.iterdir()}
    assert sorted(on_disk) == sorted(files), (
        "files differ; regenerate with GPUFLEET_UPDATE_GOLDEN=1"
    )
    for name, text in files.items():
        assert text == on_disk[name], f"{scenario}/{target}/{name} differs from the golden file"


def test_exports_are_deterministic() -> None:
    """Two runs give the same bytes (no set or dict order leaks into the files)."""
    for scenario in SCENARIOS.values():
        for target in scenario.targets:
            assert scenario.bundle(target).files == scenario.bundle(target).files
