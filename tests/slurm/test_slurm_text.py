"""Reading Slurm's output (no Slurm needed): lines recorded from Debian's Slurm 22.05.8,
run with ``SLURM_TIME_FORMAT=%s`` as the executor runs every command."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.control.executors.base import RunKey
from gpufleet.control.executors.slurm_text import (
    by_name,
    exit_code,
    expand_hostlist,
    gres_gpus,
    group_prefix,
    job_name,
    key_values,
    natural_key,
    node_state,
    parse_nodes,
    parse_sacct,
    parse_scontrol_job,
    parse_squeue,
    run_key,
    tres_gpus,
)

NODE_LINE = (
    "NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.54 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8 NodeAddr=127.0.0.1 "
    "NodeHostName=localhost Port=43727 Version=22.05.8 OS=Linux 6.18.44-fc-v1045 #1 SMP "
    "PREEMPT_DYNAMIC @0  RealMemory=4000 AllocMem=0 FreeMem=22227 Sockets=16 Boards=1 "
    "State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  "
    "BootTime=2026-12-01T19:46:04 SlurmdStartTime=2026-12-01T20:12:15 "
    "LastBusyTime=2026-12-01T20:12:16 CfgTRES=cpu=16,mem=4000M,billing=16,gres/gpu=8 "
    "AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s"
)
DOWN_LINE = (
    "NodeName=n2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=16 CPUTot=16 "
    "Gres=gpu:h100:8 NodeAddr=10.0.0.2 NodeHostName=gpu02 State=DOWN+NOT_RESPONDING "
    "Partitions=gpu,debug Reason=test [root@1796157841]"
)
JOB_LINE = (
    "JobId=1 JobName=gpufleet-job-1-1 UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901759 Nice=0 Account=root QOS=normal JobState=COMPLETED Reason=None "
    "Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:01 "
    "TimeLimit=365-00:00:00 TimeMin=N/A SubmitTime=1796155943 EligibleTime=1796155943 "
    "AccrueTime=Unknown StartTime=1796155943 EndTime=1796155944 Deadline=N/A SuspendTime=None "
    "SecsPreSuspend=0 LastSchedEval=1796155943 Scheduler=Backfill Partition=gpu "
    "AllocNode:Sid=localhost:5792 ReqNodeList=n[2,4] ExcNodeList=(null) NodeList=n[2,4] "
    "BatchHost=n2 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=2,node=2,billing=2,gres/gpu=16 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* "
    "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
    "DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=/tmp/slx/jobs/t1.sh WorkDir=/tmp/slx/jobs StdErr=/tmp/slx/jobs/t1.out "
    "StdIn=/dev/null StdOut=/tmp/slx/jobs/t1.out Power= TresPerNode=gres:gpu:h100:8"
)
SQUEUE = """\
9|wrap|CANCELLED|None|1796156100|1796156101|n1
10|wrap|CANCELLED|JobHeldUser|1796156101|1796156101|
1|gpufleet-job-1-1|COMPLETED|None|1796155943|1796155944|n[2,4]
11|gpufleet-job-3-2|PENDING|JobHeldUser|N/A|N/A|
"""
SACCT = """\
6|wrap|FAILED|3:0|1796156100|1796156100|0|n1|billing=1,cpu=1,node=1
9|wrap|CANCELLED by 0|0:0|1796156100|1796156101|1|n1|billing=1,cpu=1,node=1
10|wrap|CANCELLED by 0|0:0|None|1796156101|0|None assigned|
1|gpufleet-job-1-1|COMPLETED|0:0|1796155943|1796155944|1|n[2,4]|billing=2,cpu=2,gres/gpu=16,node=2
"""


def test_a_node_line() -> None:
    (node,) = parse_nodes(NODE_LINE)
    assert (node.name, node.addr, node.gpus, node.gpu_type) == ("n1", "127.0.0.1", 8, "h100")
    assert (node.cpus, node.partitions, node.state, node.reason) == (16, ("gpu",), "up", "")
    assert key_values(NODE_LINE)["OS"] == "Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0"


def test_a_down_node_with_its_reason() -> None:
    (node,) = parse_nodes(DOWN_LINE)
    assert node.state == "down"
    assert node.reason == "test"  # without Slurm's "[user@time]" stamp
    assert node.partitions == ("gpu", "debug")


def test_a_finished_job_from_scontrol() -> None:
    job = parse_scontrol_job(JOB_LINE)
    assert job is not None
    assert (job.job_id, job.name, job.state, job.exit_code) == (
        "1",
        "gpufleet-job-1-1",
        "COMPLETED",
        0,
    )
    assert (job.start_s, job.end_s, job.nodes, job.gpus) == (
        1796155943,
        1796155944,
        ("n2", "n4"),
        16,
    )
    assert job.terminal
    assert job.ran
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified") is None


def test_squeue_lines() -> None:
    jobs = {j.job_id: j for j in parse_squeue(SQUEUE)}
    assert jobs["9"].ran
    assert not jobs["10"].ran  # cancelled while held: a start time, but no node
    assert jobs["11"].held
    assert jobs["11"].start_s is None
    assert not jobs["11"].terminal
    assert jobs["1"].nodes == ("n2", "n4")
    assert set(by_name(list(jobs.values()), "gpufleet")) == {RunKey(1, 1), RunKey(3, 2)}


def test_sacct_lines() -> None:
    jobs = {j.job_id: j for j in parse_sacct(SACCT)}
    assert jobs["6"].exit_code == 3
    assert jobs["9"].state == "CANCELLED"  # "CANCELLED by 0"
    assert jobs["10"].start_s is None
    assert jobs["10"].nodes == ()
    assert jobs["1"].gpus == 16
    assert jobs["1"].elapsed_s == 1
    assert jobs["6"].gpus == 0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param("0:0", 0, id="success"),
        pytest.param("3:0", 3, id="exit-3"),
        pytest.param("143:0", 143, id="own-sigterm-handler"),
        pytest.param("0:15", -15, id="killed-by-sigterm"),
        pytest.param("0:9", -9, id="killed"),
        pytest.param("", 0, id="empty"),
    ],
)
def test_exit_codes(text: str, code: int) -> None:
    assert exit_code(text) == code


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        pytest.param("IDLE", "up", id="idle"),
        pytest.param("MIXED", "up", id="mixed"),
        pytest.param("ALLOCATED+COMPLETING", "up", id="completing"),
        pytest.param("IDLE*", "up", id="not-responding-yet"),
        pytest.param("DOWN", "down", id="down"),
        pytest.param("DOWN*", "down", id="down-not-responding"),
        pytest.param("DOWN+DRAIN", "down", id="down-and-drained"),
        pytest.param("FUTURE", "down", id="future"),
        pytest.param("IDLE+DRAIN", "drain", id="drained"),
        pytest.param("MIXED+DRAIN", "drain", id="draining"),
        pytest.param("ALLOCATED+FAIL", "drain", id="failing"),
        pytest.param("IDLE+MAINTENANCE", "drain", id="maintenance"),
        pytest.param("IDLE+POWERED_DOWN", "drain", id="powered-down"),
        pytest.param("IDLE+REBOOT_REQUESTED", "drain", id="reboot"),
    ],
)
def test_node_states(raw: str, state: str) -> None:
    assert node_state(raw) == state


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param("n1", ["n1"], id="one"),
        pytest.param("n[2,4]", ["n2", "n4"], id="list"),
        pytest.param("n[1-3,7]", ["n1", "n2", "n3", "n7"], id="range"),
        pytest.param("gpu-a[01-02],cpu9", ["gpu-a01", "gpu-a02", "cpu9"], id="padded-and-more"),
        pytest.param("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"], id="two-levels"),
        pytest.param("", [], id="empty"),
        pytest.param("(null)", [], id="null"),
    ],
)
def test_host_lists(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("gres", "gpus", "gpu_type"),
    [
        pytest.param("gpu:h100:8", 8, "h100", id="typed"),
        pytest.param("gpu:8", 8, None, id="untyped"),
        pytest.param("gpu:h100:8(S:0-1)", 8, "h100", id="sockets"),
        pytest.param("gpu:a100:4,gpu:v100:2", 6, None, id="two-types"),
        pytest.param("gpu:h100:4,shard:h100:16", 4, "h100", id="shards-are-not-gpus"),
        pytest.param("(null)", 0, None, id="none"),
    ],
)
def test_gres(gres: str, gpus: int, gpu_type: str | None) -> None:
    assert gres_gpus(gres) == (gpus, gpu_type)


def test_tres() -> None:
    assert tres_gpus("billing=2,cpu=2,gres/gpu=16,node=2") == 16
    assert tres_gpus("billing=2,cpu=2,gres/gpu=16,gres/gpu:h100=16,node=2") == 16
    assert tres_gpus("cpu=1") == 0


@given(
    tag=st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
    job=st.integers(0, 10**12),
    attempt=st.integers(0, 10**6),
)
def test_job_names_round_trip(tag: str, job: int, attempt: int) -> None:
    key = RunKey(job, attempt)
    assert run_key(tag, job_name(tag, key)) == key
    assert run_key(tag + "x", job_name(tag, key)) is None  # another tag's job


def test_names_that_are_not_attempts() -> None:
    for name in (
        "wrap",
        "gpufleet-job-1",
        "gpufleet-job-x-1",
        "gpufleet-job-1-2-3",
        "gpufleet-job--1",
    ):
        assert run_key("gpufleet", name) is None, name


def test_node_name_order_and_groups() -> None:
    assert sorted(["n10", "n2", "n1"], key=natural_key) == ["n1", "n2", "n10"]
    assert [group_prefix(n) for n in ("n12", "gpu-a-03", "node_7", "login")] == [
        "n",
        "gpu-a",
        "node",
        "login",
    ]
