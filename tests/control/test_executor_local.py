"""The local executor with real processes: environment, gangs, checkpoints, stop and restarts.

Commands are small `python -c` programs; every wait is bounded, so a broken
executor fails a test within a few seconds instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from gpufleet.control.executors.base import (
    DataInput,
    ExecEvent,
    Executor,
    Launch,
    RunKey,
    Worker,
    run_dir,
)
from gpufleet.control.executors.local import (
    ACK_FILE,
    SPAWN_GRACE_S,
    STAGING_FAILED_EXIT_CODE,
    LocalExecutor,
    checkpoint_dir,
    worker_env,
)
from gpufleet.control.executors.runner import process_alive, read_proc_stat

PY = sys.executable
SLEEP = "import time; time.sleep(30)"
RUNNER_MODULE = "gpufleet.control.executors.runner"


def launch_of(
    code: str,
    *,
    job_id: int = 1,
    attempt: int = 1,
    workers: Sequence[Worker] = (Worker(rank=0, node="n0", local_rank=0),),
    env: dict[str, str] | None = None,
    interval_s: float | None = None,
    data: Sequence[DataInput] = (),
) -> Launch:
    return Launch(
        key=RunKey(job_id, attempt),
        job_name=f"job{job_id}",
        team="ml",
        command=(PY, "-c", code),
        env=env or {},
        workers=tuple(workers),
        checkpoint_interval_s=interval_s,
        data=tuple(data),
        master_port=29555,
    )


def wait_until(cond: Callable[[], bool], timeout_s: float = 2.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def poll_until(
    ex: LocalExecutor, done: Callable[[list[ExecEvent]], bool], timeout_s: float = 2.5
) -> list[ExecEvent]:
    events: list[ExecEvent] = []
    deadline = time.monotonic() + timeout_s
    while True:
        events.extend(ex.poll(time.time()))
        if done(events):
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; events so far: {events}")
        time.sleep(0.02)


def has(kind: str) -> Callable[[list[ExecEvent]], bool]:
    return lambda events: any(e.kind == kind for e in events)


def final(events: list[ExecEvent]) -> bool:
    return any(e.kind in ("exited", "lost") for e in events)


def kinds(events: Sequence[ExecEvent]) -> list[str]:
    return [e.kind for e in events]


def child_pid(rd: Path, rank: int) -> tuple[int, int | None]:
    wait_until((rd / f"pid-{rank}.json").exists)
    record = json.loads((rd / f"pid-{rank}.json").read_text())
    return record["child_pid"], record["child_start_ticks"]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """The executor root; whatever a test leaves running is killed afterwards."""
    path = tmp_path / "runs"
    yield path
    ex = LocalExecutor(path)
    for key in ex.active():
        ex.stop(key)


def test_satisfies_the_executor_protocol(root: Path) -> None:
    ex: Executor = LocalExecutor(root)
    assert ex.name == "local"
    assert ex.poll(time.time()) == []
    assert ex.active() == set()
    assert ex.logs(RunKey(9, 9)) == ""


def test_environment_of_a_two_node_gang(root: Path) -> None:
    dump = (
        "import json, os, pathlib;"
        "d = pathlib.Path(os.environ['GPUFLEET_RUN_DIR']);"
        "(d / ('env-' + os.environ['RANK'] + '.json')).write_text(json.dumps(dict(os.environ)))"
    )
    workers = (
        Worker(rank=0, node="node-a", local_rank=0, gpus=(0, 1)),
        Worker(rank=1, node="node-b", local_rank=0, devices=("MIG-aaa",), gpu_fraction=None),
        Worker(rank=2, node="node-b", local_rank=1, gpus=(3,), gpu_fraction=0.5),
    )
    env = {"FOO": "bar", "CUDA_VISIBLE_DEVICES": "7"}  # the placement must win
    ex = LocalExecutor(root, host="10.0.0.5")
    launch = launch_of(dump, job_id=4, attempt=2, workers=workers, env=env)
    ex.start(launch)
    events = poll_until(ex, final)
    assert kinds(events) == ["started", "exited"]
    assert events[-1].exit_code == 0
    rd = run_dir(root, launch.key)
    envs = [json.loads((rd / f"env-{r}.json").read_text()) for r in range(3)]
    common = {
        "FOO": "bar",
        "GPUFLEET_JOB_ID": "4",
        "GPUFLEET_ATTEMPT": "2",
        "GPUFLEET_RUN_DIR": str(rd),
        "GPUFLEET_CHECKPOINT_DIR": str(checkpoint_dir(root, 4)),
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29555",
        "PET_MASTER_ADDR": "10.0.0.5",
        "PET_MASTER_PORT": "29555",
        "WORLD_SIZE": "3",
        "PET_NNODES": "2",
    }
    for e in envs:
        assert {k: e[k] for k in common} == common
        assert "PATH" in e  # the server's environment is inherited
    expected = [
        ("0", "0", "0", "1", "0,1", None),
        ("1", "1", "0", "2", "MIG-aaa", None),
        ("2", "1", "1", "2", "3", "0.5"),
    ]
    for e, (rank, node_rank, local_rank, local_world, visible, fraction) in zip(
        envs, expected, strict=True
    ):
        assert e["RANK"] == rank
        assert e["NODE_RANK"] == e["PET_NODE_RANK"] == node_rank
        assert e["LOCAL_RANK"] == local_rank
        assert e["LOCAL_WORLD_SIZE"] == local_world
        assert e["CUDA_VISIBLE_DEVICES"] == e["NVIDIA_VISIBLE_DEVICES"] == visible
        assert e.get("GPUFLEET_GPU_FRACTION") == fraction
    assert checkpoint_dir(root, 4).is_dir()


def test_worker_env_without_devices_hides_every_gpu(tmp_path: Path) -> None:
    launch = launch_of("pass")
    env = worker_env(
        launch,
        launch.workers[0],
        host="h",
        checkpoints=tmp_path,
        rundir=tmp_path,
        base={"HOME": "/x"},
    )
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["HOME"] == "/x"
    assert "GPUFLEET_GPU_FRACTION" not in env


def test_start_is_idempotent(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    wait_until((rd / "pid-0.json").exists)
    before = {p.name: p.read_text() for p in rd.glob("*-0.json")}
    ex.start(launch)
    LocalExecutor(root).start(launch)  # also a new instance (a restarted server)
    time.sleep(0.2)  # a second runner, if any, would have written its pid by now
    assert {p.name: p.read_text() for p in rd.glob("*-0.json")} == before
    assert ex.active() == {launch.key}
    ex.stop(launch.key)


def test_exit_code_is_reported_once(root: Path) -> None:
    ex = LocalExecutor(root)
    ex.start(launch_of("raise SystemExit(3)"))
    events = poll_until(ex, final)
    assert kinds(events) == ["started", "exited"]
    assert events[-1].exit_code == 3
    assert events[-1].at_s <= time.time()
    assert ex.poll(time.time()) == []
    assert ex.active() == set()
    assert ex.final_event(RunKey(1, 1)) == events[-1]


def test_sigterm_is_forwarded_and_yields_a_negative_code(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP)
    ex.start(launch)
    child_pid(run_dir(root, launch.key), 0)  # the runner has started its child
    ex.signal(launch.key, "SIGTERM")
    events = poll_until(ex, final)
    assert events[-1].kind == "exited"
    assert events[-1].exit_code == -signal.SIGTERM


def test_command_not_found_exits_127(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = Launch(
        key=RunKey(2, 1),
        job_name="nope",
        team="ml",
        command=("/nonexistent/binary-xyz",),
        env={},
        workers=(Worker(rank=0, node="n0", local_rank=0),),
    )
    ex.start(launch)
    events = poll_until(ex, final)
    assert events[-1].exit_code == 127
    assert "binary-xyz" in (run_dir(root, launch.key) / "error-0.txt").read_text()
    assert "cannot execute" in ex.logs(launch.key)


def test_gang_fails_when_one_worker_fails(root: Path) -> None:
    code = "import os, time\nif os.environ['RANK'] == '1': raise SystemExit(2)\ntime.sleep(30)"
    workers = [Worker(rank=r, node="n0", local_rank=r) for r in range(3)]
    ex = LocalExecutor(root)
    launch = launch_of(code, workers=workers)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    survivors = [child_pid(rd, r) for r in (0, 2)]
    events = poll_until(ex, final)
    assert events[-1].kind == "exited"
    assert events[-1].exit_code == 2
    assert "rank 1" in events[-1].detail
    wait_until(lambda: not any(process_alive(*p) for p in survivors))
    assert ex.poll(time.time()) == []


def test_checkpoint_ack_marker(root: Path) -> None:
    ack = checkpoint_dir(root, 1) / ACK_FILE
    ack.parent.mkdir(parents=True)
    ack.write_text("from attempt 1")  # an earlier attempt's ack is not this one's checkpoint
    os.utime(ack, (1000.0, 1000.0))
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP, attempt=2)
    ex.start(launch)
    assert kinds(ex.poll(time.time())) == ["started"]
    os.utime(ack, (2000.0, 2000.0))  # the job touches the marker
    events = ex.poll(time.time())
    assert [(e.kind, e.at_s) for e in events] == [("checkpointed", 2000.0)]
    assert ex.poll(time.time()) == []
    os.utime(ack, (2500.0, 2500.0))
    assert [(e.kind, e.at_s) for e in LocalExecutor(root).poll(time.time())] == [
        ("checkpointed", 2500.0)
    ]
    ex.stop(launch.key)


def test_periodic_checkpoint_signal_reaches_the_job(root: Path) -> None:
    trap = (
        "import os, pathlib, signal, time\n"
        "ack = pathlib.Path(os.environ['GPUFLEET_CHECKPOINT_DIR']) / 'gpufleet.ack'\n"
        "n = [0]\n"
        "def on_usr1(signum, frame):\n"
        "    n[0] += 1\n"
        "    ack.write_text(str(n[0]))\n"
        "signal.signal(signal.SIGUSR1, on_usr1)\n"
        "(pathlib.Path(os.environ['GPUFLEET_RUN_DIR']) / 'ready').write_text('')\n"
        "end = time.time() + 20\n"
        "while time.time() < end:\n"
        "    time.sleep(0.01)\n"
    )
    ex = LocalExecutor(root)
    launch = launch_of(trap, interval_s=0.1)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    wait_until((rd / "ready").exists)
    assert json.loads((rd / "launch.json").read_text())["checkpoint_interval_s"] == 0.1
    first = poll_until(ex, has("checkpointed"))
    ack = checkpoint_dir(root, 1) / ACK_FILE
    assert ack.read_text() == "1"
    # a restarted server keeps asking, at the stored interval
    del ex
    again = LocalExecutor(root)
    second = poll_until(again, has("checkpointed"))
    assert ack.read_text() == "2"
    assert [e.at_s for e in second if e.kind == "checkpointed"] > [
        e.at_s for e in first if e.kind == "checkpointed"
    ]
    assert "started" not in kinds(second)


def test_stop_reports_killed_exactly_once(root: Path) -> None:
    ex = LocalExecutor(root, clock=lambda: 1234.5)
    workers = [Worker(rank=r, node="n0", local_rank=r) for r in range(2)]
    launch = launch_of(SLEEP, workers=workers)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    children = [child_pid(rd, r) for r in range(2)]
    ex.stop(launch.key)
    wait_until(lambda: not any(process_alive(*c) for c in children))
    events = ex.poll(time.time())
    assert kinds(events) == ["started", "exited"]
    assert (events[-1].exit_code, events[-1].at_s, events[-1].detail) == (-9, 1234.5, "stopped")
    assert ex.poll(time.time()) == []
    assert LocalExecutor(root).poll(time.time()) == []
    ex.stop(launch.key)  # no-op now
    ex.signal(launch.key, "SIGTERM")


def test_data_is_staged_before_the_job_starts(root: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("alpha")
    (tmp_path / "file.bin").write_bytes(b"\x00\x01")
    check = (
        "import os, pathlib\n"
        "d = pathlib.Path(os.environ['GPUFLEET_RUN_DIR'])\n"
        "ok = (d / 'data/set/a.txt').read_text() == 'alpha' and (d / 'f.bin').exists()\n"
        "raise SystemExit(0 if ok else 9)\n"
    )
    data = [
        DataInput(str(tmp_path / "src"), "data/set"),
        DataInput(str(tmp_path / "file.bin"), "f.bin"),
    ]
    ex = LocalExecutor(root)
    ex.start(launch_of(check, data=data))
    events = poll_until(ex, final)
    assert kinds(events) == ["started", "staged", "exited"]
    staged = events[1]
    assert staged.seconds is not None
    assert 0 <= staged.seconds < 2
    assert events[-1].exit_code == 0


def test_missing_data_fails_without_spawning(root: Path, tmp_path: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP, data=[DataInput(str(tmp_path / "absent"), "x")])
    ex.start(launch)
    assert not list(run_dir(root, launch.key).glob("spawn-*.json"))
    events = ex.poll(time.time())
    assert kinds(events) == ["exited"]
    assert events[0].exit_code == STAGING_FAILED_EXIT_CODE
    assert "absent" in events[0].detail
    assert "staging failed" in ex.logs(launch.key)


def test_restarted_server_reports_the_exit_once_and_restarts_nothing(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of("import time; time.sleep(0.3); raise SystemExit(4)")
    ex.start(launch)
    assert kinds(ex.poll(time.time())) == ["started"]
    del ex  # the server crashes; the runner carries on and records the exit
    rd = run_dir(root, launch.key)
    spawn = (rd / "spawn-0.json").read_text()
    wait_until((rd / "exit-0.json").exists)
    restarted = LocalExecutor(root)
    assert restarted.active() == {launch.key}
    restarted.start(launch)  # the reconciler re-issues the order: nothing happens
    assert (rd / "spawn-0.json").read_text() == spawn
    events = restarted.poll(time.time())
    assert [(e.kind, e.exit_code) for e in events] == [("exited", 4)]
    assert restarted.poll(time.time()) == []
    assert LocalExecutor(root).poll(time.time()) == []
    assert LocalExecutor(root).final_event(launch.key) == events[0]


def test_vanished_processes_are_lost(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    child_pid(rd, 0)
    runner_pid = json.loads((rd / "spawn-0.json").read_text())["runner_pid"]
    os.killpg(runner_pid, signal.SIGKILL)  # e.g. the OOM killer, not our stop()
    events = poll_until(ex, final)
    assert events[-1].kind == "lost"
    assert "without an exit record" in events[-1].detail
    assert ex.poll(time.time()) == []


def test_a_reused_pid_is_not_mistaken_for_the_runner(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    child = child_pid(rd, 0)
    spawn_path, pid_path = rd / "spawn-0.json", rd / "pid-0.json"
    for path in (spawn_path, pid_path):  # pretend the pid now belongs to another process
        record = json.loads(path.read_text())
        record["runner_start_ticks"] += 1
        path.write_text(json.dumps(record))
    events = ex.poll(time.time())
    assert events[-1].kind == "lost"
    wait_until(lambda: not process_alive(*child))  # the orphaned job is still cleaned up


def test_a_start_cut_short_by_a_crash_is_lost(root: Path) -> None:
    ex = LocalExecutor(root)
    launch = launch_of(SLEEP)
    ex.start(launch)
    rd = run_dir(root, launch.key)
    child = child_pid(rd, 0)
    os.killpg(json.loads((rd / "spawn-0.json").read_text())["runner_pid"], signal.SIGKILL)
    wait_until(lambda: not process_alive(*child))
    for name in ("spawn-0.json", "pid-0.json"):  # as if the server died before spawning
        (rd / name).unlink()
    assert LocalExecutor(root).poll(time.time()) == []  # within the grace: maybe starting
    old_s = time.time() - SPAWN_GRACE_S - 1
    os.utime(rd / "launched", (old_s, old_s))
    events = LocalExecutor(root).poll(time.time())
    assert [(e.kind, e.detail) for e in events] == [("lost", "rank 0 was never spawned")]


def test_logs_tail_and_rank_headers(root: Path) -> None:
    code = "import os\nfor i in range(3): print('line', os.environ['RANK'], i)"
    ex = LocalExecutor(root)
    two = launch_of(code, workers=[Worker(rank=r, node="n0", local_rank=r) for r in range(2)])
    one = launch_of(code, job_id=2)
    ex.start(two)
    ex.start(one)
    poll_until(ex, lambda events: sum(e.kind == "exited" for e in events) == 2)
    text = ex.logs(two.key)
    assert text.index("[rank 0]") < text.index("line 0 2") < text.index("[rank 1]")
    assert text.rstrip().endswith("line 1 2")
    assert ex.logs(one.key) == "line 0 0\nline 0 1\nline 0 2\n"
    assert ex.logs(one.key, tail_bytes=9) == "line 0 2\n"
    assert ex.logs(one.key, tail_bytes=0) == ""


def test_runner_as_a_module(tmp_path: Path) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    argv = [PY, "-m", RUNNER_MODULE, "--dir", str(tmp_path), "--rank", "3", "--", PY, "-c", code]
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        record = json.loads((tmp_path / "pid-3.json").read_text())
        assert record["runner_pid"] == proc.pid
        own = read_proc_stat(proc.pid)
        assert own is not None
        assert record["runner_start_ticks"] == own.start_ticks
        assert process_alive(record["child_pid"], record["child_start_ticks"])
        proc.send_signal(signal.SIGTERM)  # forwarded: the child exits 7, the runner records it
        assert proc.wait(timeout=2) == 7
    exit_record = json.loads((tmp_path / "exit-3.json").read_text())
    assert exit_record["exit_code"] == 7
    assert exit_record["ended_s"] == pytest.approx(time.time(), abs=2)
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes leave no temporaries
