"""Slurm's client commands: how the slurm executor runs them and which flags ask what.

Apart from the executor so that the options (which the batch script reads too) and the
questions put to squeue, scontrol and sacct are written once, and so that a test can hand
the executor a `Runner` of its own and read the command lines without a Slurm. Each query
takes the command to run (`Command`: the executor's, with its environment and timeout) and
reads the answer with `slurm_text`; none keeps state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gpufleet.control.executors.base import CHECKPOINT_SIGNAL, RunKey
from gpufleet.control.executors.slurm_text import (
    JOBCOMP_FIELDS,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    SlurmJob,
    by_name,
    config_value,
    job_name,
    natural_key,
    parse_sacct,
    parse_scontrol_job,
    parse_squeue,
)

SignalScope = Literal["steps", "batch", "full"]
Accounting = Literal["auto", "sacct", "jobcomp", "none"]
SIGNAL_SCOPES: tuple[SignalScope, ...] = ("steps", "batch", "full")
ACCOUNTING: tuple[Accounting, ...] = ("auto", "sacct", "jobcomp", "none")
COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")


@dataclass(frozen=True)
class SlurmOptions:
    """How the executor talks to one Slurm cluster (frozen and picklable: `ServeOptions` carries
    it into the reconciler's process)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    tag: str = "gpufleet"  # job names are <tag>-job-<id>-<attempt>; one tag per gpufleet store
    checkpoint_signal: str = CHECKPOINT_SIGNAL
    signal_scope: SignalScope = "steps"
    accounting: Accounting = "auto"
    sbatch_args: tuple[str, ...] = ()  # anything else the site needs (--mem, --time, ...)
    # (gpufleet node, Slurm node) for the nodes whose names differ (`match_nodes`)
    node_names: tuple[tuple[str, str], ...] = ()
    slurm_conf: str | None = None  # else $SLURM_CONF or Slurm's default
    timeout_s: float = 30.0  # per command


@dataclass(frozen=True, slots=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], Mapping[str, str], float], CommandResult]
# a Runner bound to one cluster's environment and timeout: argv in, result out
Command = Callable[[Sequence[str]], CommandResult]


class SlurmError(RuntimeError):
    """A Slurm command failed (or could not be run)."""


def run_command(
    argv: Sequence[str], extra_env: Mapping[str, str], timeout_s: float
) -> CommandResult:
    """Run one Slurm command with the server's environment plus `extra_env`."""
    try:
        done = subprocess.run(
            list(argv),
            env={**os.environ, **extra_env},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return CommandResult(-1, "", f"{argv[0]}: {exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


def missing_commands(accounting: Accounting = "auto") -> list[str]:
    needed = [*COMMANDS, *(("sacct",) if accounting in ("sacct", "jobcomp") else ())]
    return [c for c in needed if shutil.which(c) is None]


def detect_accounting(cmd: Command) -> Accounting:
    """sacct if slurmdbd answers, else the jobcomp file if Slurm writes one, else none."""
    probe = cmd(["sacct", "-n", "-X", "-P", "-S", "now", "-E", "now", "-o", "JobIDRaw"])
    if probe.returncode == 0:
        return "sacct"
    done = cmd(["scontrol", "show", "config"])
    if done.returncode == 0 and (config_value(done.stdout, "JobCompType") or "").endswith(
        "filetxt"
    ):
        return "jobcomp"
    return "none"


def scontrol_job(cmd: Command, job_id: str) -> SlurmJob | None:
    done = cmd(["scontrol", "show", "job", "-o", job_id])
    return parse_scontrol_job(done.stdout) if done.returncode == 0 else None


def accounted_job(cmd: Command, accounting: Accounting, job_id: str) -> SlurmJob | None:
    """Accounting's record of one job (None without accounting or when it has none)."""
    if accounting == "sacct":
        argv = ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", SACCT_FIELDS]
    elif accounting == "jobcomp":
        argv = ["sacct", "-c", "-n", "-P", "-j", job_id, "-o", JOBCOMP_FIELDS]
    else:
        return None
    done = cmd(argv)
    if done.returncode != 0:
        return None
    return next((j for j in parse_sacct(done.stdout) if j.job_id == job_id), None)


def accounted_job_by_name(cmd: Command, accounting: Accounting, name: str) -> SlurmJob | None:
    """The latest job of that name in accounting (the last 30 days)."""
    fields = SACCT_FIELDS if accounting == "sacct" else JOBCOMP_FIELDS
    mode = "-X" if accounting == "sacct" else "-c"
    argv = ["sacct", mode, "-n", "-P", "--name", name, "-S", "now-30days", "-o", fields]
    done = cmd(argv)
    if done.returncode != 0:
        return None
    jobs = [j for j in parse_sacct(done.stdout) if j.name == name]
    return max(jobs, key=lambda j: natural_key(j.job_id)) if jobs else None


def find_attempt_job(
    cmd: Command, accounting: Accounting, tag: str, key: RunKey
) -> SlurmJob | None:
    """A Slurm job already submitted for this attempt (by its name), if any."""
    name = job_name(tag, key)
    done = cmd(["squeue", "--me", "-h", "-t", "all", "-n", name, "-o", SQUEUE_FORMAT])
    if done.returncode == 0:
        jobs = parse_squeue(done.stdout)
        if jobs:
            return by_name(jobs, tag).get(key)
    if accounting in ("sacct", "jobcomp"):
        return accounted_job_by_name(cmd, accounting, name)
    return None
