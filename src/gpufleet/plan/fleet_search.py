"""The search over cluster sizes: bisection on whole nodes, seeds in a process pool.

`Bisection` is the pure search for one (accelerator, profile, arrival scale): from a
first guess it steps down (× 2/3) while sizes pass and up (× 1.5) while they fail, until
it holds a failing size and a passing one, then halves the gap down to one node. It
assumes that the service level does not get worse with more nodes (monotone); the
simulation does not guarantee that, so the answer is the smallest *found* passing size
with the size one node below failing, and the report lists every size evaluated.

`Runner` runs (variant, nodes, seed) tasks, in a pool of worker processes when asked.
Each task is a pure function of its inputs (the seed is fixed per point, the workload
drawn from `default_rng(seed)`), and results are put back in task order, so the
answer does not depend on the number of workers or on which finishes first. Several
searches advance in lockstep (`run_searches`): each round submits the next size of
every unfinished search at once, which keeps both cores busy where one search's five
seeds would leave one idle. `RayRunner` does the same on a Ray cluster (`--ray ADDRESS`),
for users with more than one machine: the same tasks, the results put back by index, so
the plan is byte-identical to the local pool's.

`assess` turns the seeds of one size into a verdict against every team's targets:

- wait: the upper end of the 95 % Student-t confidence interval of the mean, over
  seeds, of the team's p95 wait must be within `wait_p95` (with one seed: the value);
- long runs: the p95 of the long runs' waits, pooled over seeds (they are few per
  seed), within `long_run_wait_p95`;
- services: the lower end of the interval of the mean SLO attainment at least
  `slo_attainment`.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufleet.errors import UserError
from gpufleet.formatting import fmt_duration
from gpufleet.plan.fleet_model import Interval, SizePoint, TeamPoint
from gpufleet.plan.fleet_setup import Variant
from gpufleet.plan.fleet_sim import SeedResult, run_seed
from gpufleet.sim.compare import CONFIDENCE, mean_ci
from gpufleet.specs.fleet import FleetPlanSpec

GROW = 1.5
SHRINK = 2 / 3


@dataclass
class Bisection:
    """Smallest passing node count in [min_nodes, max_nodes], by the rules above."""

    min_nodes: int
    max_nodes: int
    guess: int
    fail: int | None = None  # largest size known to fail
    ok: int | None = None  # smallest size known to pass
    order: list[int] = field(default_factory=list)
    # the steps while only one side is known: smaller when the guess is informed (a search
    # started next to a known answer, `fleet._extra_searches`)
    grow: float = GROW
    shrink: float = SHRINK

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"bad bounds [{self.min_nodes}, {self.max_nodes}]")
        self.guess = min(max(self.guess, self.min_nodes), self.max_nodes)

    def next(self) -> int | None:
        """The next size to evaluate; None when the search is over."""
        fail, ok = self.fail, self.ok
        if ok is not None and ok <= self.min_nodes:
            return None
        if fail is not None and fail >= self.max_nodes:
            return None
        if (
            self.guess not in self.order
            and (fail is None or self.guess > fail)
            and (ok is None or self.guess < ok)
        ):
            return self.guess  # the guess first, also when a bound is already known
        if ok is None:
            assert fail is not None
            return min(self.max_nodes, max(fail + 1, math.ceil(fail * self.grow)))
        if fail is None:
            return max(self.min_nodes, min(ok - 1, math.floor(ok * self.shrink)))
        if ok - fail <= 1:
            return None
        return (fail + ok) // 2

    def record(self, nodes: int, passed: bool) -> None:
        self.order.append(nodes)
        if passed:
            self.ok = nodes if self.ok is None else min(self.ok, nodes)
        else:
            self.fail = nodes if self.fail is None else max(self.fail, nodes)

    @property
    def answer(self) -> int | None:
        """The smallest passing size found once done (None: nothing up to max_nodes passed)."""
        return self.ok


def smallest_passing(
    passes: Callable[[int], bool], min_nodes: int, max_nodes: int, guess: int
) -> int | None:
    """Run one bisection with a predicate (what the lockstep driver does for many)."""
    search = Bisection(min_nodes, max_nodes, guess)
    while (n := search.next()) is not None:
        search.record(n, passes(n))
    return search.answer


# -- running simulations -------------------------------------------------------------------

Task = tuple[Variant, int, int]  # variant, nodes, seed


def _run_task(task: Task) -> SeedResult:
    variant, nodes, seed = task
    return run_seed(variant, nodes, seed)


def _indexed(item: tuple[int, Task]) -> tuple[int, SeedResult]:
    return item[0], _run_task(item[1])


class Runner:
    """Runs tasks in order-independent fashion; `workers` > 1 uses a process pool."""

    def __init__(self, pool: Any | None, on_done: Callable[[int], None] | None = None) -> None:
        self._pool = pool
        self.on_done = on_done
        self.cpu_s = 0.0
        self.runs = 0

    def run(self, tasks: Sequence[Task]) -> list[SeedResult]:
        if self._pool is None:
            items: Iterator[tuple[int, SeedResult]] = map(_indexed, enumerate(tasks))
        else:
            items = self._pool.imap_unordered(_indexed, list(enumerate(tasks)), chunksize=1)
        return self._collect(items, len(tasks))

    def _collect(self, items: Iterable[tuple[int, SeedResult]], n: int) -> list[SeedResult]:
        """(task index, result) pairs as they finish, placed by index; ticks the counters."""
        out: list[SeedResult | None] = [None] * n
        for i, result in items:
            out[i] = result
            self.cpu_s += result.cpu_s
            self.runs += 1
            if self.on_done is not None:
                self.on_done(1)
        assert all(r is not None for r in out)
        return [r for r in out if r is not None]


class RayRunner(Runner):
    """Runs tasks as Ray remote tasks (one CPU each) on a cluster this process is connected
    to. Results are placed by task index as they finish, so the answer is the local
    pool's; `on_done`, `cpu_s` and `runs` tick per finished task as there."""

    def __init__(self, ray: Any, on_done: Callable[[int], None] | None = None) -> None:
        super().__init__(None, on_done)
        self._ray = ray
        # run_seed pickles by reference: the workers import it from their own gpufleet
        self._remote = ray.remote(num_cpus=1)(run_seed)
        # one copy of each variant in the object store, not one per task (a trace's jobs
        # would otherwise travel with every seed and size); the variant is kept so its
        # id is not reused while the runner lives
        self._stored: dict[int, tuple[Variant, Any]] = {}

    def _ref(self, variant: Variant) -> Any:
        kept = self._stored.get(id(variant))
        if kept is None:
            kept = self._stored[id(variant)] = (variant, self._ray.put(variant))
        return kept[1]

    def run(self, tasks: Sequence[Task]) -> list[SeedResult]:
        refs = [self._remote.remote(self._ref(v), nodes, seed) for v, nodes, seed in tasks]
        return self._collect(self._finished(refs), len(tasks))

    def _finished(self, refs: list[Any]) -> Iterator[tuple[int, SeedResult]]:
        ray = self._ray
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        while pending:
            # block for one, then take every other one already done without waiting
            done, pending = ray.wait(pending, num_returns=1)
            if pending:
                more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                done += more
            for ref, result in zip(done, ray.get(done), strict=True):
                yield index[ref], result


RAY_ADDRESSES = (
    "ADDRESS: the head's HOST:PORT (what `ray start --head` prints; port 6379 by default) "
    "from a machine of the cluster, 'auto' (the cluster `ray start` joined on this machine, "
    "or $RAY_ADDRESS), or 'local' (a private Ray on this machine for this run only)"
)
RAY_CHECKS = (
    "check that the cluster is up (`ray status` on the head); that this machine is one of "
    "its nodes (`ray start --address=HEAD:6379` here), with the same Ray and gpufleet; and, "
    "if the cluster uses token authentication, that RAY_AUTH_MODE=token and its token "
    "(~/.ray/auth_token or $RAY_AUTH_TOKEN) are set here too"
)


def _ray_error(address: str, problem: str, hint: str = RAY_CHECKS) -> UserError:
    return UserError(f"--ray {address}: {problem}\n  {hint}")


def _check_reachable(address: str) -> None:
    """Fail fast on an address nothing listens at: Ray itself retries such a connection for
    minutes, printing warnings, before it gives up."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise _ray_error(address, "not HOST:PORT, 'auto' or 'local'", RAY_ADDRESSES)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as exc:
        raise _ray_error(address, f"no Ray head answers there ({exc})") from None


@contextmanager
def ray_runner(address: str, on_done: Callable[[int], None] | None = None) -> Iterator[RayRunner]:
    """A `RayRunner` connected to the cluster at `address` (see `RAY_ADDRESSES`; Ray Client's
    ray://, which needs ray[client], is not supported), disconnected on exit: `ray.shutdown`
    leaves a cluster that was already running up, and stops the one 'local' started. A
    process already connected to Ray (a notebook, a Ray job) keeps its connection open."""
    if address.startswith("ray://"):
        raise _ray_error(
            address,
            "Ray Client (ray://) is not supported: run gpufleet on a machine of the cluster",
            RAY_ADDRESSES,
        )
    if address not in ("auto", "local"):
        _check_reachable(address)
    import ray  # here, not at the top: importing Ray takes seconds the local path never needs

    connected = ray.is_initialized()
    if not connected:
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            text = str(exc).strip()
            if text.startswith("Could not find any running Ray instance"):
                # 'auto' with nothing to find; Ray's own advice names its flags, not ours
                problem = "no Ray cluster on this machine (`ray start` did not run here)"
            else:  # Ray's "Failed to connect" says why in the last line of its cause
                why = [text.splitlines()[0]] if text else [type(exc).__name__]
                cause = str(exc.__cause__ or "").strip()
                if cause:
                    why.append(cause.splitlines()[-1])
                problem = "Ray could not connect: " + ": ".join(why)
            raise _ray_error(address, problem) from None
    try:
        yield RayRunner(ray, on_done)
    finally:
        if not connected:
            ray.shutdown()


@contextmanager
def runner(
    workers: int,
    on_done: Callable[[int], None] | None = None,
    ray_address: str | None = None,
) -> Iterator[Runner]:
    """A `Runner` with a pool of `workers` processes (fork where the platform has it, so
    workers start without re-importing), or in-process for one worker; with `ray_address`,
    on that Ray cluster instead (`ray_runner`; `workers` is then unused: Ray runs one task
    per CPU its nodes offer)."""
    if ray_address is not None:
        with ray_runner(ray_address, on_done) as ray_run:
            yield ray_run
        return
    if workers <= 1:
        yield Runner(None, on_done)
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ctx.Pool(workers) as pool:
        yield Runner(pool, on_done)


@dataclass
class Evaluator:
    """Evaluates sizes of variants on fixed seeds, remembering every point it ran."""

    spec: FleetPlanSpec
    runner: Runner
    seeds: Sequence[int]
    on_submit: Callable[[int], None] | None = None
    results: dict[tuple[str, int], list[SeedResult]] = field(default_factory=dict)
    variants: dict[str, Variant] = field(default_factory=dict)
    points: dict[tuple[str, int], SizePoint] = field(default_factory=dict)

    staged: bool = True  # False: every point on every seed (a what-if sweep shows them all)
    # points whose first seeds did not settle them, waiting for the rest of the seeds
    partial: dict[tuple[str, int], list[SeedResult]] = field(default_factory=dict)

    def evaluate(self, wanted: Sequence[tuple[Variant, int]]) -> None:
        """Run the wanted points to the end (see `advance`)."""
        keys = [(v.key, n) for v, n in wanted]
        while any(k not in self.points for k in keys):
            self.advance(wanted)

    def advance(self, wanted: Sequence[tuple[Variant, int]]) -> None:
        """One batch for the pool: the first `early_seeds(len(seeds))` seeds of every wanted
        point not yet started, and the remaining seeds of every wanted point those did not
        settle (`decided`). A point is in `points` once complete. Which seeds run depends
        only on results, never on timing, so the answer does not depend on the worker
        count; one batch for both kinds keeps the pool's barriers to one per round."""
        keys = list(dict.fromkeys((v.key, n) for v, n in wanted if (v.key, n) not in self.points))
        self.variants.update({v.key: v for v, _ in wanted})
        n_first = early_seeds(len(self.seeds)) if self.staged else len(self.seeds)
        first = list(self.seeds[:n_first])
        rest = list(self.seeds[n_first:])
        fresh = [k for k in keys if k not in self.partial]
        waiting = [k for k in keys if k in self.partial]
        tasks = [(k, s) for k in fresh for s in first] + [(k, s) for k in waiting for s in rest]
        if not tasks:
            return
        if self.on_submit is not None:
            self.on_submit(len(tasks))
        # the longest first (a smaller cluster queues more and simulates longer), so the
        # pool's last tasks are short ones; the order of the results does not depend on it
        order = sorted(range(len(tasks)), key=lambda i: (tasks[i][0][1], i))
        ran = self.runner.run(
            [(self.variants[tasks[i][0][0]], tasks[i][0][1], tasks[i][1]) for i in order]
        )
        by_task = dict(zip(order, ran, strict=True))
        found: dict[tuple[str, int], list[SeedResult]] = {k: [] for k in keys}
        for i, (key, _) in enumerate(tasks):
            found[key].append(by_task[i])
        for key in fresh:
            if rest and not decided(assess(self.spec, found[key])):
                self.partial[key] = found[key]
            else:
                self._complete(key, found[key])
        for key in waiting:
            self._complete(key, self.partial.pop(key) + found[key])

    def _complete(self, key: tuple[str, int], results: list[SeedResult]) -> None:
        self.results[key] = results
        self.points[key] = assess(self.spec, results)

    def point(self, variant: Variant, nodes: int) -> SizePoint:
        self.evaluate([(variant, nodes)])
        return self.points[(variant.key, nodes)]


def run_searches(
    evaluator: Evaluator,
    searches: Mapping[str, tuple[Variant, Bisection]],
    also: Sequence[tuple[Variant, int]] = (),
) -> None:
    """Advance every search in lockstep until all are done; `also` joins the first round
    (points wanted anyway, so the pool has more to do at once)."""
    extra = list(also)
    while True:
        extra = [(v, n) for v, n in extra if (v.key, n) not in evaluator.points]
        wanted = extra + [
            (variant, n)
            for variant, search in searches.values()
            if (n := search.next()) is not None
        ]
        if not wanted:
            return
        evaluator.advance(wanted)
        for variant, search in searches.values():
            n = search.next()
            if n is not None and (variant.key, n) in evaluator.points:
                search.record(n, evaluator.points[(variant.key, n)].passed)


# -- verdicts ------------------------------------------------------------------------------


def early_seeds(seeds: int) -> int:
    """How many seeds run first at every point: three of five (all of up to three). They
    settle the clear cases, most of a bisection's points: sizes far too small, or large
    enough that nobody waits. (Two would settle a few more but move an answer: the +20 %
    sensitivity of plan-multi-team.yaml passed one node early on two seeds.)"""
    return seeds if seeds <= 3 else max(3, math.ceil(0.6 * seeds))


def decided(point: SizePoint) -> bool:
    """Whether the seeds run so far settle a point, so the others need not run: it passes
    (every bound already on the right side of its target: with fewer seeds the bounds are
    only wider), or some team clearly fails (its p95 wait's *lower* bound above its target,
    or its services' *upper* bound of attainment below theirs). A point near its targets
    runs on every seed."""
    if point.passed:
        return True
    for t in point.teams:
        wait = t.wait_p95_s
        if t.wait_target_s is not None and wait is not None:
            low = _lower(wait)
            if low is not None and low > t.wait_target_s:
                return True
        slo = t.slo_attainment
        if t.slo_target is not None and slo is not None:
            high = _upper(slo)
            if high is not None and high < t.slo_target:
                return True
    return False


def interval(
    values: Sequence[float | None], low: float = -math.inf, high: float = math.inf
) -> Interval:
    """Mean over seeds with its Student-t interval, the ends kept within [low, high] (a
    wait is never negative, an attainment never above 1)."""
    est = mean_ci(values, CONFIDENCE)

    def clip(v: float | None) -> float | None:
        return None if v is None else min(high, max(low, v))

    return Interval(mean=est.mean, low=clip(est.low), high=clip(est.high), n=est.n)


def _upper(i: Interval) -> float | None:
    return i.high if i.high is not None else i.mean


def _lower(i: Interval) -> float | None:
    return i.low if i.low is not None else i.mean


def assess(spec: FleetPlanSpec, results: Sequence[SeedResult]) -> SizePoint:
    """Every team's service level at one size (all seeds) against its targets."""
    teams: list[TeamPoint] = []
    for team in spec.teams:
        rows = [r.teams[team.name] for r in results]
        reasons: list[str] = []
        target = team.targets.wait_p95
        waits = [row.wait_p95_s for row in rows]
        wait = interval(waits, 0.0) if any(w is not None for w in waits) else None
        if target is not None and wait is not None:
            upper = _upper(wait)
            if upper is not None and upper > target:
                reasons.append(
                    f"p95 wait up to {_hours(upper)} (upper 95 % bound) > target {_hours(target)}"
                )
        long_target = team.targets.long_run_limit_s
        pooled = [w for row in rows for w in row.long_waits_s]
        long_p95 = float(np.percentile(pooled, 95)) if pooled else None
        if long_target is not None and long_p95 is not None and long_p95 > long_target:
            reasons.append(
                f"long runs' p95 wait {_hours(long_p95)} (pooled) > {_hours(long_target)}"
            )
        attain = [row.slo_attainment for row in rows]
        slo = interval(attain, 0.0, 1.0) if any(a is not None for a in attain) else None
        if slo is not None:
            lower = _lower(slo)
            if lower is not None and lower < team.targets.slo_attainment:
                reasons.append(
                    f"services hold their GPUs {lower:.2%} of the time (lower 95 % bound) < "
                    f"{team.targets.slo_attainment:.2%}"
                )
        teams.append(
            TeamPoint(
                team=team.name,
                jobs_per_seed=float(np.mean([row.jobs for row in rows])),
                unstarted=sum(row.unstarted for row in rows),
                wait_p50_s=_mean([row.wait_p50_s for row in rows]),
                wait_p95_s=wait,
                wait_target_s=target,
                long_runs=len(pooled),
                long_run_wait_p95_s=long_p95,
                long_run_target_s=long_target,
                slo_attainment=slo,
                slo_target=team.targets.slo_attainment if slo is not None else None,
                held_gpus_mean=float(np.mean([row.held_mean for row in rows])),
                passed=not reasons,
                reasons=reasons,
            )
        )
    first = results[0]
    return SizePoint(
        nodes=first.nodes,
        gpus=first.gpus,
        passed=all(t.passed for t in teams),
        teams=teams,
        allocation=interval([r.allocation for r in results], 0.0, 1.0),
        running_jobs_mean=float(np.mean([r.running_mean for r in results])),
        running_jobs_p95=float(np.mean([r.running_p95 for r in results])),
        running_jobs_max=float(max(r.running_max for r in results)),
        preemptions_per_seed=float(np.mean([r.preemptions for r in results])),
        lost_gpu_hours_per_seed=float(np.mean([r.lost_gpu_hours for r in results])),
        jobs_per_seed=float(np.mean([r.jobs for r in results])),
    )


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _hours(seconds: float | None) -> str:

    return fmt_duration(seconds)
