"""Writing `gpufleet simulate`'s outputs whole or not at all: the --out folder's files, and a
--jobs-out file undone when a later output fails (a command that exits with an error leaves
none of its outputs behind). Apart from `cli.simulate`, which stays under the module size of
design 0015."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from gpufleet.errors import UserError, os_reason


def check_out(out: Path | None) -> None:
    if out is not None and out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")


def write_atomic(out_dir: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write every file into `out_dir` (created) whole or not at all.

    Each goes to NAME.partial, is synced and only then renamed over NAME, once all are
    written: a reader never sees half a file, and a failure leaves no partial behind. A
    folder that cannot be made or written is the user's to change (`UserError`).
    """
    partials = {name: out_dir / f"{name}.partial" for name in files}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            with partials[name].open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        written = []
        for name, partial in partials.items():
            written.append(partial.replace(out_dir / name))
        return written
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there ({os_reason(exc)})") from None
    finally:
        for partial in partials.values():
            with contextlib.suppress(OSError):  # (gone, or its folder is what failed)
                partial.unlink()


@contextlib.contextmanager
def undone_on_failure(written: Path | None) -> Iterator[None]:
    """Remove `written` (a --jobs-out file) if the block fails: a command that exits with an
    error leaves none of its outputs behind."""
    try:
        yield
    except BaseException:
        if written is not None:
            written.unlink(missing_ok=True)
        raise
