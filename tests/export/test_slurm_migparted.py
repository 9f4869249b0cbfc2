"""Slurm and mig-parted: host lists, the topology tree, QOS preemption, and configs checked
by Slurm's own parser where Slurm is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.errors import UserError
from gpufleet.export.migparted import config_names, mig_configs
from gpufleet.export.slurm import duration, gres_type, hostlist, topology_switches

from .scenarios import SCENARIOS, export, fleet_of

SCONTROL = shutil.which("scontrol")
needs_slurm = pytest.mark.skipif(SCONTROL is None, reason="Slurm (scontrol) is not installed")


@pytest.mark.parametrize(
    ("names", "compressed"),
    [
        (["h100-0", "h100-1", "h100-2"], "h100-[0-2]"),
        (["n1", "n3", "n4", "n5", "n9"], "n[1,3-5,9]"),
        (["gpu-7"], "gpu-7"),
        (["a-0", "a-1", "b-0", "login"], "a-[0-1],b-0,login"),
        (["x-10", "x-9", "x-11"], "x-[9-11]"),
    ],
)
def test_hostlist(names: list[str], compressed: str) -> None:
    assert hostlist(names) == compressed


@pytest.mark.parametrize(
    ("seconds", "text"), [(600, "00:10:00"), (7 * 86400, "7-00:00:00"), (90061, "1-01:01:01")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_gres_types() -> None:
    assert gres_type("h100-sxm5-80gb") == "h100_sxm5_80gb"
    assert gres_type("a100-sxm4-80gb", "1g.10gb+me") == "a100_sxm4_80gb_1g.10gb.me"


def files(scenario: str) -> dict[str, str]:
    return dict(SCENARIOS[scenario].bundle("slurm").files)


def test_slurm_conf_follows_the_profile() -> None:
    default = files("sched-mig")["slurm.conf"]
    for line in (
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=100000",
        "SchedulerType=sched/backfill",
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        "PreemptExemptTime=00:10:00",
        "TopologyPlugin=topology/tree",
        "NodeName=a100-[0-7] Gres=gpu:a100_sxm4_80gb_1g.10gb:16,"
        "gpu:a100_sxm4_80gb_2g.20gb:8,gpu:a100_sxm4_80gb_3g.40gb:8",
    ):
        assert line in default.splitlines() or any(
            ln.startswith(line) for ln in default.splitlines()
        ), line
    slurm_like = files("h100-no-mig")["slurm.conf"]  # multifactor: the registry's weights
    assert "PriorityWeightAge=1000\nPriorityWeightFairshare=10000" in slurm_like
    fifo = files("one-team")["slurm.conf"]  # strict FIFO, no preemption
    assert "PriorityType=priority/basic" in fifo
    assert "SchedulerType=sched/builtin" in fifo
    assert "PreemptType=preempt/none" in fifo
    assert "TopologyPlugin" not in fifo
    assert "topology.conf" not in files("one-team")


def test_qos_preempt_only_lower_preemptible_classes() -> None:
    script = files("h100-no-mig")["sacctmgr.sh"]
    lines: dict[str, str] = {}
    for ln in script.splitlines():
        if "modify qos" in ln:
            name = ln.split(" where name=")[1].split()[0]
            lines[name] = lines.get(name, "") + ln + "\n"
    assert "Preempt=scavenger\n" in lines["serving"]
    assert "Preempt=scavenger,serving" not in lines["critical"]  # serving is not preemptible
    assert "Preempt=scavenger,batch-high\n" in lines["critical"]
    assert "Preempt=" not in lines["scavenger"]  # emptied by removal: Slurm 22.05 (issue 24)
    assert "Preempt-=serving,batch-high,critical" in lines["scavenger"]
    assert script.index("Preempt-=") < script.index("Preempt=scavenger")  # emptied, then set
    assert "set -eu" in script


def test_accounts_caps_and_shares() -> None:
    """Plain gres/gpu is capped too, at the sum of the typed caps: Slurm counts a request
    without a type (--gres=gpu:4) against it alone. Only the QOS up to the team's cap."""
    script = files("h100-no-mig")["sacctmgr.sh"]
    assert (
        "set Fairshare=6 GrpTRES=gres/gpu=48,gres/gpu:h100_sxm5_80gb=48 "
        "QOS=batch-high,scavenger,serving DefaultQOS=batch-high"
    ) in script  # weights 3 : 1 : 1.5
    assert "add account pretrain-llm-70b Parent=pretrain" in script


def _account_settings(script: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for ln in script.splitlines():
        if ln.startswith("sacctmgr -i modify account where name=") and "GrpTRES=" in ln:
            name = ln.split("name=", 1)[1].split()[0]
            out[name] = dict(kv.split("=", 1) for kv in ln.split(" set ", 1)[1].split())
    return out


def test_each_account_gets_only_the_qos_up_to_its_teams_cap() -> None:
    """gpufleet's control plane refuses a class above a team's max_priority_class (default:
    its default class); every account used to get every QOS (a review)."""
    settings = _account_settings(files("h100-no-mig")["sacctmgr.sh"])
    assert settings["pretrain"]["QOS"] == "batch-high,scavenger,serving"  # cap batch-high
    assert settings["finetune"]["QOS"] == "scavenger"  # cap: its default, scavenger
    assert settings["serving"]["QOS"] == "scavenger,serving"
    fleet = fleet_of(
        {"nodes": [{"name": "g", "count": 1, "accelerator": "l4"}]},
        {
            "priority_classes": [
                {"name": "top", "value": 100, "preemptible": False},
                {"name": "mid", "value": 50},
                {"name": "low", "value": 1},
            ],
            "teams": [
                {"name": "a", "quota": {"l4": 4}, "default_priority": "low"},
                {
                    "name": "b",
                    "quota": {"l4": 4},
                    "default_priority": "low",
                    "max_priority_class": "top",
                },
            ],
        },
    )
    settings = _account_settings(export(fleet, "slurm").files["sacctmgr.sh"])
    assert settings["a"]["QOS"] == "low"
    assert settings["b"]["QOS"] == "low,mid,top"
    assert settings["b"]["DefaultQOS"] == "low"


def test_a_cap_below_the_default_class_is_refused() -> None:
    with pytest.raises(UserError, match=r"max priority class low .* is below its default class"):
        fleet_of(
            {"nodes": [{"name": "g", "count": 1, "accelerator": "l4"}]},
            {
                "priority_classes": [{"name": "high", "value": 9}, {"name": "low", "value": 1}],
                "teams": [
                    {
                        "name": "a",
                        "quota": {"l4": 4},
                        "default_priority": "high",
                        "max_priority_class": "low",
                    }
                ],
            },
        )


def test_partitions_admit_only_the_accounts_with_a_quota_for_their_gpus() -> None:
    """A job asking for GPUs without a type escapes the typed caps (Slurm counts it against
    plain gres/gpu only): a team with no L4 quota ran `--gres=gpu:4` on the L4 partition
    (a review). Projects' sub-accounts are listed with their team's."""
    partitions = {
        ln.split()[0].removeprefix("PartitionName="): ln.split("AllowAccounts=", 1)[1]
        for ln in files("sched-mig")["slurm.conf"].splitlines()
        if ln.startswith("PartitionName=")
    }
    assert partitions == {
        "h100_sxm5_80gb": "research,prod",
        "a100_sxm4_80gb": "prod",
        "l4_spot": "root",  # no team has an L4 quota: administrators only
    }
    conf = files("h100-no-mig")["slurm.conf"]
    assert "AllowAccounts=pretrain,pretrain-llm-70b,pretrain-llm-405b,finetune,serving" in conf
    settings = _account_settings(files("sched-mig")["sacctmgr.sh"])
    for account, s in settings.items():
        caps = dict(t.split("=") for t in s["GrpTRES"].split(","))
        typed = sum(int(n) for k, n in caps.items() if k.startswith("gres/gpu:"))
        assert int(caps["gres/gpu"]) == typed, account
    tres = next(
        ln for ln in files("sched-mig")["slurm.conf"].splitlines() if "AccountingStorageTRES" in ln
    )
    assert "=gres/gpu," in tres


def test_topology_tree_with_unplaced_and_partial_nodes() -> None:
    fleet = fleet_of(
        {
            "nodes": [
                {"name": "a", "count": 2, "accelerator": "l4", "topology": "b1/l1"},
                {"name": "b", "count": 1, "accelerator": "l4", "topology": {"block": "b1"}},
                {"name": "c", "count": 1, "accelerator": "l4"},
            ]
        },
        {"teams": [{"name": "t", "quota": {"l4": 4}}]},
    )
    tree = topology_switches(fleet)
    assert tree[("b1", "l1")] == ([], ["a-0", "a-1"])
    assert tree[("b1", "nodes")] == ([], ["b-0"])  # b1 holds a switch and a node
    assert tree[("unplaced",)] == ([], ["c-0"])
    assert sorted(tree[()][0]) == [("b1",), ("unplaced",)]
    conf = export(fleet, "slurm").files["topology.conf"]
    assert "SwitchName=cluster Switches=b1,unplaced" in conf


@needs_slurm
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_slurm_parses_the_conf_and_expands_the_host_lists(scenario: str, tmp_path: Path) -> None:
    """scontrol reads slurm.conf with Slurm's parser (an unknown key is fatal) before it
    expands a host list; the node lists must expand to gpufleet's nodes."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmctldHost=localhost\n" + files(scenario)["slurm.conf"])
    fleet = SCENARIOS[scenario].fleet()
    for group in fleet.cluster_spec.node_groups:
        nodes = [n.name for n in fleet.cluster.nodes if n.group == group.name]
        done = subprocess.run(
            [str(SCONTROL), "show", "hostnames", hostlist(nodes)],
            env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == nodes


@needs_slurm
def test_slurm_parser_rejects_a_bad_key(tmp_path: Path) -> None:
    """The parse check above can fail: an unknown key is fatal."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "SlurmctldHost=localhost\n" + files("one-team")["slurm.conf"] + "PriorityWeightBogus=1\n"
    )
    done = subprocess.run(
        [str(SCONTROL), "show", "hostnames", "n1"],
        env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "PriorityWeightBogus" in done.stderr


def _mig(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodes": nodes}


@pytest.mark.parametrize(
    ("nodes", "names"),
    [
        pytest.param(
            [
                {
                    "name": "a",
                    "count": 1,
                    "accelerator": "a100-sxm4-80gb",
                    "mig_layout": "all-balanced",
                },
                {
                    "name": "h",
                    "count": 1,
                    "accelerator": "h200-sxm-141gb",
                    "mig_layout": "all-balanced",
                },
            ],
            {"a": "a100-sxm4-80gb-all-balanced", "h": "h200-sxm-141gb-all-balanced"},
            id="same-name-other-layout-is-prefixed",
        ),
        pytest.param(
            [
                {
                    "name": "a",
                    "count": 1,
                    "accelerator": "a100-sxm4-80gb",
                    "mig_layout": "all-balanced",
                },
                {
                    "name": "h",
                    "count": 1,
                    "accelerator": "h100-sxm5-80gb",
                    "mig_layout": "all-balanced",
                },
            ],
            {"a": "all-balanced", "h": "all-balanced"},
            id="same-name-same-layout-is-shared",
        ),
        pytest.param(
            [
                {
                    "name": "a",
                    "count": 1,
                    "accelerator": "a100-sxm4-80gb",
                    "mig_layout": {"1g.10gb": 7},
                },
                {
                    "name": "b",
                    "count": 1,
                    "accelerator": "a100-sxm4-80gb",
                    "mig_layout": {"3g.40gb": 1, "1g.10gb": 2},
                },
                {"name": "c", "count": 1, "accelerator": "a100-sxm4-80gb"},
                {"name": "l", "count": 1, "accelerator": "l4"},
            ],
            {"a": "all-1g.10gb", "b": "custom-1x3g.40gb-2x1g.10gb", "c": "all-disabled"},
            id="explicit-layouts-and-whole-gpus",
        ),
    ],
)
def test_mig_config_names(nodes: list[dict[str, Any]], names: dict[str, str]) -> None:
    fleet = fleet_of(_mig(nodes), None)
    assert config_names(fleet) == names
    doc = yaml.safe_load(export(fleet, "mig-parted").files["mig-parted-config.yaml"])
    assert doc["version"] == "v1"
    assert sorted(doc["mig-configs"]) == sorted(set(names.values()))
    for name, layout in mig_configs(fleet).items():
        (entry,) = doc["mig-configs"][name]
        assert entry["devices"] == "all"
        assert entry["mig-enabled"] == (layout is not None)
        assert entry.get("mig-devices") == (dict(layout) if layout else None)


def test_mig_parted_node_labels() -> None:
    script = SCENARIOS["sched-mig"].bundle("mig-parted").files["label-nodes.sh"]
    assert "kubectl label node --overwrite a100-7 nvidia.com/mig.config=all-balanced" in script
    assert "kubectl label node --overwrite h100-0 nvidia.com/mig.config=all-disabled" in script
    assert "l4-spot" not in script  # L4 has no MIG
