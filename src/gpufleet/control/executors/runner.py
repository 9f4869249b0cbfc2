"""The wrapper process around one worker of a local attempt.

Run as ``python -m gpufleet.control.executors.runner --dir RUN_DIR --rank R -- CMD...``
(the local executor runs this file by path with ``python -I`` so that the job's
``PYTHONPATH`` cannot break it). It exists because the server that launched a job
may die while the job runs: the runner, not the server, waits for the child and
writes the exit record, so a restarted server still learns how the job ended.

Files it writes in RUN_DIR (all atomically: a temporary file, then ``os.replace``):

* ``pid-<rank>.json`` at start: its own pid, the child's pid and both start times
  (``/proc/<pid>/stat`` field 22), so that a pid reused by another process is not
  mistaken for ours;
* ``exit-<rank>.json`` at the end: ``{"exit_code": int, "ended_s": float}``; a negative
  code means the child was killed by that signal, 127 that CMD was not found and
  126 that it could not be executed (the reason then goes to ``error-<rank>.txt``).

SIGUSR1, SIGTERM and SIGINT sent to the runner are forwarded to the child, which is
how the executor's checkpoint and stop requests reach the job. This module uses the
standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

FORWARDED_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
EXIT_NOT_FOUND = 127  # as a shell reports a command it cannot find
EXIT_NOT_EXECUTABLE = 126  # as a shell reports a command it cannot run


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The two fields of ``/proc/<pid>/stat`` that tell whether a pid is still ours."""

    state: str  # "R", "S", ..., "Z" (zombie: exited, not yet reaped), "X" (dead)
    start_ticks: int  # field 22: start time in clock ticks after boot


def read_proc_stat(pid: int) -> ProcStat | None:
    """The state and start time of `pid`, or None if there is no such process (or no /proc)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may itself hold spaces or ")"
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(state=rest[0], start_ticks=int(rest[19]))  # fields 3 and 22
    except (IndexError, ValueError):
        return None


def process_alive(pid: int, start_ticks: int | None) -> bool:
    """Whether `pid` runs and is the same process that had `start_ticks` (None: unknown).

    A zombie counts as gone: it has exited, only its parent has not reaped it yet.
    Without /proc (not Linux) this falls back to ``kill(pid, 0)``, which cannot
    detect a reused pid.
    """
    stat = read_proc_stat(pid)
    if stat is None:
        if Path("/proc/self/stat").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if stat.state in ("Z", "X"):
        return False
    return start_ticks is None or stat.start_ticks == start_ticks


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the whole new one, never half.

    The data is fsynced before the rename so that a machine crash cannot leave an
    empty file under the final name.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def write_json_atomic(path: Path, data: Any) -> None:
    """`write_atomic` for a JSON document."""
    write_atomic(path, json.dumps(data, sort_keys=True))


def exit_record_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"exit-{rank}.json"


def pid_record_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"pid-{rank}.json"


def error_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"error-{rank}.txt"


def _parse_args(argv: Sequence[str]) -> tuple[Path, int, list[str]]:
    args = list(argv)
    if "--" not in args:
        raise SystemExit("usage: runner --dir RUN_DIR --rank R -- CMD...")
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="gpufleet.control.executors.runner")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--rank", required=True, type=int)
    ns = parser.parse_args(args[:split])
    command = args[split + 1 :]
    if not command:
        raise SystemExit("runner: no command after --")
    return ns.dir, ns.rank, command


def run(run_dir: Path, rank: int, command: Sequence[str]) -> int:
    """Start `command`, forward signals to it, wait, and record how it ended.

    Returns the child's exit code (negative: killed by that signal).
    """
    child: subprocess.Popen[bytes] | None = None
    pending: list[int] = []  # signals that arrived before the child existed

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child is None:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)

    try:
        child = subprocess.Popen(list(command))
    except OSError as exc:
        code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        message = f"cannot execute {command[0]!r}: {exc}\n"
        write_atomic(error_path(run_dir, rank), message)
        sys.stderr.write(f"runner: {message}")
        sys.stderr.flush()
        write_json_atomic(
            exit_record_path(run_dir, rank), {"exit_code": code, "ended_s": time.time()}
        )
        return code

    own, kid = read_proc_stat(os.getpid()), read_proc_stat(child.pid)
    write_json_atomic(
        pid_record_path(run_dir, rank),
        {
            "runner_pid": os.getpid(),
            "runner_start_ticks": own.start_ticks if own else None,
            "child_pid": child.pid,
            "child_start_ticks": kid.start_ticks if kid else None,
        },
    )
    for signum in pending:
        forward(signum, None)
    code = child.wait()  # PEP 475: retried after each forwarded signal
    write_json_atomic(exit_record_path(run_dir, rank), {"exit_code": code, "ended_s": time.time()})
    return code


def main(argv: Sequence[str] | None = None) -> int:
    run_dir, rank, command = _parse_args(sys.argv[1:] if argv is None else argv)
    code = run(run_dir, rank, command)
    return code if code >= 0 else 128 - code  # the shell's convention for "killed by N"


if __name__ == "__main__":
    sys.exit(main())
