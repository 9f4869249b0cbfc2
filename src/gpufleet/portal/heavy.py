"""Expensive portal work (the planner, what-if): a few at a time, off the request path, and a
CPU budget per person.

Measured (issue 23): one viewer looping the planner (about 4 s of CPU a run) raised every
user's API GET p99 from 0.3 to 0.8 s, and a what-if on a 1,000-node cluster with 2,500 jobs
waiting took 210 CPU-seconds. So:

- **Off the request path.** A run is computed in a worker process at a lower CPU priority
  (nice +10, `SCHED_BATCH`), not in a request thread: a thread that computes holds the GIL in
  5 ms slices, and every request thread of the process queues behind it (design 0010; the
  before/after figures are in docs/guide/portal.md). The inputs go to the worker and the
  result comes back pickled (a few KB to 1 MB, under 0.1 s even for 1,000 nodes); the worker
  is started by the first run (about 2 s: spawn imports the server's main module, then the
  planner's) and then kept. It is a fresh interpreter (spawn), never a fork of a server that
  holds sockets, connections and threads, and it exits when the server does.
- **A few at a time.** At most `concurrency` runs at once (default 1) and `queue` more waiting
  (default 4), each for at most `wait_s`; beyond that the answer is **503** with Retry-After:
  the server is busy for everyone, which is not this person's doing (429 would say they sent
  too much). Bounding the waiters also bounds the threads they hold.
- **A budget per person.** A token bucket of CPU-seconds per user name: `budget_cpu_s`
  (default 30) at most, refilled at `budget_cpu_s` per `window_s` (default 10 minutes). A run
  may start while the bucket is not negative and is charged its measured CPU time afterwards
  (so one long run can overdraw it); over budget the answer is **429** with Retry-After and
  the time the person can run again. A refused request computes nothing and is charged
  nothing.
- **Threads of their own.** A page that runs one calls `Heavy.call`, which runs the page's
  handler on this runner's own few threads: a request waiting for a run never holds one of
  the API worker's request threads, of which there are only a few (`server.worker.API_THREADS`).
- **A cap per run.** A run is stopped after `max_run_cpu_s` CPU-seconds (default 60; the
  worker's CPU timer) and answers 422; its worker is replaced, since it was interrupted
  anywhere.

All of this is per server process: with several API processes, each has its own runs, queue
and budgets (at most processes x `concurrency` runs at once; a person's budget is counted in
each process separately). Settings come from `GPUFLEET_PORTAL_HEAVY_*` environment variables
(`Limits.from_env`), read when the portal is created.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, fields
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import anyio.to_thread

from gpufleet.errors import UserError
from gpufleet.portal import fmt
from gpufleet.portal.web import render

if TYPE_CHECKING:  # a worker process imports this module: it needs none of the web stack
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

    from gpufleet.api.context import AppContext

log = logging.getLogger("gpufleet.portal.heavy")
T = TypeVar("T")
Isolation = Literal["process", "thread"]
ENV_PREFIX = "GPUFLEET_PORTAL_HEAVY_"
WORKER_NICE = 10  # below the API (0) and the reconciler (+5); a person waits, so not SCHED_IDLE
REFUSING_THREADS = 2  # threads beyond runs and waiters, so a refusal is answered at once
BUSY_RETRY_S = 10
PARENT_CHECK_S = 2.0
MAX_BUCKETS = 10_000


@dataclass(frozen=True)
class Limits:
    """The limits of one server process (see the module's docstring)."""

    concurrency: int = 1  # runs at once
    # runs waiting for one of those: each waits in one of the worker's request threads
    # (`server.worker.API_THREADS`, 8), so at most 1 + 2 of them are ever tied up here
    queue: int = 2
    wait_s: float = 20.0  # how long one waits before it is refused (503)
    budget_cpu_s: float = 30.0  # a person's bucket of CPU-seconds; 0: no budget
    window_s: float = 600.0  # the bucket refills `budget_cpu_s` in this long
    max_run_cpu_s: float = 60.0  # one run is stopped after this much CPU; 0: no cap
    isolation: Isolation = "process"  # "thread": in the request's thread (tests; no cap)

    def __post_init__(self) -> None:
        problems = []
        if self.concurrency < 1:
            problems.append("CONCURRENCY must be at least 1")
        if self.queue < 0:
            problems.append("QUEUE must be 0 or more")
        for name in ("wait_s", "budget_cpu_s", "max_run_cpu_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                problems.append(f"{name.upper()} must be a number, 0 or more")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            problems.append("WINDOW_S must be a number above 0")
        if self.isolation not in ("process", "thread"):
            problems.append("ISOLATION must be process or thread")
        if problems:
            raise UserError("portal limits: " + "; ".join(f"{ENV_PREFIX}{p}" for p in problems))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, with `GPUFLEET_PORTAL_HEAVY_<FIELD>` (upper case) where set."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper(), "").strip()
            if not raw:
                continue
            if f.name == "isolation":
                values[f.name] = raw.lower()
                continue
            try:
                values[f.name] = int(raw) if f.name in ("concurrency", "queue") else float(raw)
            except ValueError:
                raise UserError(
                    f"portal limits: {ENV_PREFIX}{f.name.upper()}={raw!r} is not a number"
                ) from None
        return cls(**values)


class HeavyError(UserError):
    """A run refused or stopped: the page says why, with this status (and Retry-After)."""

    status_code = 503
    title = "Busy"

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


class BusyError(HeavyError):
    """Every slot is taken and the queue is full, or the wait ran out (HTTP 503)."""


class OverBudgetError(HeavyError):
    """The person's CPU budget is spent for now (HTTP 429)."""

    status_code = 429
    title = "Please wait a little"

    def __init__(self, message: str, retry_after_s: int, again_at_s: float) -> None:
        super().__init__(message, retry_after_s)
        self.again_at_s = again_at_s


class RunStoppedError(HeavyError):
    """The run passed the CPU cap per run and was stopped (HTTP 422)."""

    status_code = 422
    title = "Too big to compute here"


@dataclass
class Budget:
    """A token bucket of CPU-seconds per user: `capacity_s` at most, refilled at
    `capacity_s / window_s` per second; a run starts while it is not negative and is charged
    after it. Thread-safe; `clock` is the server's (injectable) clock."""

    capacity_s: float
    window_s: float
    clock: Callable[[], float]
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def rate_per_s(self) -> float:
        return self.capacity_s / self.window_s

    def balance_s(self, user: str) -> float:
        """What `user` has left now (negative: in debt); `capacity_s` when off."""
        if self.capacity_s <= 0:
            return math.inf
        now = self.clock()
        with self._lock:
            return self._balance(user, now)

    def check(self, user: str) -> None:
        """OverBudgetError while `user`'s bucket is negative."""
        if self.capacity_s <= 0:
            return
        now = self.clock()
        with self._lock:
            left = self._balance(user, now)
        if left >= 0:
            return
        wait_s = max(1, math.ceil(-left / self.rate_per_s))
        at = now + wait_s
        shown = math.ceil(at / 60) * 60  # pages show minutes: never a minute too early
        raise OverBudgetError(
            "You have used up your planner and what-if computing time for now: each person "
            f"has {_seconds(self.capacity_s)} CPU-seconds every {fmt.duration(self.window_s)}, "
            f"and your recent runs used more. You can run it again at {fmt.when(shown)} "
            f"(in {fmt.duration(shown - now)}).",
            wait_s,
            at,
        )

    def charge(self, user: str, cpu_s: float) -> None:
        if self.capacity_s <= 0:
            return
        now = self.clock()
        with self._lock:
            left = self._balance(user, now)
            if len(self._buckets) >= MAX_BUCKETS:  # forget the full ones (they read as full)
                self._buckets = {
                    k: v
                    for k, v in self._buckets.items()
                    if self._balance(k, now) < self.capacity_s
                }
            self._buckets[user] = (left - max(0.0, cpu_s), now)

    def _balance(self, user: str, now: float) -> float:
        left, at = self._buckets.get(user, (self.capacity_s, now))
        return min(self.capacity_s, left + max(0.0, now - at) * self.rate_per_s)


def _seconds(value: float) -> str:
    return f"{value:g}"


class Heavy:
    """Runs expensive work for the portal's pages: `run(user, fn, *args)`."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self.budget = Budget(limits.budget_cpu_s, limits.window_s, clock)
        self._slots = threading.BoundedSemaphore(limits.concurrency)
        self._lock = threading.Lock()
        self._waiting = 0
        self._isolation: Isolation = limits.isolation
        # runs, waiters, and a few more that only get their refusal
        self._threads = anyio.CapacityLimiter(limits.concurrency + limits.queue + REFUSING_THREADS)

    @property
    def isolation(self) -> Isolation:
        return self._isolation

    async def call(self, handler: Callable[..., T], *args: Any) -> T:
        """`handler(*args)` (a page's sync handler that calls `run`) on this runner's own
        threads. Requests beyond them wait in the event loop, holding no thread."""
        return await anyio.to_thread.run_sync(handler, *args, limiter=self._threads)

    def check(self, user: str) -> None:
        """Refuse now (OverBudgetError) rather than after reading inputs for nothing."""
        self.budget.check(user)

    def run(self, user: str, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker, once a slot is free and `user` has budget left; charges
        `user` its CPU time. In a process, `fn` and `args` must pickle (a module-level
        function; no lambdas). Raises BusyError, OverBudgetError, RunStoppedError (nothing
        charged for the first two), a UserError of `fn`'s as a plain UserError, and a
        RuntimeError for anything else (its worker traceback is logged)."""
        self.check(user)
        if not self._slots.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self.limits.queue:
                    raise self._busy()
                self._waiting += 1
            try:
                acquired = self._slots.acquire(timeout=self.limits.wait_s)
            finally:
                with self._lock:
                    self._waiting -= 1
            if not acquired:
                raise self._busy()
        try:
            self.check(user)  # another run of theirs may have been charged while they waited
            outcome = self._compute(fn, args)
            self.budget.charge(user, outcome.cpu_s)
        finally:
            self._slots.release()
        return cast(T, outcome.unwrap())

    def _busy(self) -> BusyError:
        n = self.limits.concurrency
        return BusyError(
            f"The planner and what-if are busy: at most {n} "
            f"{'run' if n == 1 else 'runs'} at a time, and others are already waiting. "
            "Nothing was computed; try again in a moment.",
            BUSY_RETRY_S,
        )

    def _compute(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> _Outcome:
        if self._isolation == "thread":
            return _in_thread(fn, args)
        pool = _pool(self.limits.concurrency)
        try:
            future: Future[_Outcome] = pool.submit(_in_worker, self.limits.max_run_cpu_s, fn, args)
        except AssertionError as exc:  # a daemonic process may not have children
            _discard(pool)
            log.warning("portal runs stay in the server process from now on: %s", exc)
            self._isolation = "thread"
            return _in_thread(fn, args)
        except (OSError, RuntimeError) as exc:  # no worker could start; a broken pool
            _discard(pool)
            log.warning("no worker for a portal run: %s", exc)
            raise self._lost() from None
        try:
            outcome = future.result()
        except BrokenProcessPool:  # the worker died (killed, out of memory)
            _discard(pool)
            raise self._lost() from None
        except _CpuCapReachedError:  # the cap's signal just as the run ended
            outcome = _Outcome(self.limits.max_run_cpu_s, stopped=self.limits.max_run_cpu_s)
        if outcome.stopped is not None:
            _discard(pool)  # interrupted anywhere: start clean
        return outcome

    @staticmethod
    def _lost() -> BusyError:
        return BusyError(
            "The worker for this run stopped or could not start; try again.", BUSY_RETRY_S
        )


# -- the work itself, in a worker process or in the request's thread -------------------------


class _CpuCapReachedError(BaseException):
    """Raised by SIGPROF in the worker (a BaseException: `except Exception` lets it pass)."""


@dataclass(frozen=True)
class _Outcome:
    """What comes back from a run: its value or its error (as text, since not every
    exception pickles), and the CPU it used."""

    cpu_s: float
    value: Any = None
    user_error: str | None = None
    failure: str | None = None  # a bug's traceback, formatted in the worker
    stopped: float | None = None  # the cap it passed

    def unwrap(self) -> Any:
        if self.stopped is not None:
            raise RunStoppedError(
                f"This run was stopped after {_seconds(self.stopped)} CPU-seconds, the limit "
                "for one run. Try a smaller case, or ask an admin to raise "
                f"{ENV_PREFIX}MAX_RUN_CPU_S."
            )
        if self.user_error is not None:
            raise UserError(self.user_error)
        if self.failure is not None:
            log.error("a portal run failed in its worker:\n%s", self.failure)
            raise RuntimeError("a portal run failed in its worker (traceback logged)")
        return self.value


def _measured(fn: Callable[..., Any], args: tuple[Any, ...], cpu: Callable[[], float]) -> _Outcome:
    start = cpu()
    try:
        value = fn(*args)
    except UserError as exc:
        return _Outcome(cpu() - start, user_error=str(exc))
    except Exception:
        return _Outcome(cpu() - start, failure=traceback.format_exc())
    return _Outcome(cpu() - start, value=value)


def _in_thread(fn: Callable[..., Any], args: tuple[Any, ...]) -> _Outcome:
    """In the calling thread, charged that thread's CPU time (no cap: a thread cannot be
    stopped from outside)."""
    return _measured(fn, args, time.thread_time)


def _in_worker(max_cpu_s: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> _Outcome:
    """In the worker process, charged the process's CPU time (the worker does nothing else;
    a library's own threads count too), stopped by SIGPROF after `max_cpu_s`."""
    if max_cpu_s > 0:
        signal.setitimer(signal.ITIMER_PROF, max_cpu_s)
    start = time.process_time()
    try:
        return _measured(fn, args, time.process_time)
    except _CpuCapReachedError:
        return _Outcome(time.process_time() - start, stopped=max_cpu_s)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _on_sigprof(signum: int, frame: FrameType | None) -> None:
    raise _CpuCapReachedError


def _worker_setup(parent_pid: int) -> None:
    """A worker: lower priority, Ctrl-C is the server's to handle, the CPU cap's signal, and
    exit when the server is gone (PR_SET_PDEATHSIG would fire when the *thread* that started
    the worker ends, and request threads come and go)."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPROF, _on_sigprof)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# -- worker pools: one per process and size, shared by every portal app of the process -------

# keyed by (pid, workers): a forked copy of this module must not use its parent's pools
_pools: dict[tuple[int, int], ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(workers: int) -> ProcessPoolExecutor:
    key = (os.getpid(), workers)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_setup,
                initargs=(os.getpid(),),
            )
            _pools[key] = pool
        return pool


def _discard(pool: ProcessPoolExecutor) -> None:
    """Drop `pool` (the next run starts a fresh one) and stop its workers."""
    with _pools_lock:
        for key, known in list(_pools.items()):
            if known is pool:
                del _pools[key]
    _stop(pool)


def _stop(pool: ProcessPoolExecutor) -> None:
    processes = list((pool._processes or {}).values())  # shutdown() forgets them
    for process in processes:  # a run in progress ends now
        with contextlib.suppress(OSError, AttributeError):
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _stop_all() -> None:
    """At exit, before concurrent.futures joins the workers: do not wait for a run."""
    with _pools_lock:
        pools = [pool for (pid, _), pool in _pools.items() if pid == os.getpid()]
        _pools.clear()
    for pool in pools:
        _stop(pool)


# threading's exit hooks run in reverse order of registration, so this one runs before the
# one concurrent.futures registered when it was imported (above), which joins the workers
_register_atexit = getattr(threading, "_register_atexit", None)
if _register_atexit is not None:
    _register_atexit(_stop_all)


# -- the portal's side --------------------------------------------------------------------


def install(portal: FastAPI, ctx: AppContext, limits: Limits | None = None) -> Heavy:
    """Set up the portal's runner (`portal.state.heavy`, limits from the environment unless
    given, budgets on the server's clock) and a page for a refusal nobody caught."""
    heavy = Heavy(limits or Limits.from_env(), clock=ctx.clock)
    portal.state.heavy = heavy

    @portal.exception_handler(HeavyError)
    async def refused(request: Request, exc: HeavyError) -> Response:

        caller = getattr(request.state, "portal_me", None)
        response = render(
            request,
            "error.html.j2",
            caller,
            exc.status_code,
            title=exc.title,
            message=str(exc),
            status=exc.status_code,
        )
        response.headers.update(exc.headers)
        return response

    return heavy


def heavy_of(request: Request) -> Heavy:
    """The portal's runner. Pages take it through their own dependency (`Depends` on a
    function of theirs): FastAPI reads a dependency's annotations at run time, and this
    module leaves the web stack unimported for the worker's sake."""
    heavy: Heavy = request.app.state.heavy
    return heavy
