"""What every trace reader shares: opening files, checking headers, parsing cells, the tally.

Readers turn foreign rows into `TraceJob`s and must account for every row (the
`CleaningReport` refuses otherwise). Bad *rows* are dropped with a reason a person can read;
bad *files* (missing, not text, missing a required column) raise `UserError`, because no
reasonable workload can come out of them and the CLI turns that into exit code 2, not a
traceback.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import IO, Final, get_args

from gpufleet.errors import UserError
from gpufleet.sim.workload import CleaningReport, TraceJob, TraceNode, Workload
from gpufleet.specs.jobs import JobKind

JOB_KINDS: Final[frozenset[str]] = frozenset(get_args(JobKind))

# Words traces use for "no value": Slurm says Unknown/None, Philly "None", pandas dumps "nan".
_NO_VALUE: Final[frozenset[str]] = frozenset({"", "none", "unknown", "nan", "null", "n/a"})


class CellError(ValueError):
    """A row that cannot become a job; the reader drops it with this message as the reason."""


@dataclass
class Tally:
    """Counts of dropped rows and cleaned values by reason, built up while reading.

    Row parsers `note` what they changed; the notes count only once the row is kept
    (`parse_one`), so a row dropped after a fix is not also reported as fixed.
    """

    dropped: Counter[str] = field(default_factory=Counter)
    cleaned: Counter[str] = field(default_factory=Counter)
    pending: list[str] = field(default_factory=list)

    def drop(self, reason: str) -> None:
        self.dropped[reason] += 1

    def note(self, what: str) -> None:
        """A change to the row being parsed (counted if the row is kept)."""
        self.pending.append(what)

    def clean(self, what: str, rows: int = 1) -> None:
        """A change to `rows` kept rows, counted now."""
        if rows:
            self.cleaned[what] += rows


def parse_one(
    tally: Tally, parse: Callable[[], TraceJob | None], *, check_submit: bool
) -> TraceJob | None:
    """Parse one row into a valid job, or tally why not; the row's notes count if it is kept.

    `parse` returns None after tallying a drop itself, or raises `CellError` (the reason).
    """
    tally.pending.clear()
    try:
        job = parse()
    except CellError as exc:
        tally.drop(str(exc))
        return None
    if job is None:
        return None
    reason = invalid_reason(job, check_submit=check_submit)
    if reason is not None:
        tally.drop(reason)
        return None
    for what in tally.pending:
        tally.cleaned[what] += 1
    tally.pending.clear()
    return job


def check_exists(path: Path) -> None:
    """A missing path or a directory is the user's mistake: say so before anything else."""
    if not path.exists():
        raise UserError(f"{path}: no such trace file")
    if not path.is_file():
        raise UserError(f"{path}: not a file")


def open_text(path: Path) -> IO[str]:
    """A text stream over `path`, gunzipped on the fly when it ends in `.gz`."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


@contextmanager
def reading(path: Path, what: str) -> Iterator[None]:
    """Turn the ways a wrong file fails to parse into one `UserError` naming the file."""
    check_exists(path)
    try:
        yield
    except UserError:
        raise
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not {what} (not UTF-8 text: {exc})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: not {what} (a broken gzip file: {exc})") from None
    except csv.Error as exc:
        raise UserError(f"{path}: not {what} (CSV error: {exc})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None


def csv_rows(
    stream: IO[str],
    path: Path,
    what: str,
    required: Sequence[str],
    *,
    delimiter: str = ",",
    one_of: Sequence[Sequence[str]] = (),
    quoted: bool = True,
) -> tuple[list[str], Iterator[list[str]]]:
    """The header (stripped) and the remaining rows; `UserError` naming missing columns.

    `one_of` lists alternative column sets of which at least one must be present whole
    (a duration column, or start and end columns). `quoted=False` reads quote characters as
    text (`sacct --parsable2` never quotes, so a job name may hold a lone '"').
    """
    if quoted:
        reader = csv.reader(stream, delimiter=delimiter)
    else:
        reader = csv.reader(stream, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    header = next(reader, None)
    if header is None:
        raise UserError(f"{path}: empty file; {what} starts with a header row")
    header = [h.strip().lstrip("\ufeff") for h in header]
    while header and header[-1] == "":  # `sacct --parsable` ends every line with a '|'
        header.pop()
    require_columns(header, required, path, what)
    if one_of and not any(all(c in header for c in group) for group in one_of):
        options = " or ".join("+".join(f"'{c}'" for c in group) for group in one_of)
        raise UserError(f"{path}: not {what}: needs column {options} (found: {_found(header)})")
    return header, reader


def require_columns(header: Sequence[str], required: Iterable[str], path: Path, what: str) -> None:
    missing = [c for c in required if c not in header]
    if missing:
        cols = ", ".join(f"'{c}'" for c in missing)
        noun = "column" if len(missing) == 1 else "columns"
        raise UserError(f"{path}: not {what}: missing {noun} {cols} (found: {_found(header)})")


TOO_WIDE: Final = "more cells than columns (unquoted separator?)"


def too_wide(cells: Sequence[str], width: int) -> bool:
    """A row with non-empty cells beyond the header: its cells would land in wrong columns."""
    return len(cells) > width and any(c.strip() for c in cells[width:])


def _found(header: Sequence[str]) -> str:
    shown = ", ".join(header[:20]) + (", ..." if len(header) > 20 else "")
    return shown or "no columns"


def is_blank(text: str | None) -> bool:
    return text is None or text.strip().lower() in _NO_VALUE


def parse_int(text: str, column: str) -> int:
    """An integer cell; `8.0` is accepted (pandas writes integer columns with NaNs as floats)."""
    value = parse_float(text, column)
    if value != int(value):
        raise CellError(f"{column} is not a whole number")
    return int(value)


def parse_float(text: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CellError(f"unreadable {column}") from None
    if not math.isfinite(value):
        raise CellError(f"non-finite {column}")
    return value


def parse_time_s(text: str | None, column: str) -> float | None:
    """Seconds for an epoch number or a date-time; None for the trace's "no value" words.

    Naive date-times are read as UTC: traces record local wall-clock times without a zone,
    and readers only use differences, so the zone itself does not matter (a daylight-saving
    change inside a job would shift its duration by an hour; the formats do not say).
    """
    if text is None or is_blank(text):
        return None
    text = text.strip()
    try:
        return parse_float(text, column)
    except CellError:
        pass
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CellError(f"unreadable {column}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


def parse_clock_s(text: str, column: str) -> float:
    """Slurm durations: `[D-]HH:MM:SS`, `MM:SS`, `HH:MM:SS.fff` or bare minutes."""
    body = text.strip()
    days = 0.0
    dated = "-" in body  # `0-25:00:00` has days, zero of them: its hours still stop at 23
    if dated:
        day_text, body = body.split("-", 1)
        days = parse_float(day_text, column)
    parts = body.split(":")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise CellError(f"unreadable {column}") from None
    if len(numbers) == 3:
        hours, minutes, seconds = numbers
    elif len(numbers) == 2:
        # Slurm prints `MM:SS` for short times but `D-HH:MM` once days are given.
        hours, minutes, seconds = (numbers[0], numbers[1], 0.0) if days else (0.0, *numbers)
    elif len(numbers) == 1:
        hours, minutes, seconds = (numbers[0], 0.0, 0.0) if days else (0.0, numbers[0], 0.0)
    else:
        raise CellError(f"unreadable {column}")
    # a clock's minutes and seconds after the first field are under 60, and its hours
    # under 24 once days are given: `99:99:99` is no duration Slurm prints, not 4 days
    if any(n < 0 for n in numbers) or any(n >= 60 for n in numbers[1:]) or (dated and hours >= 24):
        raise CellError(
            f"unreadable {column} (minutes and seconds run 0-59, hours 0-23 after days)"
        )
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    if not math.isfinite(total) or total < 0:
        raise CellError(f"unreadable {column}")
    return total


LONGEST_S = 10 * 365 * 86_400.0  # no job of a cluster trace runs, or arrives, later than this


def invalid_reason(job: TraceJob, *, check_submit: bool = True) -> str | None:
    """Why `job` cannot be simulated (the `JobSpec` rules and the simulator's), or None.

    `check_submit=False` skips the arrival check for readers that shift times afterwards
    (raw epoch arrivals are valid before the shift).
    """
    if not job.name:
        return "no job name"
    if not job.team:
        return "no team"
    if check_submit and not (math.isfinite(job.submit_s) and job.submit_s >= 0):
        return "negative or non-finite submit time"
    if not math.isfinite(job.duration_s) or job.duration_s <= 0:
        return "non-positive duration"
    if job.duration_s > LONGEST_S:
        # a trace's jobs run minutes to months; 1e10 s sampled every 10 min exhausted memory
        return "duration over 10 years"
    if check_submit and job.submit_s > LONGEST_S:
        return "submit time over 10 years after the trace's start"
    forms = [job.gpus is not None, job.gpu_fraction is not None, job.mig_profile is not None]
    if sum(forms) == 0:
        return "no request (none of gpus, gpu_fraction, mig_profile)"
    if sum(forms) > 1:
        return "more than one request (give one of gpus, gpu_fraction, mig_profile)"
    if job.gpus is not None and job.gpus < 1:
        return "gpus below 1"
    if job.gpu_fraction is not None and not 0 < job.gpu_fraction < 1:
        return "gpu_fraction outside (0, 1)"
    if job.mig_profile is not None and not job.mig_profile.strip():
        return "empty mig_profile"
    if job.workers < 1:
        return "workers below 1"
    if job.workers > 1 and job.gpus is None:
        return "several workers of a fraction or MIG slice"
    if job.kind not in JOB_KINDS:
        return f"unknown kind '{job.kind}'"
    for name in ("runtime_estimate_s", "checkpoint_interval_s", "slo_ttft_ms"):
        value = getattr(job, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"non-positive {name}"
    if job.busy_fraction is not None and not 0 <= job.busy_fraction <= 1:
        return "busy_fraction outside [0, 1]"
    return None


def finish(
    source: str,
    rows: int,
    jobs: Sequence[TraceJob],
    tally: Tally,
    nodes: Sequence[TraceNode] = (),
    *,
    shift: bool = True,
    every_job: Sequence[str] = (),
) -> Workload:
    """De-duplicate names, shift arrivals to start at 0, and build the `Workload`.

    `jobs` are valid (`parse_one`). `every_job` are notes that apply to every kept job.

    Every reader ends here so that the report's arithmetic (kept + dropped == rows) and the
    `Workload` invariants (unique names) hold for all formats in the same way.
    """
    valid = list(jobs)
    if shift and valid:
        first = min(j.submit_s for j in valid)
        if first != 0:
            valid = [replace(j, submit_s=j.submit_s - first) for j in valid]
            tally.clean(
                f"arrival times shifted by {-first:+,.0f} s so the first is at 0", len(valid)
            )
    valid = _unique_names(valid, tally)
    for note in every_job:
        tally.clean(note, len(valid))
    report = CleaningReport(source, rows, len(valid), dict(tally.dropped), dict(tally.cleaned))
    return Workload(tuple(valid), report, tuple(nodes))


def _unique_names(jobs: list[TraceJob], tally: Tally) -> list[TraceJob]:
    """Repeated names get `~2`, `~3`, ... so no job is lost; the report counts them."""
    seen = Counter(j.name for j in jobs)
    if all(n == 1 for n in seen.values()):
        return jobs
    taken = set(seen)
    count: Counter[str] = Counter()
    out: list[TraceJob] = []
    for job in jobs:
        count[job.name] += 1
        if seen[job.name] == 1 or count[job.name] == 1:
            out.append(job)
            continue
        k = count[job.name]
        while f"{job.name}~{k}" in taken:
            k += 1
        new = f"{job.name}~{k}"
        taken.add(new)
        out.append(replace(job, name=new))
        tally.clean("renamed a repeated job name (suffix ~2, ~3, ...)")
    return out


def read_csv_jobs(
    path: Path,
    what: str,
    required: Sequence[str],
    parse_row: Callable[[dict[str, str], Tally], TraceJob | None],
    *,
    delimiter: str = ",",
    one_of: Sequence[Sequence[str]] = (),
    quoted: bool = True,
    shift: bool = True,
    nodes: Sequence[TraceNode] = (),
    every_job: Sequence[str] = (),
) -> Workload:
    """Read a CSV-like file row by row; `parse_row` returns a job or tallies a drop itself.

    A `CellError` raised by `parse_row` drops the row with its message as the reason; a job
    that breaks a `TraceJob` rule is dropped with that rule (`invalid_reason`).
    """
    rows = 0
    jobs: list[TraceJob] = []
    tally = Tally()
    with reading(path, what), open_text(path) as stream:
        header, body = csv_rows(
            stream, path, what, required, delimiter=delimiter, one_of=one_of, quoted=quoted
        )
        width = len(header)
        for cells in body:
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue  # blank lines are not rows
            rows += 1
            if too_wide(cells, width):
                tally.drop(TOO_WIDE)
                continue
            padding = [""] * (width - len(cells))  # a short row: missing cells are empty
            record = dict(zip(header, cells + padding, strict=False))
            job = parse_one(tally, partial(parse_row, record, tally), check_submit=not shift)
            if job is not None:
                jobs.append(job)
    return finish(path.name, rows, jobs, tally, nodes, shift=shift, every_job=every_job)
