"""Quota wait reasons are data, and their sentence agrees with the numbers it names.

Issue 30: "cohort ml has 16 to lend (this job needs 16)" while the job waited (the 16 was the
cohort's whole pool, part of which the team already borrowed). Every wait now carries a
`QuotaWait`; this property test draws cohorts, quotas, limits and usage, and checks for
every wait: the job needs more than the room named, the room's parts add up, and the
sentence shows those numbers.
"""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from gpufleet.cluster import MILLI
from gpufleet.sched.quota import QuotaBook, QuotaWait, gpus_text
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

FLAVOR = "h100-sxm5-80gb"
NAMES = ("a", "b", "c")


@st.composite
def books(draw: st.DrawFn) -> tuple[QuotaBook, dict[str, int]]:
    teams, used = [], {}
    cohort = draw(st.sampled_from([None, "ml"]))
    for name in NAMES:
        g = draw(st.integers(0, 16))
        quota: dict[str, object] = {"flavor": FLAVOR, "guaranteed_gpus": g}
        quota["borrowing"] = draw(st.booleans())
        if draw(st.booleans()):
            quota["borrowing_limit_gpus"] = draw(st.integers(0, 16))
        if draw(st.booleans()):
            quota["lending_limit_gpus"] = draw(st.integers(0, g))
        teams.append({"name": name, "cohort": cohort, "quotas": [quota]})
        used[name] = draw(st.integers(0, 24)) * MILLI
    spec = TeamsSpec.model_validate({"kind": "teams", "teams": teams})
    return QuotaBook(spec, {(n, FLAVOR): u for n, u in used.items()}), used


@settings(max_examples=300, deadline=None)
@given(books(), st.sampled_from(NAMES), st.integers(1, 32))
def test_every_quota_wait_agrees_with_its_numbers(
    drawn: tuple[QuotaBook, dict[str, int]], team: str, gpus: int
) -> None:
    book, used = drawn
    job = JobSpec(name="j", team=team, gpus=gpus)
    need = gpus * MILLI
    status = book.check(job, FLAVOR, need)
    if status.ok:
        limit = book.limit(book.teams[team], FLAVOR)
        assert limit is not None
        assert used[team] + need <= limit
        return
    wait = status.detail
    assert isinstance(wait, QuotaWait)
    event(wait.case)
    assert status.reason == wait.text()
    assert wait.used_milli == used[team]
    assert wait.need_milli == need
    assert wait.need_milli > wait.room_milli  # it waits because it needs more than the room
    assert f"(this job needs {gpus_text(need)})" in status.reason
    assert f"quota {gpus_text(used[team])}/{gpus_text(wait.guaranteed_milli)}" in status.reason
    if wait.case == "cohort-short":
        free, held, lend = wait.parts()
        assert free + lend == wait.room_milli
        assert 0 <= free <= max(0, wait.guaranteed_milli - wait.used_milli)
        assert f"it may take {gpus_text(wait.room_milli)} more now" in status.reason
        assert f"{gpus_text(free)} free of its guarantee" in status.reason
        assert f"{gpus_text(lend)} that cohort ml can still lend it" in status.reason
        if held:
            assert f"({gpus_text(held)} of it held by other teams)" in status.reason
    if wait.case == "capped":
        assert wait.cap_gpus is not None
        assert used[team] + need > wait.cap_gpus * MILLI
        assert f"({gpus_text(wait.room_milli)} more allowed)" in status.reason
