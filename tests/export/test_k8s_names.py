"""Names as Kubernetes takes them (a review: `k8s_name(dots=True)` wrote `tier..1` and
`gold.-premium`, which no API server accepts, and the export exited 0).

A DNS-1123 subdomain is dot-separated DNS labels, so each part between dots is normalised on
its own; what cannot become a name is refused (exit 2 from the CLI, tests/export/test_cli.py).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.errors import UserError
from gpufleet.export.k8s import k8s_name

from .scenarios import documents, export, fleet_of

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@pytest.mark.parametrize(
    ("name", "subdomain"),
    [
        ("tier..1", "tier.1"),
        ("gold. premium", "gold.premium"),
        ("a-.b", "a.b"),
        ("x.-y", "x.y"),
        (".lead.", "lead"),
        ("Batch High", "batch-high"),
        ("a100-sxm4-80gb-mig-1g.10gb", "a100-sxm4-80gb-mig-1g.10gb"),
    ],
)
def test_each_part_between_dots_becomes_a_dns_label(name: str, subdomain: str) -> None:
    assert k8s_name(name, "x", dots=True) == subdomain


@pytest.mark.parametrize("name", ["...", "-.-", "é", "a" * 254])
def test_what_cannot_be_a_subdomain_is_refused(name: str) -> None:
    with pytest.raises(UserError, match="cannot be a Kubernetes name"):
        k8s_name(name, "x", dots=True)


NAMES = st.text(alphabet="aZ09.-_ +é", max_size=70)


@given(name=NAMES, dots=st.booleans())
def test_every_name_is_valid_or_refused(name: str, dots: bool) -> None:
    try:
        out = k8s_name(name, "x", dots=dots)
    except UserError:
        return
    pattern, limit = (DNS_SUBDOMAIN, 253) if dots else (DNS_LABEL, 63)
    assert pattern.fullmatch(out), out
    assert len(out) <= limit


CLUSTER = {"nodes": [{"name": "g", "count": 1, "accelerator": "l4"}]}


def teams(*classes: str) -> dict[str, Any]:
    return {
        "priority_classes": [{"name": c, "value": i} for i, c in enumerate(classes)],
        "teams": [{"name": "a", "quota": {"l4": 4}, "default_priority": classes[0]}],
    }


def test_the_reviewers_priority_classes_export_as_valid_names() -> None:
    fleet = fleet_of(CLUSTER, teams("tier..1", "gold. premium"))
    for target, kind in (
        ("kueue", "WorkloadPriorityClass"),
        ("volcano", "PriorityClass"),
        ("kai", "PriorityClass"),
    ):
        names = {
            o["metadata"]["name"] for _, o in documents(export(fleet, target)) if o["kind"] == kind
        }
        assert names == {"tier.1", "gold.premium"}, target


@pytest.mark.parametrize("target", ["kueue", "volcano", "kai"])
def test_priority_classes_that_become_one_name_are_refused(target: str) -> None:
    fleet = fleet_of(CLUSTER, teams("tier..1", "tier.1"))
    with pytest.raises(UserError, match=r"would both be named 'tier\.1'"):
        export(fleet, target)
