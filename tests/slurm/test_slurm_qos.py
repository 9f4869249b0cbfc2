"""The exported QOS script on a real Slurm (issue 24): it loads, twice (a second run after
the teams change must work), fails on the first real error, and leaves Slurm with the
profile's priorities, preemption lists and grace times."""

from __future__ import annotations

import subprocess
from pathlib import Path

from export.scenarios import SCENARIOS
from gpufleet.export.model import active_preemption
from gpufleet.sched.preempt import GRACE_PERIOD_S

from .fake_slurm import FakeSlurm


def _apply(slurm: FakeSlurm, script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "sacctmgr.sh"
    path.write_text(script)
    return subprocess.run(
        ["sh", str(path)], env=slurm.env, capture_output=True, text=True, timeout=120, check=False
    )


def _qos(slurm: FakeSlurm) -> dict[str, tuple[int, set[str], str]]:
    out = slurm.run("sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,preempt,gracetime")
    rows = {}
    for line in out.stdout.splitlines():
        name, priority, preempt, grace = line.split("|")
        rows[name] = (int(priority), set(filter(None, preempt.split(","))), grace)
    return rows


def test_the_qos_script_loads_twice_and_states_the_profile(
    slurm: FakeSlurm, tmp_path: Path
) -> None:
    scenario = SCENARIOS["h100-no-mig"]
    script = scenario.bundle("slurm").files["sacctmgr.sh"]
    for _ in range(2):  # the second run finds everything in place
        done = _apply(slurm, script, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    fleet = scenario.fleet()
    assert "priority" in active_preemption(fleet)
    qos = _qos(slurm)
    grace = f"00:{int(GRACE_PERIOD_S) // 60:02d}:{int(GRACE_PERIOD_S) % 60:02d}"
    for c in fleet.priority_classes:
        victims = {v.name for v in fleet.priority_classes if v.preemptible and v.value < c.value}
        assert qos[c.name] == (max(c.value, 0), victims, grace), c.name


def test_a_second_run_with_the_priorities_reversed_loads(slurm: FakeSlurm, tmp_path: Path) -> None:
    """A QOS that preempted another may come to be preempted by it: emptied, then set."""
    script = SCENARIOS["h100-no-mig"].bundle("slurm").files["sacctmgr.sh"]
    assert _apply(slurm, script, tmp_path).returncode == 0
    swapped = script.replace("name=scavenger set Priority=10 ", "name=scavenger set Priority=9999 ")
    done = _apply(slurm, swapped, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _apply(slurm, script, tmp_path).returncode == 0  # and back


def test_the_script_stops_at_the_first_error(slurm: FakeSlurm, tmp_path: Path) -> None:
    script = SCENARIOS["h100-no-mig"].bundle("slurm").files["sacctmgr.sh"]
    broken = script.replace("set Fairshare=", "set NoSuchOption=1 Fairshare=", 1)
    done = _apply(slurm, broken, tmp_path)
    assert done.returncode != 0
