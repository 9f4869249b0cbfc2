"""The control plane on a real Slurm: the reconciler with a store drives the slurm executor.

Each test builds a control plane (store, API, reconciler) as tests/control do, on the
session's Slurm cluster (4 nodes x 8 GRES GPUs, see conftest), and cycles it in real
time: Slurm's clocks are real, so nothing here advances a fake clock. What is checked is
what Slurm itself says (squeue/sacct/scontrol: NodeList, states, exit codes, elapsed
times, GRES) and what ran inside the jobs (their environment, the signals they caught).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from control.conftest import Plane, build_plane
from gpufleet.cluster import Cluster
from gpufleet.control.executors.base import ExecEvent, Launch, RunKey, Worker
from gpufleet.control.executors.slurm import SlurmExecutor
from gpufleet.control.executors.slurm_text import expand_hostlist, parse_scontrol_job
from gpufleet.control.ledger import balance_problems
from gpufleet.control.models import NodeRecord
from gpufleet.control.slurm_usage import reconcile

from .conftest import Waiter, age_job
from .fake_slurm import FakeSlurm

# A job that writes its environment, then runs for $RUN_S seconds (attempt 1) or $AGAIN_S
# (later attempts); SIGUSR1 writes a marker and acknowledges a checkpoint, SIGTERM exits
# ($TERM_S seconds later: a job that takes part of its grace period to save its work).
# gpufleet's stop sends the checkpoint signal and then scancel's SIGTERM at once (Slurm's
# KillWait is the grace period), so a SIGTERM can arrive while the SIGUSR1 handler runs:
# bash would run the TERM trap between two of its commands and exit before the ack, as a
# job killed mid-save. This job finishes its save first, as a job that checkpoints should,
# and saves without forking (bash builtins only): the fake cluster's KillWait is 2 s, and a
# `date` and a `touch` forked on a loaded machine (make check) could outlast it, so SIGKILL
# took the job between its marker and its ack (stop 45) — a job killed mid-save, correctly
# reported without a checkpoint, but not what this test is about.
JOB = r"""
vars='RANK|LOCAL_RANK|NODE_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT'
vars="$vars|CUDA_VISIBLE_DEVICES|SLURMD_NODENAME|SLURM_JOB_ID|GPUFLEET_ATTEMPT"
env | grep -E "^($vars)=" | sort > "$GPUFLEET_CHECKPOINT_DIR/env-$GPUFLEET_ATTEMPT-$RANK"
saving= term=
on_term() {
  if [ -n "$saving" ]; then term=1; return; fi
  echo "rank $RANK: SIGTERM"; sleep "${TERM_S:-0}"; exit 143
}
on_usr1() {
  saving=1
  echo "$EPOCHREALTIME" > "$GPUFLEET_CHECKPOINT_DIR/usr1-$GPUFLEET_ATTEMPT-$RANK"
  [ "$RANK" = 0 ] && : > "$GPUFLEET_CHECKPOINT_DIR/gpufleet.ack"
  saving=
  if [ -n "$term" ]; then on_term; fi
}
trap on_usr1 USR1
trap on_term TERM
run=$RUN_S; [ "$GPUFLEET_ATTEMPT" = 1 ] || run=$AGAIN_S
end=$(( $(date +%s) + run ))
while [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
echo "rank $RANK done"
"""


@dataclass
class Live:
    """A control plane on the session's Slurm: executor, plane (store, API, reconciler), and
    a waiter that cycles it in real time."""

    executor: SlurmExecutor
    plane: Plane
    wait: Waiter


@pytest.fixture
def live(sqlite_engine: Engine, cluster: Cluster, executor_for: Any) -> Live:
    executor = executor_for()
    plane = build_plane(sqlite_engine, cluster, grace_s=5.0, executor=executor)
    plane.clock.now_s = time.time()
    return Live(executor, plane, Waiter(lambda: tick(plane), lambda: jobs_now(plane)))


def tick(plane: Plane) -> None:
    plane.clock.now_s = time.time()  # Slurm's times are real
    plane.reconciler.cycle()


def submit(plane: Plane, who: str, **body: Any) -> int:
    run_s, again_s = body.pop("run_s", 2), body.pop("again_s", 1)
    body.setdefault("command", ["/bin/bash", "-c", JOB])
    body["env"] = {**body.get("env", {}), "RUN_S": str(run_s), "AGAIN_S": str(again_s)}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def get(plane: Plane, job_id: int) -> dict[str, Any]:
    r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth("admin"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def jobs_now(plane: Plane) -> str:
    """Every job's state, reason and last events: what a failed wait prints."""
    listed = plane.client.get("/api/v1/jobs", headers=plane.auth("admin")).json()["jobs"]
    lines = []
    for j in listed:
        full = get(plane, j["id"])
        last = [(e["kind"], e["message"]) for e in full["events"][-4:]]
        lines.append(
            f"job {j['id']} {full['state']} attempt {full['attempt']}: {full['reason']} {last}"
        )
    return "\n".join(lines)


def requeued(plane: Plane, job_id: int, attempt: int) -> bool:
    """The attempt ended and the job went back to the queue (whatever happened next)."""
    events = get(plane, job_id)["events"]
    return any(e["kind"] == "pending" and e["attempt"] == attempt for e in events)


def state(plane: Plane, job_id: int) -> str:
    return str(get(plane, job_id)["state"])


def slurm_job(slurm: FakeSlurm, executor: SlurmExecutor, key: RunKey) -> dict[str, Any]:
    """What Slurm itself says of an attempt: `scontrol show job` (exact exit code, NodeList)."""
    job_id = executor.slurm_job_id(key)
    assert job_id is not None, f"{key} was never submitted"
    out = slurm.run("scontrol", "show", "job", "-o", job_id).stdout
    job = parse_scontrol_job(out)
    assert job is not None, out
    return {
        "id": job_id,
        "state": job.state,
        "nodes": set(job.nodes),
        "exit": job.exit_code,
        "raw": out,
    }


def env_of(executor: SlurmExecutor, job_id: int, attempt: int, rank: int) -> dict[str, str]:
    path = executor.root / f"job-{job_id}" / "checkpoints" / f"env-{attempt}-{rank}"
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def placed_nodes(job: dict[str, Any]) -> list[str]:
    return [p["node"] for p in job["placement"]]


def ledger_matches_sacct(plane: Plane, executor: SlurmExecutor, since_s: float) -> list[Any]:
    """The ledger against sacct for this test's jobs; sacct may lag slurmctld by a moment."""
    checks: list[Any] = []
    for _ in range(20):
        with plane.sessions() as s:
            checks = reconcile(
                s, executor.accounted_jobs(since_s - 60), executor.options.tag, since_s, 2e9
            )
        if checks and not any(c.problem for c in checks):
            return checks
        time.sleep(0.25)
    raise AssertionError(f"ledger and sacct differ: {checks}")


def test_a_gang_job_runs_on_the_two_nodes_gpufleet_chose(live: Live, slurm: FakeSlurm) -> None:
    began = time.time()
    executor, plane, wait = live.executor, live.plane, live.wait
    j = submit(plane, "vision-member", name="gang", gpus=8, workers=2, run_s=2)
    wait.until("the gang job is placed", lambda: state(plane, j) != "pending")
    placed = placed_nodes(get(plane, j))
    assert len(set(placed)) == 2
    wait.until("the gang job succeeds", lambda: state(plane, j) == "succeeded")

    done = slurm_job(slurm, executor, RunKey(j, 1))
    assert done["state"] == "COMPLETED"
    assert done["exit"] == 0
    assert done["nodes"] == {executor.slurm_name(n) for n in placed}, done  # gpufleet's choice
    for rank, node in enumerate(placed):
        env = env_of(executor, j, 1, rank)
        assert env["SLURMD_NODENAME"] == executor.slurm_name(node)
        assert env["RANK"] == str(rank)
        assert env["NODE_RANK"] == str(rank)
        assert env["LOCAL_RANK"] == "0"
        assert env["WORLD_SIZE"] == "2"
        assert env["LOCAL_WORLD_SIZE"] == "1"
        assert env["MASTER_ADDR"] == "127.0.0.1"  # the NodeAddr of rank 0's node
        assert env["MASTER_PORT"] == str(29500 + int(done["id"]) % 30000)
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    # sacct may first show only the batch node for a second after the end: let it settle
    deadline = time.monotonic() + 10
    while True:
        sacct = slurm.run("sacct", "-X", "-n", "-P", "-j", done["id"], "-o", "NodeList,AllocTRES")
        nodes, tres = sacct.stdout.strip().split("|")
        if set(expand_hostlist(nodes)) == done["nodes"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert set(expand_hostlist(nodes)) == done["nodes"], sacct.stdout
    assert "gres/gpu=16" in tres

    (check,) = ledger_matches_sacct(plane, executor, began)
    assert check.key == RunKey(j, 1)
    assert check.slurm_gpus == 16
    assert check.ledger_gpus == 16
    assert check.startup_s is not None
    assert -1 < check.startup_s < 5  # Slurm's start is in whole seconds, rounded down
    with plane.sessions() as s:
        assert balance_problems(s) == []


def test_a_high_priority_job_preempts_a_low_one_which_checkpoints_and_runs_again(
    live: Live, slurm: FakeSlurm
) -> None:
    began = time.time()
    executor, plane, wait = live.executor, live.plane, live.wait
    # each team is guaranteed the whole cluster: quotas never bind, priority alone decides
    for team in ("nlp", "vision"):
        r = plane.client.put(
            f"/api/v1/admin/teams/{team}/quotas/h100-sxm5-80gb",
            json={"guaranteed_gpus": 32},
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200, r.text
    low = submit(
        plane,
        "nlp-member",
        name="low",
        gpus=8,
        workers=4,
        priority_class="opportunistic",
        checkpoint_interval_s=3600,
        run_s=600,
        again_s=1,
    )
    wait.until("the low job runs", lambda: state(plane, low) == "running")
    age_job(plane.sessions, low, 900)  # past the 10-minute minimum runtime
    high = submit(plane, "nlp-lead", name="high", gpus=8, workers=2, priority_class="production")
    wait.until("the low job is requeued", lambda: requeued(plane, low, attempt=1))

    # the victim got the checkpoint signal (every rank), acknowledged it, and stopped on the
    # SIGTERM of gpufleet's scancel: Slurm's accounting says CANCELLED, not FAILED
    checkpoints = executor.root / f"job-{low}" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("usr1-1-*")) == [f"usr1-1-{r}" for r in range(4)]
    first = slurm_job(slurm, executor, RunKey(low, 1))
    assert first["state"] == "CANCELLED", first
    events = get(plane, low)["events"]
    kinds = [e["kind"] for e in events]
    stop = kinds.index("stopping")
    assert f"preempted by job '{high}' (priority 1000 > 100)" in events[stop]["message"]
    assert "checkpointed" in kinds[stop:]  # the ack marker, seen through the shared run root
    assert "pending" in kinds[stop:]

    wait.until("the high job succeeds", lambda: state(plane, high) == "succeeded")
    wait.until("the low job runs again and succeeds", lambda: state(plane, low) == "succeeded")
    assert get(plane, low)["attempt"] == 2
    assert slurm_job(slurm, executor, RunKey(low, 2))["state"] == "COMPLETED"
    assert env_of(executor, low, 2, 0)["GPUFLEET_ATTEMPT"] == "2"
    assert len(ledger_matches_sacct(plane, executor, began)) == 3  # low 1, high 1, low 2


def test_a_node_set_down_in_slurm_requeues_its_job_elsewhere(live: Live, slurm: FakeSlurm) -> None:
    began = time.time()
    executor, plane, wait = live.executor, live.plane, live.wait
    j = submit(plane, "vision-member", name="victim", gpus=8, run_s=600, again_s=1)
    wait.until("the job runs", lambda: state(plane, j) == "running")
    (node,) = placed_nodes(get(plane, j))
    down = executor.slurm_name(node)
    slurm.run("scontrol", "update", f"nodename={down}", "state=down", "reason=test")
    try:
        wait.until("the job is requeued", lambda: requeued(plane, j, attempt=1))
        assert node_record(plane, node) == ("down", "slurm: test")
        requeue = next(
            e for e in get(plane, j)["events"] if e["kind"] == "pending" and e["attempt"] == 1
        )
        assert "stopped after node failure" in requeue["message"]  # not a crash: no restart used
        assert slurm_job(slurm, executor, RunKey(j, 1))["state"] == "NODE_FAIL"
        wait.until("the job succeeds elsewhere", lambda: state(plane, j) == "succeeded")
        assert get(plane, j)["attempt"] == 2
        second = slurm_job(slurm, executor, RunKey(j, 2))
        assert second["state"] == "COMPLETED"
        assert second["nodes"]
        assert down not in second["nodes"]
    finally:
        slurm.run("scontrol", "update", f"nodename={down}", "state=resume", check=False)
    wait.until("the node is up again", lambda: node_record(plane, node) == ("up", ""))
    assert len(ledger_matches_sacct(plane, executor, began)) == 2


def node_record(plane: Plane, node: str) -> tuple[str, str]:
    with plane.sessions() as s:
        row = s.get(NodeRecord, node)
        assert row is not None
        return row.state, row.reason


def test_a_failed_worker_fails_the_whole_gang_at_once(live: Live, slurm: FakeSlurm) -> None:
    executor, plane, wait = live.executor, live.plane, live.wait
    command = ["/bin/bash", "-c", '[ "$RANK" = 1 ] && exit 3; sleep 60']
    j = submit(plane, "vision-member", name="crash", gpus=8, workers=2, command=command)
    took_s = wait.until("the gang crashes", lambda: requeued(plane, j, attempt=1))
    assert took_s < 20  # rank 0 (sleep 60) was stopped with rank 1, not waited for
    first = slurm_job(slurm, executor, RunKey(j, 1))
    assert first["state"] == "FAILED"
    assert first["exit"] not in (0, None)
    requeue = next(e for e in get(plane, j)["events"] if e["kind"] == "pending")
    assert "restart 1 of 3" in requeue["message"]
    logs = plane.client.get(f"/api/v1/jobs/{j}/logs", headers=plane.auth("admin"))
    assert "[rank 0]" in logs.text
    assert "[rank 1]" in logs.text


def test_a_command_that_does_not_exist_exits_127(live: Live) -> None:
    plane, wait = live.plane, live.wait
    j = submit(plane, "vision-member", name="typo", gpus=1, command=["/no/such/program"])
    wait.until("the attempt ends", lambda: requeued(plane, j, attempt=1))
    requeue = next(e for e in get(plane, j)["events"] if e["kind"] == "pending")
    assert "exit code 127" in requeue["message"]


def launch_of(key: RunKey, command: tuple[str, ...], nodes: tuple[str, ...]) -> Launch:
    workers = tuple(Worker(r, n, 0, tuple(range(8))) for r, n in enumerate(nodes))
    return Launch(key, "t", "vision", command, {}, workers)


def test_start_adopts_a_job_submitted_before_a_crash_and_a_new_root_finds_its_jobs(
    slurm: FakeSlurm, executor_for: Any, tmp_path: Path
) -> None:
    executor = executor_for(accounting="sacct")
    key = RunKey(7, 1)
    launch = launch_of(key, ("/bin/bash", "-c", "sleep 1"), ("n-2",))
    # a server that died between sbatch and writing its record left a held job behind
    held = slurm.run(
        "sbatch", "--hold", "--parsable", f"--job-name={executor.options.tag}-job-7-1",
        "--nodelist=n3", "--gres=gpu:8", "-o", "/dev/null", "--wrap", "sleep 1",
    ).stdout.strip()  # fmt: skip
    executor.start(launch)
    executor.start(launch)  # and again: still the one job
    assert executor.slurm_job_id(key) == held
    named = slurm.run(
        "squeue", "-h", "-t", "all", "-n", f"{executor.options.tag}-job-7-1", "-o", "%i"
    )
    assert named.stdout.split() == [held]
    # a server on another host, without the run directories, finds it by its name
    other = SlurmExecutor(tmp_path / "elsewhere", executor.options).check()
    assert key in other.active()
    events: list[ExecEvent] = []
    deadline = time.monotonic() + 30
    while not any(e.kind == "exited" for e in events):
        assert time.monotonic() < deadline, events
        events += [e for e in other.poll(time.time()) if e.key == key]
        time.sleep(0.3)
    assert [e.kind for e in events] == ["started", "exited"]
    assert events[-1].exit_code == 0
    assert other.poll(time.time()) == []  # each event once
    # and a third, after the job left squeue's view, reads the end from accounting
    for accounting in ("sacct", "jobcomp"):
        late = SlurmExecutor(
            tmp_path / f"late-{accounting}", replace(executor.options, accounting=accounting)
        ).check()
        deadline = time.monotonic() + 10
        while (end := late.final_event(key)) is None:
            assert time.monotonic() < deadline, accounting
            time.sleep(0.3)
        assert (end.kind, end.exit_code) == ("exited", 0), accounting


def test_a_reclaim_waiting_for_its_victim_does_not_reclaim_again_on_slurm(
    live: Live, slurm: FakeSlurm
) -> None:
    """Issue 24's thrash, on Slurm, with victims that take their time to exit on SIGTERM:
    prod (nlp) reclaims research's (vision's) 1-GPU job for its 8-GPU job and, while that
    victim exits, does not preempt research's 16-GPU gang for its own 2x8 gang; nothing is
    preempted twice, and the ledger matches sacct after the cancels at the end."""
    began = time.time()
    executor, plane, wait = live.executor, live.plane, live.wait
    quotas = {
        "vision": {"guaranteed_gpus": 16, "borrowing_limit_gpus": 16},
        "nlp": {"guaranteed_gpus": 16, "lending_limit_gpus": 16},
    }
    for team, body in quotas.items():
        r = plane.client.put(
            f"/api/v1/admin/teams/{team}/quotas/h100-sxm5-80gb",
            json=body,
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200, r.text
    slow_exit = {"env": {"TERM_S": "3"}}  # 3 s to exit after SIGTERM, within the 5 s grace
    research = [
        submit(plane, "vision-member", name="gang16", gpus=8, workers=2, run_s=300, **slow_exit),
        submit(plane, "vision-member", name="one", gpus=1, run_s=300, **slow_exit),
        submit(plane, "vision-member", name="gang8", gpus=4, workers=2, run_s=300, **slow_exit),
    ]
    wait.until("research's jobs run", lambda: {state(plane, j) for j in research} == {"running"})
    gang16, one, gang8 = research
    p8 = submit(plane, "nlp-member", name="p8", gpus=8, run_s=300)
    p16 = submit(plane, "nlp-member", name="p16", gpus=8, workers=2, run_s=300)
    wait.until("prod's 8-GPU job runs", lambda: state(plane, p8) == "running")
    for _ in range(10):  # more cycles: nothing else may move
        tick(plane)
        time.sleep(0.2)
    states = {j: state(plane, j) for j in (*research, p8, p16)}
    assert states[gang16] == states[gang8] == "running", jobs_now(plane)
    assert states[p16] == "pending", jobs_now(plane)
    stops = {j: [e["kind"] for e in get(plane, j)["events"]].count("stopping") for j in states}
    assert stops[one] == 1, stops
    assert sum(stops.values()) == 1, stops
    for j in states:
        plane.client.post(f"/api/v1/jobs/{j}/cancel", headers=plane.auth("admin"))
    wait.until("every job ends", lambda: all(state(plane, j) == "cancelled" for j in states), 60)
    ledger_matches_sacct(plane, executor, began)
    with plane.sessions() as s:
        assert balance_problems(s) == []
