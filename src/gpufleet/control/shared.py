"""A few words of memory shared by the processes of one server (`gpufleet serve`).

The API runs in several worker processes (control/service.py). Each keeps its own caches,
and two facts must still reach all of them at once:
- a token revoked through one worker's API must be refused by every worker from the next
  request (each worker caches principals for a few seconds: `auth.PrincipalCache`), so
  a revocation bumps an epoch here and every worker drops its cache when it sees a new one;
- `/readyz` says whether the server's reconciler process runs, which only the supervisor
  knows; it writes the flag here.

The memory is a small unlinked temporary file, mapped by each process: the supervisor
creates it and hands its descriptor to the children (`pass_fds`), so nothing outlives the
server and no name can collide. A reader sees a whole 8-byte word or the old one (aligned
stores on the platforms Python runs on); two workers bumping at the same instant may
leave one bump, which is enough: a reader only compares with the epoch it last saw.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from pathlib import Path

SIZE_BYTES = 64
_EPOCH = 0  # offset of the revocation epoch (unsigned 64-bit)
_RECONCILER = 8  # offset of the reconciler-running flag (one byte)


class SharedState:
    """The shared words, mapped from the file descriptor `fd`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, SIZE_BYTES)

    @classmethod
    def create(cls) -> SharedState:
        """New zeroed memory (in the supervisor, before any child starts)."""
        fd, path = tempfile.mkstemp(prefix="gpufleet-shared-")
        Path(path).unlink()  # only the descriptor keeps it: gone with the last process
        os.ftruncate(fd, SIZE_BYTES)
        return cls(fd)

    @property
    def epoch(self) -> int:
        value: int = struct.unpack_from("<Q", self._map, _EPOCH)[0]
        return value

    def bump_epoch(self) -> None:
        struct.pack_into("<Q", self._map, _EPOCH, (self.epoch + 1) % 2**64)

    @property
    def reconciler_running(self) -> bool:
        return self._map[_RECONCILER] == 1

    @reconciler_running.setter
    def reconciler_running(self, running: bool) -> None:
        self._map[_RECONCILER] = 1 if running else 0
