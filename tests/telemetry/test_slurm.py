"""Slurm's per-job GPU accounting, on recorded `sstat`/`sacct` output (see data/README.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.telemetry.slurm import (
    NO_ACCOUNTING,
    SSTAT_FIELDS,
    SlurmCollector,
    SlurmJobRef,
    amount,
    finished_usage,
    parse_steps,
    parse_tres,
)

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str = ""


class Recorded:
    """A `Command` answering from recorded output, keeping the command lines it was given."""

    def __init__(self, stdout: str, returncode: int = 0, stderr: str = "") -> None:
        self.result = Result(returncode, stdout, stderr)
        self.argv: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> Result:
        self.argv.append(list(argv))
        return self.result


JOBS = [SlurmJobRef("812345", "41", 8), SlurmJobRef("812346", "42", 1)]


def test_tres_strings_and_amounts() -> None:
    assert parse_tres("cpu=00:01:02,gres/gpu:h100=4,gres/gpuutil=87") == {
        "cpu": "00:01:02",
        "gres/gpu:h100": "4",
        "gres/gpuutil": "87",
    }
    assert parse_tres("") == {}
    assert [amount(t) for t in ("87", "16G", "1.5K", "00:01:02", "")] == [
        87,
        16 * 2**30,
        1536,
        None,
        None,
    ]


def test_sstat_steps() -> None:
    steps = parse_steps((DATA / "sstat_gpu.txt").read_text(), SSTAT_FIELDS)
    assert [(s.job, s.step, s.gpuutil_pct) for s in steps] == [
        ("812345", "extern", 0),
        ("812345", "batch", 0),
        ("812345", "0", 744),  # the total over tasks, not the per-task average
        ("812346", "batch", 3),
    ]
    assert steps[2].nodes == "gpu-a[01-02]"
    assert steps[2].gpumem_bytes == 274877906944


def test_running_jobs_give_one_job_level_sample_each() -> None:
    cmd = Recorded((DATA / "sstat_gpu.txt").read_text())
    collector = SlurmCollector(cmd, lambda: JOBS)
    samples = collector.collect(50.0)
    assert cmd.argv == [
        [
            "sstat",
            "-a",
            "-n",
            "-P",
            "--noconvert",
            "-o",
            "JobID,NodeList,TRESUsageInAve,TRESUsageInTot",
            "-j",
            "812345,812346",
        ]
    ]
    assert [(s.job_id, s.gpu_index, s.gpu_count, s.sm_util_pct) for s in samples] == [
        ("41", None, 8, 93.0),  # 744 % over 8 GPUs
        ("42", None, 1, 3.0),
    ]
    s = samples[0]
    assert (s.node, s.source, s.holder, s.time_s) == (
        "gpu-a[01-02]",
        "slurm",
        "slurm job 812345",
        50.0,
    )
    assert s.mem_used_bytes == 274877906944
    assert s.power_w is None  # Slurm does not say
    assert collector.reason == ""


def test_a_site_without_gpu_accounting_gives_nothing_and_says_use_dcgm() -> None:
    collector = SlurmCollector(Recorded((DATA / "sstat_no_gpu.txt").read_text()), lambda: JOBS)
    assert collector.collect(1.0) == []
    assert collector.reason == NO_ACCOUNTING
    assert "use DCGM" in NO_ACCOUNTING


def test_no_running_jobs_runs_no_command() -> None:
    cmd = Recorded("")
    assert SlurmCollector(cmd, lambda: [SlurmJobRef("9", None, 0)]).collect(1.0) == []
    assert cmd.argv == []


def test_a_failing_sstat_is_the_reason() -> None:
    collector = SlurmCollector(Recorded("", 1, "sstat: error: no steps running"), lambda: JOBS)
    assert collector.collect(1.0) == []
    assert collector.reason == "sstat failed: sstat: error: no steps running"


def test_finished_jobs_weight_each_step_by_its_time() -> None:
    cmd = Recorded((DATA / "sacct_gpu.txt").read_text())
    usage, reason = finished_usage(cmd, ["812340", "812341"])
    assert reason == ""
    assert cmd.argv[0][:5] == ["sacct", "-n", "-P", "--noconvert", "-o"]
    job = usage["812340"]
    assert (job.gpus, job.elapsed_s) == (16, 7200)
    # (1480 % x 3600 s + 800 % x 1800 s) / (16 GPUs x 7200 s)
    assert job.sm_util_pct == pytest.approx(58.75)
    assert job.gpu_mem_bytes == 128 * 2**30
    assert "812341" not in usage  # CPU only


def test_finished_jobs_without_gpu_tres() -> None:
    text = "\n".join(
        line for line in (DATA / "sacct_gpu.txt").read_text().splitlines() if "gpuutil" not in line
    )
    assert finished_usage(Recorded(text), ["812340"]) == ({}, NO_ACCOUNTING)
    assert finished_usage(Recorded("", 1, "slurmdbd down"), ["1"]) == (
        {},
        "sacct failed: slurmdbd down",
    )
