"""Expensive portal work (`portal.heavy`): a bounded number at once, a CPU budget per person
on an injected clock, refusals that compute and charge nothing, and the pages' messages."""

from __future__ import annotations

import concurrent.futures
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.routing import Mount

from control.conftest import Clock
from gpufleet.errors import UserError
from gpufleet.portal.heavy import (
    Budget,
    BusyError,
    Heavy,
    HeavyError,
    Limits,
    OverBudgetError,
    RunStoppedError,
)
from gpufleet.portal.whatif import PortableCluster

from .conftest import Portal
from .test_planner_whatif import CHAT

WAIT_S = 10.0  # how long a test waits for a thread to reach a state (never reached if fine)


def _portal_app(portal: Portal) -> FastAPI:
    app = portal.plane.client.app
    assert isinstance(app, FastAPI)
    for route in app.routes:
        if isinstance(route, Mount) and route.path == "/portal":
            assert isinstance(route.app, FastAPI)
            return route.app
    raise AssertionError("no portal mounted")


def _use(portal: Portal, **limits: Any) -> Heavy:
    """The portal's runner replaced by one with `limits`, in the request's thread, on the
    plane's manual clock."""
    heavy = Heavy(Limits(isolation="thread", **limits), clock=portal.plane.clock)
    _portal_app(portal).state.heavy = heavy
    return heavy


def _burn() -> int:
    """A little CPU (a millisecond or so): enough to overdraw a tiny budget."""
    return sum(i * i for i in range(20_000))


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the state was never reached"
        time.sleep(0.001)


class Gate:
    """Work that holds its slot until the test opens the gate."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.open = threading.Event()

    def work(self) -> str:
        self.started.set()
        assert self.open.wait(WAIT_S)
        return "done"


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.open.set()  # a failing test must not leave a thread waiting


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except Exception as exc:  # the test looks at it
            out.append(exc)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


# -- the budget ---------------------------------------------------------------------------


def test_the_budget_refuses_once_spent_and_recovers_as_it_refills() -> None:
    clock = Clock()
    budget = Budget(capacity_s=30.0, window_s=600.0, clock=clock)  # 0.05 CPU-s per second
    budget.check("ana")
    budget.charge("ana", 20.0)
    budget.check("ana")  # 10 s left: the next run may start
    budget.charge("ana", 11.0)  # and overdraws it by 1 s
    with pytest.raises(OverBudgetError) as refused:
        budget.check("ana")
    assert refused.value.status_code == 429
    assert refused.value.retry_after_s == 20  # 1 CPU-s at 0.05 per second
    assert refused.value.headers == {"Retry-After": "20"}
    assert "You can run it again at" in str(refused.value)
    budget.check("ben")  # the budget is per person
    clock.advance(19)
    with pytest.raises(OverBudgetError) as again:
        budget.check("ana")
    assert again.value.retry_after_s == 1
    clock.advance(1)
    budget.check("ana")
    clock.advance(10_000)
    assert budget.balance_s("ana") == 30.0  # full, never more


def test_a_long_run_overdraws_the_budget_for_as_long_as_it_takes_to_refill() -> None:
    clock = Clock()
    budget = Budget(capacity_s=30.0, window_s=600.0, clock=clock)
    budget.charge("ana", 90.0)  # one 90-CPU-second run: 60 s in debt = 20 minutes
    with pytest.raises(OverBudgetError) as refused:
        budget.check("ana")
    assert refused.value.retry_after_s == 1200
    assert refused.value.again_at_s == clock() + 1200
    assert "(in 20 min)" in str(refused.value)


def test_a_budget_of_zero_is_no_budget() -> None:
    budget = Budget(capacity_s=0.0, window_s=600.0, clock=Clock())
    budget.charge("ana", 1e9)
    budget.check("ana")


def test_heavy_charges_measured_cpu_and_a_refusal_charges_nothing() -> None:
    clock = Clock()
    heavy = Heavy(Limits(budget_cpu_s=1e-6, window_s=600.0, isolation="thread"), clock=clock)
    assert heavy.run("ana", _burn) == _burn()
    spent = heavy.budget.balance_s("ana")
    assert spent < 0  # charged what the run used
    calls: list[int] = []
    with pytest.raises(OverBudgetError) as refused:
        heavy.run("ana", calls.append, 1)
    assert calls == []  # nothing ran
    assert heavy.budget.balance_s("ana") == spent  # nothing charged
    clock.advance(refused.value.retry_after_s)
    heavy.run("ana", calls.append, 1)
    assert calls == [1]


def test_the_work_errors_are_charged_and_shown_as_user_errors() -> None:
    heavy = Heavy(Limits(budget_cpu_s=10.0, isolation="thread"), clock=Clock())

    def bad() -> None:
        raise UserError("add between 0 and 4096 GPUs")

    with pytest.raises(UserError, match="add between"):
        heavy.run("ana", bad)

    def bug() -> None:
        raise KeyError("oops")

    with pytest.raises(RuntimeError, match="traceback logged"):
        heavy.run("ana", bug)
    assert heavy.budget.balance_s("ana") < 10.0


# -- the bound on concurrent runs -----------------------------------------------------------


def test_runs_beyond_the_bound_wait_then_beyond_the_queue_are_refused(gate: Gate) -> None:
    heavy = Heavy(Limits(concurrency=1, queue=1, wait_s=WAIT_S, isolation="thread"), Clock())
    first, first_out = _in_thread(lambda: heavy.run("ana", gate.work))
    assert gate.started.wait(WAIT_S)
    second, second_out = _in_thread(lambda: heavy.run("ben", str, "waited"))
    _until(lambda: heavy._waiting == 1)
    before = heavy.budget.balance_s("cai")
    calls: list[int] = []
    with pytest.raises(BusyError) as busy:  # one running, one waiting: no room
        heavy.run("cai", calls.append, 1)
    assert busy.value.status_code == 503
    assert busy.value.headers["Retry-After"].isdigit()
    assert calls == []
    assert heavy.budget.balance_s("cai") == before
    gate.open.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert first_out == ["done"]
    assert second_out == ["waited"]  # it waited for the slot, then ran
    assert heavy.run("cai", str, "free again") == "free again"


def test_a_wait_is_bounded(gate: Gate) -> None:
    heavy = Heavy(Limits(concurrency=1, queue=4, wait_s=0.05, isolation="thread"), Clock())
    holder, _ = _in_thread(lambda: heavy.run("ana", gate.work))
    assert gate.started.wait(WAIT_S)
    started = time.monotonic()
    with pytest.raises(BusyError):
        heavy.run("ben", str, "never")
    assert 0.04 <= time.monotonic() - started < WAIT_S
    assert heavy._waiting == 0
    gate.open.set()
    holder.join(WAIT_S)


def test_limits_come_from_the_environment() -> None:
    env = {
        "GPUFLEET_PORTAL_HEAVY_CONCURRENCY": "2",
        "GPUFLEET_PORTAL_HEAVY_BUDGET_CPU_S": "120",
        "GPUFLEET_PORTAL_HEAVY_WINDOW_S": "3600",
        "GPUFLEET_PORTAL_HEAVY_ISOLATION": "Thread",
        "GPUFLEET_PORTAL_HEAVY_QUEUE": " ",
    }
    limits = Limits.from_env(env)
    assert (limits.concurrency, limits.budget_cpu_s, limits.window_s) == (2, 120.0, 3600.0)
    assert limits.isolation == "thread"
    assert limits.queue == Limits().queue
    with pytest.raises(UserError, match="CONCURRENCY='many' is not a number"):
        Limits.from_env({"GPUFLEET_PORTAL_HEAVY_CONCURRENCY": "many"})
    with pytest.raises(UserError, match="WINDOW_S must be"):
        Limits.from_env({"GPUFLEET_PORTAL_HEAVY_WINDOW_S": "0"})
    with pytest.raises(UserError, match="ISOLATION"):
        Limits(isolation="fork")  # type: ignore[arg-type]


# -- in a worker process --------------------------------------------------------------------


def test_runs_happen_in_a_worker_process_with_a_cpu_cap() -> None:
    heavy = Heavy(Limits(max_run_cpu_s=0.2, budget_cpu_s=60.0), clock=Clock())
    worker = heavy.run("ana", os.getpid)
    assert worker != os.getpid()
    assert heavy.run("ana", os.nice, 0) == min(19, os.nice(0) + 10)  # at a lower priority
    with pytest.raises(RunStoppedError) as stopped:
        heavy.run("ana", exec, "while True: pass")
    assert stopped.value.status_code == 422
    assert "stopped after 0.2 CPU-seconds" in str(stopped.value)
    assert 59.5 < heavy.budget.balance_s("ana") < 59.95  # charged the ~0.2 s it used
    assert heavy.run("ana", os.getpid) != worker  # a fresh worker after the stop


def test_a_cluster_travels_to_a_worker_and_back_the_same(portal: Portal) -> None:
    cluster = _portal_app(portal).state.ctx.cluster
    assert any(n.mig for n in cluster.nodes)  # MIG layouts and labels travel too
    copy = pickle.loads(pickle.dumps(PortableCluster.of(cluster))).cluster()
    assert copy == cluster
    assert copy.gpus_by_accelerator == cluster.gpus_by_accelerator


# -- the pages ------------------------------------------------------------------------------


def test_the_planner_says_when_the_budget_allows_another_run(portal: Portal) -> None:
    heavy = _use(portal, budget_cpu_s=0.001, window_s=0.001)  # 1 CPU-s back per second
    b = portal.as_("vision-member")
    assert b.post("/portal/planner", CHAT).status_code == 200  # overdraws the tiny budget
    spent = heavy.budget.balance_s("vision-member")
    r = b.post("/portal/planner", {**CHAT, "name": "again"})
    assert r.status_code == 429
    retry = int(r.headers["Retry-After"])
    assert retry >= 1
    assert 'id="planner-refused"' in r.text
    assert "You can run it again at" in r.text
    assert 'value="again"' in r.text  # the form as they filled it in
    assert 'id="plan-summary"' not in r.text
    assert heavy.budget.balance_s("vision-member") == spent  # the refusal cost nothing
    download = b.post("/portal/planner", {**CHAT, "action": "download"})
    assert download.status_code == 429
    assert "content-disposition" not in download.headers
    assert portal.as_("nlp-member").post("/portal/planner", CHAT).status_code == 200  # per person
    portal.plane.clock.advance(retry)
    r = b.post("/portal/planner", CHAT)
    assert r.status_code == 200
    assert 'id="plan-summary"' in r.text
    assert 'id="planner-refused"' not in r.text


def test_the_planner_and_what_if_say_busy_when_every_slot_is_taken(
    portal: Portal, gate: Gate
) -> None:
    heavy = _use(portal, concurrency=1, queue=0)
    holder, _ = _in_thread(lambda: heavy.run("someone", gate.work))
    assert gate.started.wait(WAIT_S)
    r = portal.as_("vision-member").post("/portal/planner", CHAT)
    assert r.status_code == 503
    assert r.headers["Retry-After"].isdigit()
    assert 'id="planner-refused"' in r.text
    assert "busy" in r.text
    assert 'id="planner-form"' in r.text
    w = portal.as_("vision-member").get("/portal/whatif?run=1&add_gpus=8")
    assert w.status_code == 503
    assert 'id="whatif-refused"' in w.text
    assert 'id="whatif-result"' not in w.text
    assert 'id="whatif-form"' in w.text
    assert heavy.budget.balance_s("vision-member") == heavy.limits.budget_cpu_s
    gate.open.set()
    holder.join(WAIT_S)
    assert portal.as_("vision-member").get("/portal/whatif?run=1&add_gpus=8").status_code == 200


def test_what_if_over_budget_is_refused_before_the_queue_is_read(portal: Portal) -> None:
    heavy = _use(portal, budget_cpu_s=30.0)
    heavy.budget.charge("vision-member", 31.0)
    r = portal.as_("vision-member").get("/portal/whatif?run=1&add_gpus=8")
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "20"
    assert 'id="whatif-refused"' in r.text
    assert "You can run it again at" in r.text
    assert 'value="8"' in r.text  # the scenario as asked
    assert portal.as_("vision-member").get("/portal/whatif").status_code == 200  # no run: free
    portal.plane.clock.advance(20)
    assert portal.as_("vision-member").get("/portal/whatif?run=1").status_code == 200


def test_a_refusal_nobody_caught_is_an_error_page_with_retry_after(portal: Portal) -> None:
    app = _portal_app(portal)

    def refuse() -> None:
        raise HeavyError("busy, try again in a moment", 7)

    app.add_api_route("/test-refusal", refuse)
    r = portal.as_("vision-member").get("/portal/test-refusal")
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "7"
    assert 'id="error-message">busy, try again in a moment' in r.text


def test_the_portal_installs_a_process_runner_by_default(portal: Portal) -> None:
    heavy = _portal_app(portal).state.heavy
    assert isinstance(heavy, Heavy)
    assert heavy.limits == Limits.from_env()
    assert heavy.isolation == "process"


def test_pages_wait_for_runs_on_threads_of_their_own(gate: Gate) -> None:
    """A page that waits for a run (`Heavy.call`) holds none of the request threads the API
    has so few of (`server.worker.API_THREADS`), and the runner's own threads are bounded."""
    import anyio
    import anyio.to_thread

    heavy = Heavy(Limits(concurrency=1, queue=1, wait_s=WAIT_S, isolation="thread"), Clock())
    seen: dict[str, float] = {}
    answers: list[object] = []

    async def page(user: str) -> None:
        try:
            answers.append(await heavy.call(heavy.run, user, gate.work))
        except BusyError as exc:
            answers.append(exc)

    async def main() -> None:
        request_threads = anyio.to_thread.current_default_thread_limiter()
        async with anyio.create_task_group() as tg:
            for user in ("ana", "ben", "cai", "dan"):
                tg.start_soon(page, user)
            with anyio.fail_after(WAIT_S):  # one runs, one waits, two were refused
                while not (gate.started.is_set() and heavy._waiting == 1):
                    await anyio.sleep(0.01)
                while heavy._threads.borrowed_tokens > 2:
                    await anyio.sleep(0.01)
            seen["request threads"] = request_threads.borrowed_tokens
            seen["runner threads"] = heavy._threads.borrowed_tokens
            gate.open.set()

    # a loop of its own, in a thread of its own: another test may have left one running in
    # this worker's thread
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, main).result(timeout=WAIT_S * 3)
    assert sorted(type(a).__name__ for a in answers) == ["BusyError", "BusyError", "str", "str"]
    assert seen == {"request threads": 0, "runner threads": 2}
    assert heavy._threads.total_tokens == 1 + 1 + 2  # runs, waiters, two to answer refusals
