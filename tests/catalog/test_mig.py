"""MIG catalog: the shipped facts, the lookups and the layout checker."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.columns import is_bool_column, unit_of
from gpufleet.catalog.mig import (
    MigLayout,
    MigProfile,
    check_layout,
    get_mig_layout,
    get_mig_profile,
    layouts_for,
    load_mig_layouts,
    load_mig_profiles,
    mig_accelerators,
    mig_profiles_for,
)
from gpufleet.errors import UnknownNameError

CANONICAL_MIG_ACCELERATORS = (
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "a100-pcie-80gb",
    "h100-sxm5-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200-sxm-192gb",
    "gb200",
)
LAYOUTS = load_mig_layouts()


# --- the data ---------------------------------------------------------------------------


def test_every_source_gpu_is_present_under_its_canonical_names() -> None:
    assert mig_accelerators() == CANONICAL_MIG_ACCELERATORS
    for accelerator in CANONICAL_MIG_ACCELERATORS:
        assert len(mig_profiles_for(accelerator)) == 7


@pytest.mark.parametrize("accelerator", CANONICAL_MIG_ACCELERATORS)
def test_mig_accelerators_agree_with_the_accelerator_table(accelerator: str) -> None:
    device = get_accelerator(accelerator)
    assert device.name == accelerator  # canonical names only, no aliases
    assert device.mig_max_instances == max(p.max_instances for p in mig_profiles_for(accelerator))


@pytest.mark.parametrize(
    ("accelerator", "profile", "expected"),
    [
        pytest.param("h100-sxm5-80gb", "1g.10gb", (1, 10 * 10**9, 7, False), id="h100-1g.10gb"),
        pytest.param("h100-sxm5-80gb", "3g.40gb", (3, 40 * 10**9, 2, False), id="h100-3g.40gb"),
        pytest.param("h100-pcie-80gb", "3g.40gb", (3, 40 * 10**9, 2, False), id="h100-pcie-same"),
        pytest.param("h100-sxm5-80gb", "1g.10gb+me", (1, 10 * 10**9, 1, True), id="h100-me"),
        pytest.param("a100-sxm4-40gb", "1g.10gb", (1, 10 * 10**9, 4, False), id="a100-40-1g.10gb"),
        pytest.param(
            "a100-pcie-80gb", "1g.20gb", (1, 20 * 10**9, 4, False), id="a100-pcie-1g.20gb"
        ),
        pytest.param("h100-nvl-94gb", "7g.94gb", (7, 94 * 10**9, 1, False), id="h100-nvl-whole"),
        pytest.param("h200-sxm-141gb", "3g.71gb", (3, 71 * 10**9, 2, False), id="h200-3g.71gb"),
        pytest.param("b200-sxm-192gb", "7g.180gb", (7, 180 * 10**9, 1, False), id="b200-whole"),
        pytest.param("gb200", "1g.47gb", (1, 47 * 10**9, 4, False), id="gb200-1g.47gb"),
    ],
)
def test_profile_spot_checks(
    accelerator: str, profile: str, expected: tuple[int, int, int, bool]
) -> None:
    """Expected: (compute slices, memory bytes, max instances, has media extensions)."""
    row = get_mig_profile(accelerator, profile)
    assert (
        row.compute_slices,
        row.memory_bytes,
        row.max_instances,
        row.has_media_extensions,
    ) == expected
    assert row.memory_slices is None  # no source gives per-profile memory slices


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("a100-sxm4-80gb", "a100-pcie-80gb", id="a100-80gb"),
        pytest.param("h100-sxm5-80gb", "h100-pcie-80gb", id="h100-80gb"),
    ],
)
def test_form_factors_of_one_silicon_share_the_profile_table(first: str, second: str) -> None:
    def facts(accelerator: str) -> list[tuple[object, ...]]:
        return [
            (p.profile, p.compute_slices, p.memory_bytes, p.max_instances)
            for p in mig_profiles_for(accelerator)
        ]

    assert facts(first) == facts(second)


@pytest.mark.parametrize(
    ("model", "rows"),
    [
        pytest.param(MigProfile, load_mig_profiles(), id="profiles"),
        pytest.param(MigLayout, LAYOUTS, id="layouts"),
    ],
)
def test_rows_carry_full_provenance(
    model: type[MigProfile | MigLayout], rows: tuple[object, ...]
) -> None:
    assert rows
    for row in rows:
        assert isinstance(row, model)
        assert row.retrieved == dt.date(2026, 11, 29)
        assert "@bd7160f" in row.source
        assert "(Apache-2.0)" in row.source


@pytest.mark.parametrize("model", [MigProfile, MigLayout], ids=["profiles", "layouts"])
def test_numeric_columns_name_their_unit(model: type[MigProfile | MigLayout]) -> None:
    numeric = (int, float, int | None, float | None)
    for column, field in model.model_fields.items():
        if field.annotation in numeric:
            assert unit_of(column) is not None, column
        if field.annotation in (bool, bool | None):
            assert is_bool_column(column), column


def test_every_profile_has_its_homogeneous_layout_at_max_instances() -> None:
    for profile in load_mig_profiles():
        name = "all-" + profile.profile.replace("+me", ".me")
        layout = get_mig_layout(profile.accelerator, name)
        assert layout.instances == ((profile.profile, profile.max_instances),)


def test_every_mig_accelerator_has_one_balancedget_mig_layout() -> None:
    balanced = Counter(row.accelerator for row in LAYOUTS if row.name == "all-balanced")
    assert balanced == Counter(CANONICAL_MIG_ACCELERATORS)


@pytest.mark.parametrize(
    ("accelerator", "name", "expected"),
    [
        pytest.param(
            "a100-sxm4-40gb",
            "all-balanced",
            (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
            id="a100-40gb-balanced",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            "all-balanced",
            (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
            id="h100-balanced",
        ),
        pytest.param(
            "a100-sxm4-40gb",
            "custom-config-device-7",
            (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
            id="examples-custom-config",
        ),
        pytest.param(
            "a100-sxm4-80gb",
            "balanced-k8s-dgx-station-80-device-2",
            (("2g.20gb", 3), ("1g.10gb", 1)),
            id="dgx-station",
        ),
        pytest.param(
            "h100-sxm5-80gb", "all-1g.10gb.me", (("1g.10gb+me", 1),), id="media-extensions"
        ),
    ],
)
def test_layout_spot_checks(
    accelerator: str, name: str, expected: tuple[tuple[str, int], ...]
) -> None:
    assert get_mig_layout(accelerator, name).instances == expected


# --- lookups ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("l4", id="gpu-without-mig"),
        pytest.param("H100", id="alias-not-resolved"),
        pytest.param("no-such-gpu", id="unknown"),
    ],
)
def test_non_mig_accelerators_have_no_profiles_or_layouts(name: str) -> None:
    assert mig_profiles_for(name) == ()
    assert layouts_for(name) == ()


@pytest.mark.parametrize(
    ("accelerator", "profile", "message"),
    [
        pytest.param(
            "h100-sxm5-80gb",
            "1g.10g",
            "unknown MIG profile for h100-sxm5-80gb '1g.10g'; did you mean '1g.10gb'",
            id="typo",
        ),
        pytest.param(
            "a100-sxm4-40gb",
            "3g.40gb",
            "unknown MIG profile for a100-sxm4-40gb '3g.40gb'; "
            "did you mean '7g.40gb' or '3g.20gb'?",
            id="profile-of-another-gpu",
        ),
        pytest.param("l4", "1g.10gb", "unknown MIG profile for l4 '1g.10gb'", id="no-mig"),
    ],
)
def test_unknown_profile_suggests(accelerator: str, profile: str, message: str) -> None:
    with pytest.raises(UnknownNameError) as caught:
        get_mig_profile(accelerator, profile)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("accelerator", "name", "message"),
    [
        pytest.param(
            "h100-sxm5-80gb",
            "all-balance",
            "unknown MIG layout for h100-sxm5-80gb 'all-balance'; did you mean 'all-balanced'",
            id="typo",
        ),
        pytest.param("l4", "all-balanced", "unknown MIG layout for l4 'all-balanced'", id="no-mig"),
    ],
)
def test_unknown_layout_suggests(accelerator: str, name: str, message: str) -> None:
    with pytest.raises(UnknownNameError) as caught:
        get_mig_layout(accelerator, name)
    assert str(caught.value).startswith(message)


def test_layout_dumps_as_its_csv_cells_and_reloads() -> None:
    layout = get_mig_layout("h100-sxm5-80gb", "all-balanced")
    record = layout.model_dump(mode="json")
    assert record["instances"] == ["1g.10gb=2", "2g.20gb=1", "3g.40gb=1"]
    assert MigLayout.model_validate(record) == layout
    assert dict(layout.instances) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_profile_lookup_ignores_case() -> None:
    assert get_mig_profile("h100-sxm5-80gb", " 1G.10GB+ME ").profile == "1g.10gb+me"


# --- the layout checker -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("accelerator", "instances", "problems"),
    [
        pytest.param("h100-sxm5-80gb", {"3g.40gb": 2}, [], id="valid"),
        pytest.param("h100-sxm5-80gb", {"3g.40gb": 2, "1g.10gb": 0}, [], id="zero-ignored"),
        pytest.param(
            "h100-sxm5-80gb",
            {"1g.11gb": 1},
            ["unknown MIG profile for h100-sxm5-80gb '1g.11gb'; did you mean '1g.10gb'?"],
            id="unknown-profile",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"1g.10gb": -1},
            ["1g.10gb: count -1 is negative"],
            id="negative",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"1g.20gb": 5},
            [
                "1g.20gb: 5 instances requested, at most 4 fit on h100-sxm5-80gb",
                "memory: 100 GB requested, more than h100-sxm5-80gb's 80 GB "
                "even allowing 1 GB of name rounding per instance",
            ],
            id="above-max",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"4g.40gb": 1, "2g.20gb": 2},
            ["compute: 8 slices requested, h100-sxm5-80gb has 7"],
            id="compute",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"1g.20gb": 4, "3g.40gb": 1},
            [
                "memory: 120 GB requested, more than h100-sxm5-80gb's 80 GB "
                "even allowing 1 GB of name rounding per instance"
            ],
            id="memory",
        ),
        pytest.param(
            "a100-sxm4-40gb",
            {"3g.20gb": 2, "1g.5gb": 1},
            [
                "memory: 45 GB requested, more than a100-sxm4-40gb's 40 GB "
                "even allowing 1 GB of name rounding per instance"
            ],
            id="memory-a100-40gb",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"1g.10gb+me": 2},
            [
                "1g.10gb+me: 2 instances requested, at most 1 fit on h100-sxm5-80gb",
                "media extensions: 2 +me instances requested, at most 1 per GPU",
            ],
            id="two-media",
        ),
        pytest.param(
            "h100-sxm5-80gb",
            {"1G.10GB": 4, "1g.10gb": 4},
            [
                "1g.10gb: 8 instances requested, at most 7 fit on h100-sxm5-80gb",
                "compute: 8 slices requested, h100-sxm5-80gb has 7",
            ],
            id="spellings-add-up",
        ),
        pytest.param(
            "l4",
            {"1g.10gb": 1},
            ["l4: no MIG profiles in the catalog for this accelerator"],
            id="no-mig",
        ),
    ],
)
def test_check_layout_messages(
    accelerator: str, instances: dict[str, int], problems: list[str]
) -> None:
    assert check_layout(accelerator, instances) == problems


@pytest.mark.parametrize(
    "layout", LAYOUTS, ids=[f"{row.accelerator}/{row.name}" for row in LAYOUTS]
)
def test_every_shipped_layout_passes(layout: MigLayout) -> None:
    assert check_layout(layout.accelerator, dict(layout.instances)) == []


@given(st.sampled_from(LAYOUTS))
def test_sampled_shipped_layout_passes(layout: MigLayout) -> None:
    assert check_layout(layout.accelerator, dict(layout.instances)) == []


@st.composite
def _sub_layouts(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """A shipped layout with some instances removed: still a layout that fits."""
    layout = draw(st.sampled_from(LAYOUTS))
    kept = {
        profile: draw(st.integers(min_value=0, max_value=count))
        for profile, count in layout.instances
    }
    return layout.accelerator, kept


@given(_sub_layouts())
def test_removing_instances_keeps_a_layout_valid(case: tuple[str, dict[str, int]]) -> None:
    accelerator, instances = case
    assert check_layout(accelerator, instances) == []


@st.composite
def _over_budget(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """Any multiset of one GPU's profiles using more than its 7 compute slices."""
    accelerator = draw(st.sampled_from(CANONICAL_MIG_ACCELERATORS))
    profiles = mig_profiles_for(accelerator)
    counts = draw(
        st.dictionaries(
            st.sampled_from([p.profile for p in profiles]),
            st.integers(min_value=1, max_value=8),
            min_size=1,
        ).filter(
            lambda chosen: (
                sum(get_mig_profile(accelerator, p).compute_slices * n for p, n in chosen.items())
                > 7
            )
        )
    )
    return accelerator, counts


@given(_over_budget())
def test_more_than_seven_compute_slices_always_fails(case: tuple[str, dict[str, int]]) -> None:
    accelerator, instances = case
    problems = check_layout(accelerator, instances)
    assert any(problem.startswith("compute: ") for problem in problems), problems


# --- data guards ------------------------------------------------------------------------

_GOOD_PROFILE = {
    "accelerator": "h100-sxm5-80gb",
    "profile": "1g.10gb",
    "compute_slices": "1",
    "memory_bytes": "10000000000",
    "max_instances": "7",
    "has_media_extensions": "false",
    "source": "test",
    "retrieved": "2026-11-29",
}


@pytest.mark.parametrize(
    ("column", "value"),
    [
        pytest.param("compute_slices", "2", id="slices-disagree-with-name"),
        pytest.param("memory_bytes", str(10 * 2**30), id="gib-instead-of-gb"),
        pytest.param("has_media_extensions", "true", id="me-flag-without-suffix"),
        pytest.param("profile", "1g-10gb", id="malformed-name"),
        pytest.param("max_instances", "0", id="zero-max"),
    ],
)
def test_profile_rows_that_contradict_their_name_are_rejected(column: str, value: str) -> None:
    assert MigProfile.model_validate(_GOOD_PROFILE).profile == "1g.10gb"
    with pytest.raises(ValidationError):
        MigProfile.model_validate({**_GOOD_PROFILE, column: value})


@pytest.mark.parametrize(
    "instances",
    [
        pytest.param((), id="empty"),
        pytest.param(("1g.10gb",), id="no-count"),
        pytest.param(("1g.10gb=0",), id="zero-count"),
        pytest.param(("1g.10gb=1", "1g.10gb=2"), id="repeated-profile"),
    ],
)
def test_malformed_layout_instances_are_rejected(instances: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError):
        MigLayout.model_validate(
            {
                "accelerator": "h100-sxm5-80gb",
                "name": "x",
                "instances": instances,
                "source": "test",
                "retrieved": "2026-11-29",
            }
        )
