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
seeds would leave one idle.

`assess` turns the seeds of one size into a verdict against every team's targets:

- wait: the upper end of the 95 % Student-t confidence interval of the mean, over
  seeds, of the team's p95 wait must be within `wait_p95` (with one seed: the value);
- long runs: the p95 of the long runs' waits, pooled over seeds (they are few per
  seed), within `long_run_wait_p95`;
- services: the lower end of the interval of the mean SLO attainment at least
  `slo_attainment`.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
        if ok is None and self.guess not in self.order and (fail is None or self.guess > fail):
            return self.guess  # the guess first, also when a failing size is already known
        if ok is None:
            assert fail is not None
            return min(self.max_nodes, max(fail + 1, math.ceil(fail * GROW)))
        if fail is None:
            return max(self.min_nodes, min(ok - 1, math.floor(ok * SHRINK)))
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
        out: list[SeedResult | None] = [None] * len(tasks)
        if self._pool is None:
            items: Iterator[tuple[int, SeedResult]] = map(_indexed, enumerate(tasks))
        else:
            items = self._pool.imap_unordered(_indexed, list(enumerate(tasks)), chunksize=1)
        for i, result in items:
            out[i] = result
            self.cpu_s += result.cpu_s
            self.runs += 1
            if self.on_done is not None:
                self.on_done(1)
        assert all(r is not None for r in out)
        return [r for r in out if r is not None]


@contextmanager
def runner(workers: int, on_done: Callable[[int], None] | None = None) -> Iterator[Runner]:
    """A `Runner` with a pool of `workers` processes (fork where the platform has it, so
    workers start without re-importing), or in-process for one worker."""
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

    def evaluate(self, wanted: Sequence[tuple[Variant, int]]) -> None:
        todo = list(dict.fromkeys((v.key, n) for v, n in wanted if (v.key, n) not in self.points))
        variants = {v.key: v for v, _ in wanted}
        self.variants.update(variants)
        tasks = [(variants[k], n, s) for k, n in todo for s in self.seeds]
        if self.on_submit is not None and tasks:
            self.on_submit(len(tasks))
        results = self.runner.run(tasks)
        per = len(self.seeds)
        for i, (k, n) in enumerate(todo):
            rs = results[i * per : (i + 1) * per]
            self.results[(k, n)] = rs
            self.points[(k, n)] = assess(self.spec, rs)

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
        wanted = extra + [
            (variant, n)
            for variant, search in searches.values()
            if (n := search.next()) is not None
        ]
        extra = []
        if not wanted:
            return
        evaluator.evaluate(wanted)
        for variant, search in searches.values():
            n = search.next()
            if n is not None and (variant.key, n) in evaluator.points:
                search.record(n, evaluator.points[(variant.key, n)].passed)


# -- verdicts ------------------------------------------------------------------------------


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
    from gpufleet.sim.report import fmt_duration

    return fmt_duration(seconds)
