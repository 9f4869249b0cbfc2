"""The executor's pure parts (no Slurm needed): batch scripts, the node map, the cluster from
Slurm, the ledger comparison and engine node states.

The batch scripts are compared with golden files in tests/slurm/golden/. After an
intended change, regenerate them and review the diff:

    GPUFLEET_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/slurm/test_slurm_plan.py -q
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from gpufleet.cluster import Cluster
from gpufleet.control.engine_nodes import NodeStatus, apply_node_states
from gpufleet.control.executors.base import Launch, RunKey, Worker
from gpufleet.control.executors.slurm import SlurmExecutor
from gpufleet.control.executors.slurm_batch import plan_batch_job
from gpufleet.control.executors.slurm_cluster import cluster_spec_from_slurm, match_nodes
from gpufleet.control.executors.slurm_commands import CommandResult, SlurmOptions
from gpufleet.control.executors.slurm_text import SlurmJob, SlurmNode
from gpufleet.control.models import NodeRecord
from gpufleet.control.slurm_usage import LedgerAttempt, compare
from gpufleet.errors import UserError
from gpufleet.specs.cluster import ClusterSpec

GOLDEN = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("GPUFLEET_UPDATE_GOLDEN") == "1"
RUN_DIR = Path("/shared/runs/job-12/attempt-3")
SLURM = {f"n-{i}": f"n{i + 1}" for i in range(4)}


def _launch(workers: tuple[Worker, ...], **kw: object) -> Launch:
    return Launch(
        key=RunKey(12, 3),
        job_name="resnet  train",
        team="vision",
        command=("python", "train.py", "--lr", "3e-4", "it's"),
        env={"FOO": "a b", "bad-name": "skipped"},
        workers=workers,
        **kw,  # type: ignore[arg-type]
    )


def _gang(per_node: int, nodes: int, gpus: int) -> tuple[Worker, ...]:
    return tuple(
        Worker(n * per_node + i, f"n-{n}", i, tuple(range(i * gpus, (i + 1) * gpus)))
        for n in range(nodes)
        for i in range(per_node)
    )


SCRIPTS = {
    "gang-2x8": (_launch(_gang(1, 2, 8)), SlurmOptions(partition="gpu")),
    "two-per-node": (_launch(_gang(2, 2, 4)), SlurmOptions(signal_scope="batch", qos="high")),
    "uneven": (
        _launch(
            (
                Worker(0, "n-1", 0, (0, 1)),
                Worker(1, "n-3", 0, (0, 1)),
                Worker(2, "n-1", 1, (2, 3)),
            ),
            master_port=29400,
        ),
        SlurmOptions(signal_scope="full", account="ml"),
    ),
    "cpu-only-with-data": (_launch((Worker(0, "n-0", 0, ()),)), SlurmOptions()),
}


def _script(name: str) -> str:
    launch, options = SCRIPTS[name]
    data = [("/datasets/val", str(RUN_DIR / "data/val"))] if "data" in name else []
    plan = plan_batch_job(
        launch,
        name=f"gpufleet-job-{launch.key.job_id}-{launch.key.attempt}",
        run_dir=RUN_DIR,
        slurm_nodes=SLURM,
        gpu_types={"n1": "h100", "n2": "h100", "n3": "h100", "n4": "h100"},
        env={"GPUFLEET_JOB_ID": "12", "MASTER_ADDR": "10.0.0.2", "FOO": "a b", "bad-name": "x"},
        options=options,
        data=data,
    )
    return plan.script + (f"# SLURM_HOSTFILE:\n{plan.hostfile}" if plan.hostfile else "")


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_batch_script_matches_golden(name: str) -> None:
    script = _script(name)
    path = GOLDEN / f"{name}.sbatch"
    if UPDATE_GOLDEN:
        path.parent.mkdir(exist_ok=True)
        path.write_text(script)
    assert path.exists(), f"no golden file {path}: run with GPUFLEET_UPDATE_GOLDEN=1"
    assert script == path.read_text(), f"{path} differs: GPUFLEET_UPDATE_GOLDEN=1 to update"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to parse the scripts")
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_batch_script_is_valid_bash(name: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(_script(name))
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "gang-2x8",
            ["--nodes=2", "--nodelist=n1,n2", "--ntasks-per-node=1", "--gres=gpu:h100:8"],
            id="gang",
        ),
        pytest.param("two-per-node", ["--ntasks-per-node=2", "--gres=gpu:h100:8"], id="two"),
        pytest.param(
            "uneven",
            [
                "--nodelist=n2,n4",
                "--ntasks=3",
                "--distribution=arbitrary",
                "--gpus-per-task=h100:2",
            ],
            id="uneven",
        ),
    ],
)
def test_the_placement_is_pinned(name: str, expected: list[str]) -> None:
    directives = [
        line.removeprefix("#SBATCH ")
        for line in _script(name).splitlines()
        if line.startswith("#SBATCH")
    ]
    for flag in ["--no-requeue", "--export=NONE", *expected]:
        assert flag in directives, (flag, directives)


def _nodes(*specs: tuple[str, int, str | None]) -> list[SlurmNode]:
    return [SlurmNode(n, n, "IDLE", g, t, 16, ("gpu",)) for n, g, t in specs]


def _cluster(*groups: tuple[str, int]) -> Cluster:
    spec = {
        "kind": "cluster",
        "nodes": [
            {"name": g, "count": c, "accelerator": "h100-sxm5-80gb", "gpus_per_node": 8}
            for g, c in groups
        ],
    }
    return Cluster.from_spec(ClusterSpec.model_validate(spec))


@pytest.mark.parametrize(
    ("groups", "slurm", "names", "problems"),
    [
        pytest.param(
            [("gpu", 2)],
            [("gpu-0", 8, "h100"), ("gpu-1", 8, "h100")],
            (),
            (),
            id="same-names",
        ),
        pytest.param(
            [("n", 3)],
            [("n10", 8, None), ("n2", 8, None), ("n1", 8, None)],
            (("n-0", "n1"), ("n-1", "n2"), ("n-2", "n10")),
            (),
            id="by-group-in-natural-order",
        ),
        pytest.param(
            [("n", 2)],
            [("n1", 4, None)],
            (),
            (
                "node n-0: Slurm node n1 has 4 GPUs (GRES), gpufleet counts 8",
                "node n-1: no Slurm node of that name or group",
            ),
            id="too-few",
        ),
    ],
)
def test_match_nodes(
    groups: list[tuple[str, int]],
    slurm: list[tuple[str, int, str | None]],
    names: tuple[tuple[str, str], ...],
    problems: tuple[str, ...],
) -> None:
    found = match_nodes(_cluster(*groups), _nodes(*slurm))
    assert found.names[: len(names)] == names
    assert found.problems == problems


def test_cluster_from_slurm_maps_back_onto_the_same_nodes() -> None:
    slurm = _nodes(("n1", 8, "h100"), ("n2", 8, "h100"), ("a01", 4, "a100"), ("login", 0, None))
    spec = cluster_spec_from_slurm(slurm, {"h100": "H100", "a100": "a100-sxm4-80gb"})
    assert spec["nodes"] == [
        {"name": "a", "count": 1, "accelerator": "a100-sxm4-80gb", "gpus_per_node": 4},
        {"name": "n", "count": 2, "accelerator": "h100-sxm5-80gb", "gpus_per_node": 8},
    ]
    cluster = Cluster.from_spec(ClusterSpec.model_validate(spec))
    found = match_nodes(cluster, slurm)
    assert found.problems == ()
    assert dict(found.names) == {"n-0": "n1", "n-1": "n2", "a-0": "a01"}
    with pytest.raises(UserError, match="--accelerator a100=NAME"):
        cluster_spec_from_slurm(slurm, {})


def _job(
    job_id: str,
    key: RunKey,
    start: float | None,
    end: float,
    gpus: int,
    *,
    state: str = "COMPLETED",
) -> SlurmJob:
    elapsed = end - start if start is not None else 0.0
    nodes = ("n1",) if start is not None else ()
    name = f"gpufleet-job-{key.job_id}-{key.attempt}"
    return SlurmJob(job_id, name, state, "", start, end, nodes, 0, gpus, elapsed)


def _stopped(key: RunKey, gpus: int, start: float, end: float) -> LedgerAttempt:
    return LedgerAttempt(key, gpus, start, end, gpus * (end - start), stopped=True)


def _ran(key: RunKey, gpus: int, start: float, end: float, succeeded: bool) -> LedgerAttempt:
    return LedgerAttempt(key, gpus, start, end, gpus * (end - start), succeeded=succeeded)


K1, K2, K3 = RunKey(1, 1), RunKey(2, 1), RunKey(3, 1)


@pytest.mark.parametrize(
    ("ledger", "slurm", "problems"),
    [
        pytest.param(
            [LedgerAttempt(K1, 16, 1000.0, 1102.0, 16 * 102.0, succeeded=True)],
            {K1: _job("5", K1, 1002.0, 1102.0, 16)},
            [""],
            id="agree-startup-2s",
        ),
        pytest.param(
            [LedgerAttempt(K1, 8, 1000.0, 1100.0, 800.0, succeeded=True)],
            {K1: _job("5", K1, 1000.0, 1100.0, 16)},
            ["GPUs: ledger 8, Slurm 16; GPU-s: ledger 800, Slurm 1600 + startup 8 x 0 s"],
            id="other-gpus",
        ),
        pytest.param(
            [LedgerAttempt(K1, 8, 1000.0, 1200.0, 1600.0, succeeded=True)],
            {K1: _job("5", K1, 1000.0, 1100.0, 8)},
            ["end: ledger 1200, Slurm 1100.0; GPU-s: ledger 1600, Slurm 800 + startup 8 x 0 s"],
            id="billed-past-the-end",
        ),
        pytest.param(
            [LedgerAttempt(K2, 8, 1000.0, 1010.0, 80.0)],
            {},
            ["billed, but Slurm has no job for it (never submitted?)"],
            id="no-slurm-job",
        ),
        pytest.param(
            [],
            {K3: _job("9", K3, 1000.0, 1100.0, 8)},
            ["Slurm ran it; the ledger has no row (not yet observed, or lost)"],
            id="not-billed",
        ),
        pytest.param(
            [_stopped(K1, 8, 1000.0, 1005.0)],
            {K1: _job("5", K1, None, 1005.0, 8, state="CANCELLED")},
            [""],
            id="cancelled-before-it-started",
        ),
        pytest.param(
            [_stopped(K1, 8, 1000.0, 1100.0)],
            {K1: _job("5", K1, 1000.0, 1100.0, 8, state="CANCELLED")},
            [""],
            id="preempted-ends-cancelled",
        ),
        pytest.param(
            [_stopped(K1, 8, 1000.0, 1100.0)],
            {K1: _job("5", K1, 1000.0, 1100.0, 8, state="COMPLETED")},
            [""],
            id="finished-within-its-grace",
        ),
        pytest.param(
            [_stopped(K1, 8, 1000.0, 1100.0)],
            {K1: _job("5", K1, 1000.0, 1100.0, 8, state="FAILED")},
            ["state: gpufleet stopped it, Slurm says FAILED (expected CANCELLED)"],
            id="stopped-but-failed",
        ),
        pytest.param(
            [_ran(K1, 8, 1000.0, 1100.0, succeeded=False)],
            {K1: _job("5", K1, 1000.0, 1100.0, 8, state="CANCELLED")},
            ["state: Slurm says CANCELLED, gpufleet never stopped it"],
            id="cancelled-outside-gpufleet",
        ),
        pytest.param(
            [_ran(K1, 8, 1000.0, 1100.0, succeeded=False), _ran(K2, 8, 1000.0, 1100.0, True)],
            {
                K1: _job("5", K1, 1000.0, 1100.0, 8, state="COMPLETED"),
                K2: _job("6", K2, 1000.0, 1100.0, 8, state="FAILED"),
            },
            [
                "state: gpufleet says failed, Slurm says COMPLETED",
                "state: gpufleet says succeeded, Slurm says FAILED",
            ],
            id="other-outcome",
        ),
    ],
)
def test_ledger_against_sacct(
    ledger: list[LedgerAttempt], slurm: dict[RunKey, SlurmJob], problems: list[str]
) -> None:
    assert [c.problem for c in compare(ledger, slurm)] == problems


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    from gpufleet.control.db import make_engine, upgrade

    eng = make_engine(f"sqlite:///{tmp_path}/nodes.db")
    upgrade(eng)
    yield eng
    eng.dispose()


@pytest.mark.parametrize(
    ("before", "reported", "after"),
    [
        pytest.param(("up", ""), NodeStatus("down", "test"), ("down", "slurm: test"), id="down"),
        pytest.param(("up", ""), NodeStatus("drain", ""), ("drain", "slurm: drain"), id="drain"),
        pytest.param(("down", "slurm: test"), NodeStatus("up"), ("up", ""), id="back-up"),
        pytest.param(
            ("drain", "slurm: maint"),
            NodeStatus("down", "dead"),
            ("down", "slurm: dead"),
            id="worse",
        ),
        pytest.param(("down", "admin"), NodeStatus("up"), ("down", "admin"), id="admin-down-stays"),
        pytest.param(
            ("drain", "admin"), NodeStatus("down", "x"), ("drain", "admin"), id="admin-drain-stays"
        ),
        pytest.param(("up", ""), NodeStatus("up"), ("up", ""), id="nothing"),
    ],
)
def test_engine_node_states(
    engine: Engine, before: tuple[str, str], reported: NodeStatus, after: tuple[str, str]
) -> None:
    with Session(engine) as s, s.begin():
        s.add(
            NodeRecord(
                name="n-0",
                accelerator="h100",
                gpus=8,
                state=before[0],
                reason=before[1],
                updated_s=0,
            )
        )
    with Session(engine) as s, s.begin():
        changed = apply_node_states(s, {"n-0": reported, "unknown": reported}, "slurm", 5.0)
    with Session(engine) as s:
        row = s.get(NodeRecord, "n-0")
        assert row is not None
        assert (row.state, row.reason) == after
        assert bool(changed) == (after != before)


FAILED = "sbatch: error: Batch job submission failed:"
NOT_AVAILABLE = "Requested node configuration is not available"


class Commands:
    """Slurm's command line as a script of answers, to test what the executor does when
    Slurm misbehaves in ways a healthy test cluster will not (controller unreachable,
    a refused job). Records every command it was given."""

    def __init__(self, sbatch: CommandResult) -> None:
        self.sbatch = sbatch
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float
    ) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] == "scontrol" and argv[1:3] == ["show", "node"]:
            return CommandResult(
                0, "NodeName=n1 Gres=gpu:h100:8 NodeAddr=10.0.0.1 State=IDLE\n", ""
            )
        if argv[0] == "sbatch":
            return self.sbatch
        return CommandResult(0, "", "")  # squeue/sacct: no such job yet; release: done

    def count(self, command: str) -> int:
        return sum(1 for c in self.calls if c[0] == command)


@pytest.mark.parametrize(
    ("sbatch", "submitted", "event"),
    [
        pytest.param(CommandResult(0, "42\n", ""), "42", None, id="submitted"),
        pytest.param(
            CommandResult(
                1,
                "",
                f"{FAILED} Unable to contact slurm controller (connect failure)",
            ),
            None,
            None,
            id="controller-unreachable-retried",
        ),
        pytest.param(
            CommandResult(
                1,
                "",
                f"{FAILED} {NOT_AVAILABLE}",
            ),
            None,
            (
                "exited",
                125,
                f"sbatch refused the job: {FAILED} {NOT_AVAILABLE}",
            ),
            id="refused",
        ),
    ],
)
def test_submission_outcomes(
    tmp_path: Path,
    sbatch: CommandResult,
    submitted: str | None,
    event: tuple[str, int, str] | None,
) -> None:
    commands = Commands(sbatch)
    executor = SlurmExecutor(
        tmp_path, SlurmOptions(accounting="none", node_names=(("n-0", "n1"),)), run=commands
    )
    launch = _launch((Worker(0, "n-0", 0, tuple(range(8))),))
    executor.start(launch)
    executor.start(launch)  # the reconciler repeats start until the attempt is seen running
    assert executor.slurm_job_id(launch.key) == submitted
    if submitted:
        assert commands.count("sbatch") == 1  # idempotent
        assert ["scontrol", "release", "42"] in commands.calls
    elif event is None:
        assert commands.count("sbatch") == 2  # nothing recorded: tried again
    else:
        assert commands.count("sbatch") == 1
        (got,) = [e for e in executor.poll(0.0) if e.key == launch.key]
        assert (got.kind, got.exit_code, got.detail) == event
        assert "Requested node configuration" in executor.logs(launch.key)


@pytest.mark.parametrize(
    ("worker", "why"),
    [
        pytest.param(Worker(0, "n-0", 0, (0,), gpu_fraction=0.5), "GPU fractions", id="fraction"),
        pytest.param(Worker(0, "n-0", 0, (), ("MIG-abc",)), "MIG slices", id="mig"),
        pytest.param(Worker(0, "n-9", 0, (0,)), "node n-9 is not a Slurm node", id="unknown-node"),
    ],
)
def test_what_the_executor_cannot_express_fails_the_attempt(
    tmp_path: Path, worker: Worker, why: str
) -> None:
    commands = Commands(CommandResult(0, "42\n", ""))
    executor = SlurmExecutor(
        tmp_path, SlurmOptions(accounting="none", node_names=(("n-0", "n1"),)), run=commands
    )
    launch = _launch((worker,))
    executor.start(launch)
    assert commands.count("sbatch") == 0
    (got,) = executor.poll(0.0)
    assert (got.kind, got.exit_code) == ("exited", 125)
    assert why in got.detail
