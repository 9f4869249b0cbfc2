"""`gpufleet simulate`'s outputs: the --out check, and a --jobs-out file undone when the
--out folder (`outputs.write_folder`) then fails, so a command that exits with an error
leaves none of its outputs behind; and the setup compare.json records. Apart from
`cli.simulate`, which stays under the module size of design 0015."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpufleet.outputs import check_writable

if TYPE_CHECKING:
    from gpufleet.cluster import Cluster
    from gpufleet.sim.engine import SimConfig
    from gpufleet.sim.setup import WorkloadSource
    from gpufleet.sim.workload import Workload


class Setup(Protocol):
    """What `compare_context` reads of the command's checked inputs (`cli.simulate._Inputs`,
    which imports this module: named by its fields, the modules stay free of a circle)."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def source(self) -> WorkloadSource: ...
    @property
    def teams_path(self) -> Path | None: ...
    @property
    def config(self) -> SimConfig: ...
    @property
    def horizon_s(self) -> float | None: ...
    @property
    def checkpoint_every(self) -> tuple[str, float, int] | None: ...


def check_out(out: Path | None) -> None:
    """--out is checked before anything runs (the guide says so): a run of minutes must not
    end in 'cannot write there'."""
    if out is not None:
        check_writable(out, "--out", folder=True)


@contextlib.contextmanager
def undone_on_failure(written: Path | None) -> Iterator[None]:
    """Remove `written` (a --jobs-out file) if the block fails: a command that exits with an
    error leaves none of its outputs behind."""
    try:
        yield
    except BaseException:
        if written is not None:
            written.unlink(missing_ok=True)
        raise


def compare_context(
    inputs: Setup, workloads: Sequence[Workload], warnings: Sequence[str], asked: int
) -> dict[str, Any]:
    """What compare.json says about the setup (no wall-clock times: it stays reproducible).
    A trace with nothing random simulated ran once per profile whatever --seeds asked (the
    `asked` seeds): the workload's kind says so and why, since compare.json, .md and .html
    are read without the terminal's note and otherwise showed one seed and no interval."""
    c, cfg = inputs.cluster, inputs.config
    once = (
        "; nothing random is simulated (no --gpu-mtbf-h), so each profile ran once"
        + (f" (--seeds {asked} asked)" if asked > 1 else "")
        + ": the result is exact, with no interval"
    )
    return {
        "cluster": {
            "name": c.name,
            "nodes": len(c.nodes),
            "gpus": sum(n.gpus for n in c.nodes),
            "accelerators": dict(sorted(c.gpus_by_accelerator.items())),
        },
        "workload": {
            "source": inputs.source.name,
            "kind": "generator: a new draw per seed"
            if inputs.source.varies_with_seed
            else "trace: the same jobs for every seed"
            + (once if cfg.failures.gpu_mtbf_h is None else ""),
            "jobs": [len(w.jobs) for w in workloads],
        },
        "teams": str(inputs.teams_path)
        if inputs.teams_path is not None
        else "none given: every team may use the whole cluster",
        "config": {
            "horizon_s": inputs.horizon_s,
            # the clock it counts on (said only with a horizon: one clock for every time)
            **(
                {"horizon_from": "the first arrival of each seed's workload"}
                if inputs.horizon_s is not None
                else {}
            ),
            "gpu_mtbf_h": cfg.failures.gpu_mtbf_h,
            "repair_mean_h": cfg.failures.repair_mean_h,
            "cycle_interval_s": cfg.cycle_interval_s,
            "restart_overhead_s": cfg.restart_overhead_s,
            # training and batch jobs without an interval of their own (None: they keep none)
            "checkpoint_every_s": None
            if inputs.checkpoint_every is None
            else inputs.checkpoint_every[1],
        },
        "warnings": list(warnings),
    }
