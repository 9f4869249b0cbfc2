"""`gpufleet import kueue DIR`: an existing Kueue setup as a gpufleet teams spec, to simulate it.

Reads ClusterQueues, Cohorts, ResourceFlavors and WorkloadPriorityClasses
(multi-document YAML, v1beta2 or v1beta1) and inverts `export.kueue`: a
ClusterQueue is a team, its cohort the team's cohort, `fairSharing.weight` its
weight; a ResourceFlavor is an accelerator, found from gpufleet's annotation, a
`gpufleet.io/accelerator` or `nvidia.com/gpu.product` node label, or the
flavor's own name. Quotas of one accelerator are summed over its resources,
MIG slices weighed by their compute share (`sched.quota.slice_milli`), which
gives back what `model.Flavor.split` spread out. What Kueue has and gpufleet's
teams do not (cpu and memory quotas, cohort trees, cohort-owned quota,
preemption and queueing policies, which are profile choices in gpufleet) is
listed in the notes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import get_mig_profile
from gpufleet.cluster import MILLI
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.export.bundle import dump_yaml
from gpufleet.export.k8s import (
    ACCELERATOR_KEY,
    DEVICE_RESOURCES,
    GPU_PRODUCTS,
    PRODUCT_LABEL,
    k8s_name,
)
from gpufleet.export.kueue import (
    COHORT_KEY,
    DEFAULT_PRIORITY_KEY,
    PREEMPTIBLE_KEY,
    PRIORITY_CLASS_KEY,
    PROJECTS_KEY,
    TEAM_KEY,
)
from gpufleet.export.model import gpus_of
from gpufleet.sched.quota import slice_milli
from gpufleet.specs.load import validate
from gpufleet.specs.teams import DEFAULT_PRIORITY_CLASSES, Quota, TeamsSpec

GROUP = "kueue.x-k8s.io/"
MIG_PREFIX = "nvidia.com/mig-"
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([a-zA-Z]*|[eE][+-]?\d+)$")
_SUFFIX = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_PRODUCTS = {v.lower(): k for k, v in GPU_PRODUCTS.items()}
_WHOLE_RESOURCES = frozenset(DEVICE_RESOURCES.values())


def parse_quantity(value: Any, where: str) -> Fraction:
    """A Kubernetes quantity (8, "500m", "1k", "2Gi", "1e3") as an exact fraction."""
    if isinstance(value, bool):
        raise UserError(f"{where}: expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(repr(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise UserError(f"{where}: '{value}' is not a Kubernetes quantity")
    number, suffix = Fraction(match[1]), match[2]
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    if suffix not in _SUFFIX:
        raise UserError(f"{where}: '{value}' has an unknown quantity suffix '{suffix}'")
    return number * _SUFFIX[suffix]


def read_documents(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every YAML document of a file, or of the *.yaml / *.yml files of a directory."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    files = (
        sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if path.is_dir()
        else [path]
    )
    if not files:
        raise UserError(f"{path}: no .yaml or .yml files in this directory")
    out: list[tuple[str, dict[str, Any]]] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
            docs = list(yaml.safe_load_all(text))
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{file}: cannot read ({exc})") from None
        except yaml.YAMLError as exc:
            raise UserError(f"{file}: YAML syntax error: {exc}") from None
        for i, doc in enumerate(docs):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise UserError(f"{file}: document {i + 1} is not a mapping")
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                out.extend((f"{file} (document {i + 1})", d) for d in doc["items"])
            else:
                out.append((f"{file} (document {i + 1})", doc))
    return out


def _meta(doc: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    meta = doc.get("metadata") or {}
    return str(meta.get("name", "")), dict(meta.get("annotations") or {})


def _resolve(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return get_accelerator(name).name
    except UnknownNameError:
        return None


def flavor_accelerator(name: str, doc: Mapping[str, Any] | None) -> str | None:
    """The catalog accelerator a ResourceFlavor stands for, or None when nothing says."""
    candidates: list[str | None] = []
    if doc is not None:
        _, annotations = _meta(doc)
        labels = (doc.get("spec") or {}).get("nodeLabels") or {}
        product = str(labels.get(PRODUCT_LABEL, "")).lower()
        product = re.sub(r"-(mig-.*|shared)$", "", product)
        candidates += [annotations.get(ACCELERATOR_KEY), labels.get(ACCELERATOR_KEY)]
        candidates.append(_PRODUCTS.get(product))
    candidates.append(name)
    for c in candidates:
        found = _resolve(c)
        if found is not None:
            return found
    return None


def _mig_profile(accelerator: str, resource: str, where: str) -> str:
    profile = resource.removeprefix(MIG_PREFIX)
    if profile.endswith(".me"):
        profile = profile[: -len(".me")] + "+me"
    try:
        return get_mig_profile(accelerator, profile).profile
    except UnknownNameError as exc:
        raise UserError(f"{where}: {exc}") from None


@dataclass
class _Sum:
    """Thousandths of a GPU per accelerator, and whether every entry carried the limit."""

    nominal: int = 0
    borrowing: int = 0
    lending: int = 0
    entries: int = 0
    with_borrowing: int = 0
    with_lending: int = 0


@dataclass(frozen=True)
class Imported:
    teams: TeamsSpec
    notes: tuple[str, ...]
    source: str


def _by_kind(docs: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for where, doc in docs:
        if str(doc.get("apiVersion", "")).startswith(GROUP):
            out.setdefault(str(doc.get("kind")), []).append((where, doc))
    return out


def _priority_classes(wpcs: list[tuple[str, Any]], notes: list[str]) -> list[dict[str, Any]]:
    if not wpcs:
        notes.append("No WorkloadPriorityClasses: the teams get gpufleet's default classes.")
        return [c.model_dump() for c in DEFAULT_PRIORITY_CLASSES]
    out: list[dict[str, Any]] = []
    for where, doc in wpcs:
        name, annotations = _meta(doc)
        name = annotations.get(PRIORITY_CLASS_KEY, name)
        value = doc.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise UserError(f"{where}: WorkloadPriorityClass {name} has no integer value")
        preemptible = annotations.get(PREEMPTIBLE_KEY, "true") != "false"
        out.append({"name": name, "value": value, "preemptible": preemptible})
    if not any(PREEMPTIBLE_KEY in _meta(d)[1] for _, d in wpcs):
        notes.append("Kueue has no non-preemptible priority class: every class is preemptible.")
    return sorted(out, key=lambda c: (-c["value"], c["name"]))


def _projects(text: str | None, where: str) -> list[str]:
    if not text:
        return []
    try:
        projects = json.loads(text)
    except json.JSONDecodeError:
        projects = None
    if not isinstance(projects, list) or not all(isinstance(p, str) for p in projects):
        raise UserError(f"{where}: annotation {PROJECTS_KEY} is not a JSON list of names")
    return projects


def _default_priority(
    annotations: Mapping[str, str], classes: list[dict[str, Any]], team: str, notes: list[str]
) -> str:
    given = annotations.get(DEFAULT_PRIORITY_KEY)
    names = [c["name"] for c in classes]
    if given in names:
        return str(given)
    chosen = min(classes, key=lambda c: (abs(c["value"]), c["value"]))["name"]
    notes.append(
        f"Team {team}: no default priority class recorded; {chosen} (the value nearest 0, "
        "Kueue's priority without a class) is used."
    )
    return str(chosen)


def _cohort_notes(cohorts: list[tuple[str, Any]], notes: list[str]) -> None:
    for _where, doc in cohorts:
        name = _meta(doc)[0]
        spec = doc.get("spec") or {}
        if spec.get("parentName"):
            notes.append(
                f"Cohort {name} has parent {spec['parentName']}: gpufleet cohorts are flat; "
                f"its ClusterQueues stay in cohort {name}."
            )
        if spec.get("resourceGroups"):
            notes.append(
                f"Cohort {name} owns quota of its own: not imported (gpufleet quota "
                "belongs to teams)."
            )


def _sums(
    where: str, queue: Mapping[str, Any], flavor_docs: Mapping[str, Any], ignored: set[str]
) -> dict[str, _Sum]:
    """Per accelerator, the thousandths of a GPU a ClusterQueue's GPU resources add up to."""
    name = _meta(queue)[0]
    sums: dict[str, _Sum] = {}
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        for fl in group.get("flavors") or []:
            fname = str(fl.get("name", ""))
            for res in fl.get("resources") or []:
                rname = str(res.get("name", ""))
                at = f"{where}: ClusterQueue {name}, flavor {fname}, {rname}"
                if rname not in _WHOLE_RESOURCES and not rname.startswith(MIG_PREFIX):
                    ignored.add(rname)
                    continue
                acc = flavor_accelerator(fname, flavor_docs.get(fname))
                if acc is None:
                    raise UserError(
                        f"{at}: cannot tell which accelerator flavor {fname} is; give the "
                        f"ResourceFlavor a {PRODUCT_LABEL} node label or a "
                        f"{ACCELERATOR_KEY} annotation naming a catalog accelerator"
                    )
                unit = (
                    MILLI
                    if rname in _WHOLE_RESOURCES
                    else slice_milli(acc, _mig_profile(acc, rname, at))
                )
                s = sums.setdefault(acc, _Sum())
                s.entries += 1
                s.nominal += int(parse_quantity(res.get("nominalQuota", 0), at) * unit)
                if "borrowingLimit" in res:
                    s.with_borrowing += 1
                    s.borrowing += int(parse_quantity(res["borrowingLimit"], at) * unit)
                if "lendingLimit" in res:
                    s.with_lending += 1
                    s.lending += int(parse_quantity(res["lendingLimit"], at) * unit)
    return sums


def _quotas(
    team: str, sums: Mapping[str, _Sum], cohort: bool, notes: list[str]
) -> list[dict[str, Any]]:
    quotas: list[dict[str, Any]] = []
    for acc, s in sums.items():
        g = gpus_of(s.nominal)
        q: dict[str, Any] = {"flavor": acc, "guaranteed_gpus": g}
        # slice weights are rounded up (7 x 1g = 1.001 GPUs): only a larger gap is news
        if abs(s.nominal - g * MILLI) > max(MILLI // 20, g):
            notes.append(
                f"Team {team}: {s.nominal / MILLI:g} GPUs of {acc} guaranteed "
                f"(slices weighed by compute share), rounded to {g}."
            )
        if cohort:
            for key, n, total in (
                ("borrowing_limit_gpus", s.with_borrowing, s.borrowing),
                ("lending_limit_gpus", s.with_lending, s.lending),
            ):
                if n == s.entries:
                    q[key] = gpus_of(total)
                elif n:
                    notes.append(
                        f"Team {team}: only some {acc} resources have a "
                        f"{key.removesuffix('_gpus').replace('_', ' ')}; none is imported."
                    )
            if q.get("lending_limit_gpus", 0) > g:
                q["lending_limit_gpus"] = g
        quotas.append(q)
    return quotas


def _cohort(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> str | None:
    cohort = spec.get("cohortName") or spec.get("cohort")
    if not cohort:
        return None
    original = annotations.get(COHORT_KEY)
    if original and k8s_name(original, "cohort", dots=True) == cohort:
        return original  # the name before it became a Kubernetes name
    return str(cohort)


def _team(
    where: str,
    queue: Mapping[str, Any],
    sums: Mapping[str, _Sum],
    classes: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any]:
    name, annotations = _meta(queue)
    team_name = annotations.get(TEAM_KEY, name)
    spec = queue.get("spec") or {}
    cohort = _cohort(spec, annotations)
    weight = parse_quantity((spec.get("fairSharing") or {}).get("weight", 1), where)
    if weight <= 0:
        notes.append(
            f"Team {team_name}: fair-sharing weight 0 read as 0.001 (gpufleet "
            "weights are positive)."
        )
        weight = Fraction(1, 1000)
    team: dict[str, Any] = {"name": team_name}
    if cohort:
        team["cohort"] = cohort
    team["weight"] = int(weight) if weight.denominator == 1 else float(weight)
    team["quotas"] = _quotas(team_name, sums, cohort is not None, notes)
    projects = _projects(annotations.get(PROJECTS_KEY), where)
    if projects:
        team["projects"] = projects
    team["default_priority"] = _default_priority(annotations, classes, team_name, notes)
    return team


def import_kueue(docs: list[tuple[str, dict[str, Any]]], source: str) -> Imported:
    kinds = _by_kind(docs)
    queues = kinds.get("ClusterQueue", [])
    if not queues:
        raise UserError(f"{source}: no Kueue ClusterQueue found (apiVersion {GROUP}...)")
    notes: list[str] = []
    flavor_docs = {_meta(d)[0]: d for _, d in kinds.get("ResourceFlavor", [])}
    _cohort_notes(kinds.get("Cohort", []), notes)
    classes = _priority_classes(kinds.get("WorkloadPriorityClass", []), notes)
    ignored: set[str] = set()
    teams = [
        _team(where, doc, _sums(where, doc, flavor_docs, ignored), classes, notes)
        for where, doc in queues
    ]
    if ignored:
        notes.append(
            f"Quotas of {', '.join(sorted(ignored))} are not imported: gpufleet's teams hold "
            "GPUs only."
        )
    notes.append(
        "Preemption, queueing strategy and fair-sharing settings of the ClusterQueues are "
        "scheduler choices in gpufleet: simulate with --profile kueue-like to model Kueue."
    )
    data = {"kind": "teams", "priority_classes": classes, "teams": teams}
    spec = validate(TeamsSpec, data, f"{source} (imported)")
    return Imported(spec, tuple(dict.fromkeys(notes)), source)


def _quota_dict(q: Quota) -> dict[str, Any]:
    out: dict[str, Any] = {"flavor": q.flavor, "guaranteed_gpus": q.guaranteed_gpus}
    for key in ("limit_gpus", "borrowing_limit_gpus", "lending_limit_gpus"):
        if getattr(q, key) is not None:
            out[key] = getattr(q, key)
    return out


def render_teams(imported: Imported) -> str:
    """The imported teams as a teams YAML file, notes as comments on top."""
    lines = [
        f"# Imported by `gpufleet import kueue` from {imported.source}.",
        "# Notes:",
        *(f"#   - {n}" for n in imported.notes),
    ]
    spec = imported.teams
    data = {
        "kind": "teams",
        "priority_classes": [c.model_dump() for c in spec.priority_classes],
        "teams": [
            {
                k: v
                for k, v in {
                    "name": t.name,
                    "cohort": t.cohort,
                    "weight": int(t.weight) if t.weight.is_integer() else t.weight,
                    "quotas": [_quota_dict(q) for q in t.quotas],
                    "projects": list(t.projects) or None,
                    "default_priority": t.default_priority,
                }.items()
                if v is not None
            }
            for t in spec.teams
        ],
    }
    return "\n".join(lines) + "\n" + dump_yaml(data)
