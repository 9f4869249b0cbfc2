"""A command's output folder, written whole or not at all (plan's reports, simulate's
results): each file goes to NAME.partial, is synced, and all are renamed over their names
only once every one is written, so a reader never sees half a file and a failure leaves no
partial behind. A folder that cannot be made or written is the user's to change."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gpufleet.errors import UserError, os_reason


def write_folder(out_dir: Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Write `files` (name -> bytes) into `out_dir` (created); returns the paths by name.
    Raises `UserError` naming `out_dir` (an `--out` option) when the OS refuses."""
    partials: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            partial = out_dir / f"{name}.partial"
            partials.append(partial)
            with partial.open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        return {name: (out_dir / f"{name}.partial").replace(out_dir / name) for name in files}
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there ({os_reason(exc)})") from None
    finally:
        for partial in partials:
            with contextlib.suppress(OSError):  # (gone, or its folder is what failed)
                partial.unlink()


def check_writable(path: Path, option: str, *, folder: bool) -> None:
    """Refuse, before a long command runs, an output it could not write at its end: a folder
    (`folder`) or a file's folder that cannot be made or written there (under a file, in
    /proc, on a read-only disk). Probes by making and removing a temporary entry in the
    nearest folder that exists, so nothing is left behind."""
    if folder and path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: exists and is not a folder")
    if not folder and path.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    probe = path if folder else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{option} {path}: cannot write there ({probe} is not a folder)")
    try:
        with tempfile.TemporaryDirectory(dir=probe, prefix=".gpufleet-probe-"):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise UserError(
            f"{option} {path}: cannot write there (creating a file in {probe}: {why})"
        ) from None
