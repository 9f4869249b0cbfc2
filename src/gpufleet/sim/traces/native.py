"""gpufleet's own job-trace format: one row per `TraceJob`, as CSV or Parquet.

The columns are exactly the `TraceJob` field names, so any tool that can write a table can
produce a workload for the simulator, and a workload read from any other format can be
saved once, edited, and replayed. An empty cell means the field's default; `accelerators`
holds `|`-separated names. Times are seconds from the start of the workload and are *not*
shifted: a native file may start later than 0 on purpose.

Required: `name`, `team`, `submit_s`, `duration_s`, and per row exactly one of `gpus`,
`gpu_fraction`, `mig_profile` (the file needs at least one of those columns). Unknown
columns are an error (a typo such as `gpu` would otherwise silently lose the request).
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from gpufleet.errors import UserError, suggest
from gpufleet.sim.traces._common import (
    JOB_KINDS,
    TOO_WIDE,
    CellError,
    Tally,
    csv_rows,
    finish,
    invalid_reason,
    open_text,
    parse_one,
    reading,
    require_columns,
    too_wide,
)
from gpufleet.sim.workload import TraceJob, Workload

COLUMNS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(TraceJob))
REQUIRED: Final = ("name", "team", "submit_s", "duration_s")
REQUEST_COLUMNS: Final = ("gpus", "gpu_fraction", "mig_profile")
ACCELERATOR_SEPARATOR: Final = "|"
NAME: Final = "gpufleet native trace"
WHAT: Final = f"a {NAME}"

_TEXT = ("name", "team", "mig_profile", "priority_class", "user", "project")
_FLOAT = (
    "submit_s",
    "duration_s",
    "gpu_fraction",
    "runtime_estimate_s",
    "checkpoint_interval_s",
    "busy_fraction",
    "slo_ttft_ms",
)
_INT = ("gpus", "workers")
_ARROW_TYPES: Final[Mapping[str, pa.DataType]] = {
    **{c: pa.string() for c in (*_TEXT, "accelerators", "kind")},
    **{c: pa.float64() for c in _FLOAT},
    **{c: pa.int64() for c in _INT},
    "preemptible": pa.bool_(),
}
SCHEMA: Final = pa.schema([(c, _ARROW_TYPES[c]) for c in COLUMNS])


def read_native(path: Path) -> Workload:
    """A native trace (`.csv`, `.csv.gz` or `.parquet`) as a workload."""
    if _is_parquet(path):
        return _read_parquet(path)
    _check_suffix(path)
    rows = 0
    jobs: list[TraceJob] = []
    tally = Tally()
    with reading(path, WHAT), open_text(path) as stream:
        header, body = csv_rows(stream, path, WHAT, ())
        _check_header(header, path)
        for cells in body:
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue
            rows += 1
            if too_wide(cells, len(header)):
                tally.drop(TOO_WIDE)
                continue
            record = dict(zip(header, cells, strict=False))
            job = parse_one(tally, partial(_job, record), check_submit=True)
            if job is not None:
                jobs.append(job)
    return finish(path.name, rows, jobs, tally, shift=False)


def write_native(jobs: Iterable[TraceJob], path: Path) -> None:
    """Write jobs as a native trace; the suffix picks the format (`.csv`, `.csv.gz`, `.parquet`).

    Raises ValueError for a job the reader would drop (an invalid job is a bug upstream)
    or an accelerator name containing the separator `|`.
    """
    jobs = list(jobs)
    for job in jobs:
        reason = invalid_reason(job)
        if reason is not None:
            raise ValueError(f"job '{job.name}' cannot be written: {reason}")
        if any(ACCELERATOR_SEPARATOR in a for a in job.accelerators):
            raise ValueError(f"job '{job.name}': an accelerator name contains '|'")
    if _is_parquet(path):
        columns = {c: [_arrow_value(getattr(j, c)) for j in jobs] for c in COLUMNS}
        try:
            pq.write_table(pa.table(columns, schema=SCHEMA), path)
        except OSError as exc:
            raise UserError(f"{path}: cannot write: {exc}") from None
        return
    _check_suffix(path)
    try:
        with _open_for_writing(path) as stream:
            writer = csv.writer(stream, lineterminator="\n")
            writer.writerow(COLUMNS)
            for job in jobs:
                writer.writerow([_csv_cell(getattr(job, c)) for c in COLUMNS])
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _read_parquet(path: Path) -> Workload:
    with reading(path, WHAT):
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise UserError(f"{path}: not a Parquet file: {exc}") from None
    header = list(table.column_names)
    _check_header(header, path)
    columns: dict[str, list[Any]] = {c: table.column(c).to_pylist() for c in header}
    tally = Tally()
    jobs: list[TraceJob] = []
    for i in range(table.num_rows):
        record = {c: values[i] for c, values in columns.items()}
        job = parse_one(tally, partial(_job, record), check_submit=True)
        if job is not None:
            jobs.append(job)
    return finish(path.name, table.num_rows, jobs, tally, shift=False)


def _job(record: Mapping[str, object]) -> TraceJob:
    """One row to a `TraceJob`; a cell that does not parse raises `CellError` (row dropped)."""
    values: dict[str, Any] = {}
    for column, raw in record.items():
        value = _PARSERS[column](raw, column)
        if value is not None:
            values[column] = value
    for column in REQUIRED:
        if column not in values:
            raise CellError(f"no {column}")
    # An empty `gpus` cell means "not whole GPUs", not the dataclass default of one GPU.
    values.setdefault("gpus", None)
    return TraceJob(**values)


def _text(value: object, column: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise CellError(f"{column} is not text")
    return value.strip() or None


def _float(value: object, column: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise CellError(f"{column} is not a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        if not value.strip():
            return None
        try:
            number = float(value)
        except ValueError:
            raise CellError(f"unreadable {column}") from None
    else:
        raise CellError(f"{column} is not a number")
    if not math.isfinite(number):
        raise CellError(f"non-finite {column}")
    return number


def _int(value: object, column: str) -> int | None:
    number = _float(value, column)
    if number is None:
        return None
    if number != int(number):
        raise CellError(f"{column} is not a whole number")
    return int(number)


def _bool(value: object, column: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if not text:
            return None
        if text in ("true", "yes", "1"):
            return True
        if text in ("false", "no", "0"):
            return False
    raise CellError(f"{column} is not true/false")


def _accelerators(value: object, column: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    parts: list[object]
    if isinstance(value, str):
        parts = list(value.split(ACCELERATOR_SEPARATOR))
    elif isinstance(value, list | tuple):
        parts = list(value)  # a Parquet list<string> column is accepted too
    else:
        raise CellError(f"{column} is not text")
    if not all(isinstance(p, str) for p in parts):
        raise CellError(f"{column} holds a non-text name")
    return tuple(p.strip() for p in parts if isinstance(p, str) and p.strip()) or None


def _kind(value: object, column: str) -> str | None:
    text = _text(value, column)
    if text is not None and text not in JOB_KINDS:
        raise CellError(f"unknown kind '{text[:40]}'")
    return text


_PARSERS: Final[Mapping[str, Callable[[object, str], object]]] = {
    **dict.fromkeys(_TEXT, _text),
    **dict.fromkeys(_FLOAT, _float),
    **dict.fromkeys(_INT, _int),
    "accelerators": _accelerators,
    "kind": _kind,
    "preemptible": _bool,
}


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same float
    if isinstance(value, tuple):
        return ACCELERATOR_SEPARATOR.join(value)
    return str(value)


def _arrow_value(value: object) -> object:
    if isinstance(value, tuple):
        return ACCELERATOR_SEPARATOR.join(value) or None
    return value


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _check_suffix(path: Path) -> None:
    name = path.name.lower()
    if not (name.endswith(".csv") or name.endswith(".csv.gz")):
        raise UserError(
            f"{path}: a native trace is .csv, .csv.gz or .parquet (got '{path.suffix}')"
        )


def _open_for_writing(path: Path) -> IO[str]:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", newline="")
    return path.open("w", encoding="utf-8", newline="")


# what other traces and tools call a native column: a suggestion by meaning, where spelling
# would mislead ('time' reads closer to 'runtime_estimate_s' than to 'submit_s')
SYNONYMS: Final[Mapping[str, str]] = {
    "time": "submit_s",
    "submit": "submit_s",
    "submit_time": "submit_s",
    "arrival": "submit_s",
    "arrival_s": "submit_s",
    "start_s": "submit_s",
    "duration": "duration_s",
    "runtime": "duration_s",
    "run_time": "duration_s",
    "runtime_s": "duration_s",
    "num_gpus": "gpus",
    "gpu_num": "gpus",
    "num_gpu": "gpus",
    "num_replicas": "workers",
    "replicas": "workers",
    "user_name": "user",
    "job_name": "name",
    "job_id": "name",
    "queue": "team",
    "vc": "team",
}


def _hint(column: str) -> str:
    meant = SYNONYMS.get(column.lower())
    if meant is not None:
        return f"'{column}' (did you mean '{meant}'?)"
    close = suggest(column, COLUMNS, limit=1)
    return f"'{column}' (did you mean '{close[0]}'?)" if close else f"'{column}'"


def _check_header(header: list[str], path: Path) -> None:
    """Unknown columns first, all of them, each with a suggestion (by meaning where another
    format's name is known, else by spelling), then required ones."""
    known = set(COLUMNS)
    unknown = [c for c in header if c not in known]
    if unknown:
        raise UserError(
            f"{path}: {NAME}: unknown column{'s' * (len(unknown) > 1)} "
            f"{', '.join(_hint(c) for c in unknown)}; the columns are {', '.join(COLUMNS)}"
        )
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise UserError(f"{path}: {NAME}: repeated column {', '.join(repeated)}")
    require_columns(header, REQUIRED, path, WHAT)
    if not any(c in header for c in REQUEST_COLUMNS):
        options = " or ".join(f"'{c}'" for c in REQUEST_COLUMNS)
        raise UserError(f"{path}: not {WHAT}: needs column {options} (found: {', '.join(header)})")
