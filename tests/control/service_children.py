"""Targets for `Supervisor` tests: children import them by module name."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpufleet.control.service import ChildConfig, child_setup


def exits_at_once(config: ChildConfig, ready: Callable[[], None]) -> None:
    """Records its start (one line per start in the file named by the cluster path), exits 3."""
    child_setup(config, "test")
    with Path(config.cluster_path).open("a") as out:
        out.write(f"{os.getpid()}\n")
    sys.exit(3)


def sleeps(config: ChildConfig, ready: Callable[[], None]) -> None:
    """Writes its pid, then sleeps until SIGTERM (or its parent's death)."""
    stop = child_setup(config, "test")
    ready()
    Path(config.cluster_path).write_text(str(os.getpid()))
    while not stop.wait(0.1):
        time.sleep(0)
