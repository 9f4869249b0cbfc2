"""The job page's table of a reason's parts names the numbers its sentence names."""

from __future__ import annotations

import re

import pytest

from gpufleet.api.views import public_waits
from gpufleet.control.quota_room import QuotaNever
from gpufleet.portal.wait_rows import wait_row
from gpufleet.sched.quota import QuotaWait
from gpufleet.sched.waits import (
    CapacityWait,
    NoQuota,
    ReservationAhead,
    ReservedFor,
    ShareWait,
    SliceWait,
    StrictFifo,
    TooLarge,
    UnknownLevel,
    Wait,
    numbers_of,
)


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


@pytest.mark.parametrize(
    "wait",
    [
        CapacityWait("single-nodes", "h100", 2, 8, room_workers=1, free_gpus=12),
        CapacityWait("single-nodes", "h100", 2, 8, room_workers=1, free_gpus=12, reserved_gpus=5),
        CapacityWait("group-short", "h100", 4, 8, level="leaf", most_free_in_level=24),
        CapacityWait(
            "group-short", "h100", 3, 2, level="leaf", most_free_in_level=0, reserved_gpus=8
        ),
        CapacityWait(
            "fragmented", "h100", 2, 8, level="leaf", most_free_in_level=20, most_room_in_level=1
        ),
        QuotaWait("cohort-short", "nlp", "h100", 6000, 8000, 8000, 4000, "ml", 2000, None),
        QuotaWait("capped", "nlp", "h100", 6000, 8000, 4000, 2000, "ml", 2000, 8),
        QuotaWait("cohort-short", "vision", "h100", 0, 8000, 16000, 4000, "ml", -4000, None),
        QuotaWait("guarantee-lent", "vision", "h100", 0, 8000, 8000, 8000, "ml", -6000, None),
        SliceWait("none-free", "a100", "1g.10gb"),
        ShareWait("h100", 500),
        ShareWait("h100", 250, unshared=True),
        ReservedFor(16, "h100", ("h-0", "h-1"), 3600.0, 2),
        ReservationAhead("12", 16, "h100", 600.0),
        StrictFifo("12"),
        NoQuota("nlp", "a100"),
        UnknownLevel("rack", ("block", "leaf")),
        TooLarge("h100", 3, 8, 2),
        TooLarge("h100", 5, 8, 4, spot_excluded=True, level="leaf"),
        QuotaNever(
            "nlp",
            "team nlp may hold at most 12 h100 GPUs (8 guaranteed + 6 that cohort ml can lend, "
            "capped at 12) and this job needs 16; an admin can change the team's quotas",
            16,
            (("h100", 12), ("a100", None)),
            (("h100", "8 guaranteed + 6 that cohort ml can lend, capped at 12"),),
        ),
    ],
    ids=lambda w: f"{w.kind}",
)
def test_a_row_names_what_its_sentence_names(wait: Wait) -> None:
    (out,) = public_waits([numbers_of(wait)], "nlp", None, full=True)
    row = wait_row(out)
    assert row.text == wait.text()
    shown = _numbers(" ".join((row.resource, row.needs, row.has, row.blocking)))
    assert _numbers(wait.text()) <= shown, row  # every number of the sentence is in the row


def test_every_kind_has_a_label() -> None:
    from gpufleet.portal.wait_rows import KIND_LABELS
    from gpufleet.sched import waits

    kinds = {
        obj.kind
        for obj in vars(waits).values()
        if isinstance(obj, type) and isinstance(getattr(obj, "kind", None), str)
    }
    # the scheduler's kinds, its quota record's, and the control plane's own
    assert kinds | {"quota", QuotaNever.kind} == set(KIND_LABELS)


def test_a_member_sees_no_other_teams_blocker_in_the_records() -> None:
    (out,) = public_waits([numbers_of(StrictFifo("11"))], "nlp", None, full=False)
    assert out.blocking_job == "another team's job"
    assert "'11'" not in out.text


def test_a_share_no_gpu_takes_is_said_so_in_the_row() -> None:
    (out,) = public_waits([numbers_of(ShareWait("h100", 250, unshared=True))], "nlp", None, True)
    assert wait_row(out).has == "no GPU takes fractions here"
