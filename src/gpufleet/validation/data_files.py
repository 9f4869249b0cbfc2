"""Read the ground-truth files shipped in gpufleet/validation/data."""

from __future__ import annotations

import csv
from importlib import resources


def data_text(name: str) -> str:
    return resources.files("gpufleet.validation").joinpath("data", name).read_text("utf-8")


def csv_rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(data_text(name).splitlines()))
