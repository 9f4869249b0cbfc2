"""`gpufleet simulate --jobs-out`: one row per completed job, as papers tabulate them."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from gpufleet.errors import UserError
from gpufleet.sim.metrics import JOB_COLUMNS, JobRecord


def write_jobs(path: Path, jobs: Sequence[JobRecord]) -> None:
    """CSV, or Parquet for a `.parquet` path. Written to a temporary file and renamed, so a
    failure leaves nothing half-written."""
    rows = [{c: getattr(j, c) for c in JOB_COLUMNS} for j in jobs]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        if path.suffix.lower() == ".parquet":
            pq.write_table(pa.table({c: [r[c] for r in rows] for c in JOB_COLUMNS}), partial)
        else:
            with partial.open("w", encoding="utf-8", newline="") as stream:
                writer = csv.DictWriter(stream, fieldnames=JOB_COLUMNS, lineterminator="\n")
                writer.writeheader()
                writer.writerows(rows)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UserError(f"--jobs-out: cannot write {path}: {exc.strerror or exc}") from None
