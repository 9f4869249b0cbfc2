"""`gpufleet simulate --jobs-out`: one row per completed job, as papers tabulate them."""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from gpufleet.errors import UserError, os_reason
from gpufleet.sim.metrics import JOB_COLUMNS, JobRecord


def write_jobs(path: Path, jobs: Sequence[JobRecord]) -> None:
    """CSV, or Parquet for a `.parquet` path. Written to a temporary file and renamed, so a
    failure leaves nothing half-written."""
    _write(path, JOB_COLUMNS, [_row(j) for j in jobs])


def write_runs_jobs(path: Path, runs: Sequence[tuple[str, int, Sequence[JobRecord]]]) -> int:
    """`gpufleet simulate compare --jobs-out`: every run's jobs in one table, led by the run's
    `profile` and `seed`, so a policy's per-job figures can be set beside another's (a
    paper's CDF of JCT, a test of its own). Returns the rows written."""
    rows = [{"profile": p, "seed": s, **_row(j)} for p, s, jobs in runs for j in jobs]
    _write(path, ("profile", "seed", *JOB_COLUMNS), rows)
    return len(rows)


def _row(job: JobRecord) -> dict[str, object]:
    return {c: getattr(job, c) for c in JOB_COLUMNS}


def _write(path: Path, columns: Sequence[str], rows: Sequence[dict[str, object]]) -> None:
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".parquet":
            pq.write_table(pa.table({c: [r[c] for r in rows] for c in columns}), partial)
        else:
            with partial.open("w", encoding="utf-8", newline="") as stream:
                writer = csv.DictWriter(stream, fieldnames=columns, lineterminator="\n")
                writer.writeheader()
                writer.writerows(rows)
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # (its folder may be what failed)
            partial.unlink()
        raise UserError(f"--jobs-out: cannot write {path} ({os_reason(exc)})") from None
