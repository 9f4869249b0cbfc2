"""`gpufleet simulate`'s outputs: the --out check, and a --jobs-out file undone when the
--out folder (`outputs.write_folder`) then fails, so a command that exits with an error
leaves none of its outputs behind. Apart from `cli.simulate`, which stays under the module
size of design 0015."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from gpufleet.outputs import check_writable


def check_out(out: Path | None) -> None:
    """--out is checked before anything runs (the guide says so): a run of minutes must not
    end in 'cannot write there'."""
    if out is not None:
        check_writable(out, "--out", folder=True)


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
