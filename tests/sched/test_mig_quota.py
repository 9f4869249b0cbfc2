"""MIG slices against quota: charged the most a slice of the profile weighs until placed,
then exactly what the ledger bills for the slice it got (design 0008, "MIG slice weights").

Seven 1g slices fill an A100: they weigh 142 + 6 x 143 = 1000 thousandths, so a team
guaranteed one A100 may hold all seven. With every slice weighed 143 (the old rule) the
seventh would have taken the team to 1001 and waited for ever.
"""

from __future__ import annotations

from gpufleet.cluster import MigSlice, Node, State
from gpufleet.sched.decide import decide
from gpufleet.sched.quota import slice_milli, usage_milli
from gpufleet.specs.jobs import JobSpec

from .scenarios import A100, cluster, job, team, teams

ONE_A100 = teams(team("research", {A100: 1}))
SEVEN = (("1g.10gb", 7),)


def _running(name: str, slices: tuple[str, ...]) -> JobSpec:
    return job(
        name,
        mig_profile="1g.10gb",
        state="running",
        placement=[{"node": "a-0", "mig_slices": list(slices)}],
    )


def test_a_one_gpu_guarantee_holds_a_whole_gpu_cut_in_seven() -> None:
    c, _ = cluster(Node("a-0", A100, 2, ("b1", "l1"), mig=(SEVEN, SEVEN)))
    pending = [job(f"j{i}", mig_profile="1g.10gb", submitted_s=i) for i in range(8)]
    running: list[JobSpec] = []
    admitted_per_cycle = []
    for _ in range(3):
        d = decide(c, State(c), running, pending, ONE_A100, profile="fifo")
        admitted_per_cycle.append(len(d.admitted))
        running += [_running(name, placed[0].mig_slices) for name, placed in d.admitted.items()]
        pending = [j for j in pending if j.name not in d.admitted]
    # within a cycle each slice is charged 143 before it is placed: 6 x 143 fit in 1000;
    # the next cycle reads the six as placed (142 + 5 x 143 = 857) and 857 + 143 fits
    assert slice_milli(A100, "1g.10gb") == 143
    assert admitted_per_cycle == [6, 1, 0]
    state = State(c)
    for r in running:
        state.allocate(r.name, *(MigSlice(s) for p in r.placement for s in p.mig_slices))
    assert {sid.split("/")[1] for r in running for p in r.placement for sid in p.mig_slices} == {
        "gpu0"
    }
    assert usage_milli(state.usage_by(lambda _: "research")["research"]) == {A100: 1000}
    assert [j.name for j in pending] == ["j7"]
    d = decide(c, State(c), running, pending, ONE_A100, profile="fifo")
    assert "quota 1/1 a100-sxm4-80gb in use" in d.pending_reasons["j7"]
