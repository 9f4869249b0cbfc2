"""The exported slurm.conf, gres.conf and topology.conf on a real Slurm (issue 24): slurmctld
and every slurmd start on them, Slurm reads back the scheduling settings, nodes, GRES,
partitions and switches the export wrote, `slurmd -G` finds the GRES types slurm.conf
names, the QOS script applies on top, and a job asking for each GPU type by the exported
name runs under a team's account and QOS."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.control.executors.slurm_text import (
    config_value,
    expand_hostlist,
    gres_gpus,
    key_values,
)
from gpufleet.export.model import Fleet, build_fleet
from gpufleet.export.slurm import export_slurm
from gpufleet.sched.preempt import GRACE_PERIOD_S
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.teams import TeamsSpec

from .conftest import running_slurm
from .fake_slurm import FakeSlurm

# small enough for one host: H100 nodes under two leaves, spot L4s under a third (no MIG:
# its GRES come from NVML, which a machine without GPUs does not have)
CLUSTER = {
    "kind": "cluster",
    "name": "pod",
    "topology_levels": ["block", "leaf", "node"],
    "nodes": [
        {
            "name": "dgx",
            "count": 3,
            "accelerator": "h100-sxm5-80gb",
            "gpus_per_node": 8,
            "topology": {"block": "b1", "leaf": ["l1", "l2"]},
        },
        {
            "name": "l4",
            "count": 1,
            "accelerator": "l4",
            "gpus_per_node": 4,
            "capacity": "spot",
            "topology": {"block": "b1", "leaf": "l3"},
        },
    ],
}
# a team per GPU type, so that a job of each type has an account allowed to run it
TEAMS = {
    "kind": "teams",
    "priority_classes": [
        {"name": "critical", "value": 2000, "preemptible": False},
        {"name": "batch", "value": 100},
    ],
    "teams": [
        {
            "name": "Research",
            "quotas": [{"flavor": "h100-sxm5-80gb", "guaranteed_gpus": 16, "limit_gpus": 24}],
            "default_priority": "batch",
        },
        {
            "name": "inference",
            "quotas": [{"flavor": "l4", "guaranteed_gpus": 4}],
            "default_priority": "critical",
        },
    ],
}


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(
        ClusterSpec.model_validate(CLUSTER), TeamsSpec.model_validate(TEAMS), profile="slurm-like"
    )


@pytest.fixture(scope="module")
def files(fleet: Fleet) -> dict[str, str]:
    return dict(export_slurm(fleet).files)


@pytest.fixture(scope="module")
def exported_slurm(
    files: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FakeSlurm]:
    # the start waits until every node is idle: slurmctld and every slurmd loaded the files
    root = tmp_path_factory.mktemp("exported-slurm")
    yield from running_slurm(FakeSlurm(root, exported=files))


def _lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_slurmctld_reads_back_the_scheduling_settings(
    exported_slurm: FakeSlurm, files: dict[str, str]
) -> None:
    shown = exported_slurm.run("scontrol", "show", "config").stdout
    conf = files["slurm.conf"]
    for key in ("PriorityType", "SchedulerType", "PreemptType", "PreemptMode", "TopologyPlugin"):
        wanted = config_value(conf, key)
        assert wanted, key
        assert config_value(shown, key) == wanted, key
    assert config_value(shown, "KillWait") == f"{int(GRACE_PERIOD_S)} sec"
    assert config_value(shown, "PriorityWeightQOS") == config_value(conf, "PriorityWeightQOS")


def test_every_node_has_the_exported_gres_features_and_partition(
    exported_slurm: FakeSlurm, files: dict[str, str]
) -> None:
    wanted: dict[str, tuple[str, str]] = {}
    for line in _lines(files["slurm.conf"], "NodeName="):
        kv = key_values(line)
        for node in expand_hostlist(kv["NodeName"]):
            wanted[node] = (kv["Gres"], kv["Feature"])
    partitions = {
        node: kv["PartitionName"]
        for kv in map(key_values, _lines(files["slurm.conf"], "PartitionName="))
        for node in expand_hostlist(kv["Nodes"])
    }
    shown = exported_slurm.run("scontrol", "show", "node", "-o").stdout
    seen = {}
    for line in shown.splitlines():
        kv = key_values(line)
        seen[kv["NodeName"]] = (kv["Gres"], kv["AvailableFeatures"], kv["Partitions"])
    assert seen == {n: (g, f, partitions[n]) for n, (g, f) in wanted.items()}


def test_slurm_builds_the_exported_switch_tree(
    exported_slurm: FakeSlurm, files: dict[str, str]
) -> None:
    wanted = {key_values(line)["SwitchName"] for line in _lines(files["topology.conf"], "Switch")}
    shown = exported_slurm.run("scontrol", "show", "topology").stdout
    seen = {key_values(line)["SwitchName"] for line in _lines(shown, "SwitchName=")}
    assert seen == wanted
    assert len(wanted) >= 4  # three leaves and the block above them


def test_slurmd_detects_the_gres_types_slurm_conf_names(
    exported_slurm: FakeSlurm, files: dict[str, str]
) -> None:
    """`slurmd -G` prints what a node's slurmd makes of gres.conf: the types and counts must
    be slurm.conf's, or the node is drained ("gres/gpu count reported lower than
    configured") and jobs asking for a type never start."""
    configured: dict[str, tuple[int, str | None]] = {}
    for line in _lines(files["slurm.conf"], "NodeName="):
        kv = key_values(line)
        for node in expand_hostlist(kv["NodeName"]):
            configured[node] = gres_gpus(kv["Gres"])
    for node, (count, gpu_type) in configured.items():
        done = exported_slurm.run("slurmd", "-G", "-N", node)
        out = done.stdout + done.stderr  # Debian's 22.05 logs it: "slurmd: Gres Name=gpu ..."
        found = [
            key_values(line.partition("Gres ")[2])
            for line in out.splitlines()
            if "Gres Name=gpu" in line
        ]
        assert found, out
        assert {f["Type"] for f in found} == {gpu_type}, (node, out)
        assert sum(int(f["Count"]) for f in found) == count, (node, out)


@pytest.fixture(scope="module")
def caps(
    exported_slurm: FakeSlurm, files: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, int]]:
    """The exported sacctmgr.sh applied, root added to every team's account, and each
    account's GPU caps as the script sets them (GrpTRES=gres/gpu=N,gres/gpu:T=N; the plain
    total under "")."""
    script = tmp_path_factory.mktemp("sacctmgr") / "sacctmgr.sh"
    script.write_text(files["sacctmgr.sh"])
    done = subprocess.run(
        ["sh", str(script)],
        check=False,
        env=exported_slurm.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, dict[str, int]] = {}
    for line in files["sacctmgr.sh"].splitlines():
        if line.startswith("sacctmgr -i modify account where name=") and "GrpTRES=" in line:
            account = line.split("name=", 1)[1].split()[0]
            tres = line.split("GrpTRES=", 1)[1].split()[0]
            out[account] = {
                k.removeprefix("gres/gpu").removeprefix(":"): int(v)
                for k, v in (t.split("=") for t in tres.split(","))
            }
    assert len(out) == 2, out
    for account in out:
        # (an error when root is in it already: the fake cluster's own account is research)
        exported_slurm.run(
            "sacctmgr", "-i", "add", "user", "root", f"account={account}", check=False
        )
    return out


def _partition_of(files: dict[str, str], nodes: str) -> str:
    return next(
        p["PartitionName"]
        for p in map(key_values, _lines(files["slurm.conf"], "PartitionName="))
        if set(expand_hostlist(nodes)) <= set(expand_hostlist(p["Nodes"]))
    )


def test_a_job_per_gpu_type_runs_under_a_team_account_and_qos(
    exported_slurm: FakeSlurm,
    files: dict[str, str],
    fleet: Fleet,
    caps: dict[str, dict[str, int]],
    tmp_path: Path,
) -> None:
    for kv in map(key_values, _lines(files["slurm.conf"], "NodeName=")):
        _, gpu_type = gres_gpus(kv["Gres"])
        assert gpu_type is not None
        team = next(a for a, c in caps.items() if c.get(gpu_type, 0) > 0)
        # the highest class the team may use (its account has no QOS above it)
        qos = max(
            (c for c in fleet.priority_classes if c.value <= _cap_value(fleet, team)),
            key=lambda c: c.value,
        ).name
        out = exported_slurm.run(
            "sbatch",
            "--parsable",
            "--wait",
            f"--partition={_partition_of(files, kv['NodeName'])}",
            f"--account={team}",
            f"--qos={qos}",
            f"--gres=gpu:{gpu_type}:1",
            f"--output={tmp_path}/%j.out",
            "--wrap=true",
            timeout_s=120,
        )
        job_id = out.stdout.strip().split(";")[0]
        shown = exported_slurm.run("scontrol", "show", "job", "-o", job_id).stdout
        assert "JobState=COMPLETED" in shown, shown


def _cap_value(fleet: Fleet, account: str) -> int:
    team = next(t for t in fleet.teams if t.name.lower() == account)
    cap = team.max_priority_class or team.default_priority
    return next(c.value for c in fleet.priority_classes if c.name == cap)


def test_gpus_asked_for_without_a_type_stay_within_the_teams_quota(
    exported_slurm: FakeSlurm,
    files: dict[str, str],
    fleet: Fleet,
    caps: dict[str, dict[str, int]],
    tmp_path: Path,
) -> None:
    """Slurm counts `--gres=gpu:N` against plain gres/gpu only, never the typed caps: with
    the export before the fix, research (no L4 quota, gres/gpu:l4=0) ran gpu:1 and gpu:4
    jobs on the L4 partition (a review). Such a job is now refused or held, never run; a
    team with the quota runs one."""
    for kv in map(key_values, _lines(files["slurm.conf"], "NodeName=")):
        _, gpu_type = gres_gpus(kv["Gres"])
        assert gpu_type is not None
        partition = _partition_of(files, kv["NodeName"])
        for account, cap in caps.items():
            qos = next(
                c.name for c in fleet.priority_classes if c.value <= _cap_value(fleet, account)
            )
            out = exported_slurm.run(
                "sbatch",
                "--parsable",
                f"--partition={partition}",
                f"--account={account}",
                f"--qos={qos}",
                "--gres=gpu:1",
                f"--output={tmp_path}/%j.out",
                "--wrap=true",
                check=False,
            )
            if cap.get(gpu_type, 0) > 0:
                assert out.returncode == 0, out.stderr
                assert _final_state(exported_slurm, out.stdout) == "COMPLETED", account
            elif out.returncode == 0:  # accepted, but held: it must never start
                assert _final_state(exported_slurm, out.stdout) == "PENDING", (account, partition)
                exported_slurm.run("scancel", out.stdout.strip().split(";")[0])


def _final_state(slurm: FakeSlurm, parsable: str, timeout_s: float = 30) -> str:
    """A job's state once the scheduler has looked at it: COMPLETED (or another end), or
    PENDING with a reason that holds it (not waiting for its turn or for resources)."""
    job_id = parsable.strip().split(";")[0]
    deadline = time.monotonic() + timeout_s
    while True:
        kv = key_values(slurm.run("scontrol", "show", "job", "-o", job_id).stdout)
        state, reason = kv.get("JobState", ""), kv.get("Reason", "")
        held = state == "PENDING" and reason not in ("None", "Priority", "Resources")
        if held or state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            return state
        if time.monotonic() > deadline:
            return f"{state} ({reason}) after {timeout_s:g} s"
        time.sleep(0.5)
