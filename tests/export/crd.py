"""Validate emitted Kubernetes objects against the copied CRDs (crds/README.md).

Three checks per CRD object:

- JSON Schema validation of `spec.versions[name == apiVersion's version].schema
  .openAPIV3Schema`;
- *strict* fields: an object schema that lists `properties` and neither
  `additionalProperties` nor `x-kubernetes-preserve-unknown-fields` gets
  `additionalProperties: false`, because the API server would silently prune an
  unknown (misspelt) field rather than reject it;
- every CEL rule (`x-kubernetes-validations`) on the path of the object is checked by
  a Python equivalent in `CEL`, and an unknown rule fails, so a CRD update cannot add
  a rule nobody checks. Update rules (`oldSelf`) do not apply to new objects.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).parent / "crds"
Obj = dict[str, Any]

CORE_KINDS = frozenset(
    {
        "Namespace",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "PriorityClass",
        "ConfigMap",
    }
)


@cache
def _schemas() -> dict[tuple[str, str], Obj]:
    """(apiVersion, kind) -> openAPIV3Schema, for every CRD version in crds/."""
    out: dict[tuple[str, str], Obj] = {}
    for path in sorted(CRDS.rglob("*.yaml.gz")):
        crd = yaml.safe_load(gzip.decompress(path.read_bytes()))
        group = crd["spec"]["group"]
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    for path in sorted(CRDS.rglob("*.transcribed.json")):
        schema = json.loads(path.read_text())
        out[
            (schema["properties"]["apiVersion"]["const"], schema["properties"]["kind"]["const"])
        ] = schema
    return out


def storage_version(group: str, kind: str) -> str:
    for path in sorted(CRDS.rglob("*.yaml.gz")):
        crd = yaml.safe_load(gzip.decompress(path.read_bytes()))
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            return next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    raise KeyError((group, kind))


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    schema = _strict(copy.deepcopy(_schemas()[(api_version, kind)]))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def has_crd(obj: Obj) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in _schemas()


# -- CEL rules, as Python --------------------------------------------------------------


def _cq_no_borrowing_without_cohort(spec: Obj) -> bool:
    if "cohortName" in spec or "resourceGroups" not in spec:
        return True
    return all(
        "borrowingLimit" not in r
        for rg in spec["resourceGroups"]
        for f in rg["flavors"]
        for r in f["resources"]
    )


CEL: dict[str, Callable[[Any], bool]] = {
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true": (
        _cq_no_borrowing_without_cohort
    ),
    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt "
    "== 'TryNextFlavor')": lambda s: (
        "preference" not in s
        or (
            s.get("whenCanBorrow") == "TryNextFlavor" and s.get("whenCanPreempt") == "TryNextFlavor"
        )
    ),
    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  "
    "self.borrowWithinCohort.policy != 'Never')": lambda s: (
        not (
            s.get("reclaimWithinCohort", "Never") == "Never"
            and "borrowWithinCohort" in s
            and s["borrowWithinCohort"].get("policy", "Never") != "Never"
        )
    ),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": lambda rg: all(
        len(f["resources"]) == len(rg["coveredResources"]) for f in rg["flavors"]
    ),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda s: (
        "topologyName" not in s or len(s.get("nodeLabels") or {}) >= 1
    ),
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": lambda xs: all(
        x.get("effect") in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in xs
    ),
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)": lambda xs: all(
        "key" in x or x.get("operator") == "Exists" for x in xs
    ),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)": lambda xs: all(
        "tolerationSeconds" not in x or x.get("effect") == "NoExecute" for x in xs
    ),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])": lambda xs: all(
        x.get("operator", "Equal") in ("Equal", "Exists") for x in xs
    ),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)": lambda xs: all(
        not (x.get("operator") == "Exists" and "value" in x) for x in xs
    ),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', "
    "'NoExecute'])": lambda xs: all(
        x.get("effect", "NoSchedule") in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in xs
    ),
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0": lambda xs: all(
        xs.count(x) == 1 for x in xs
    ),
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || self[size(self) - "
    "1].nodeLabel == 'kubernetes.io/hostname'": lambda xs: (
        all(x["nodeLabel"] != "kubernetes.io/hostname" for x in xs)
        or xs[-1]["nodeLabel"] == "kubernetes.io/hostname"
    ),
    "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)": lambda s: any(
        k in s for k in ("exactMatch", "regexMatch", "labelMatch")
    ),
    "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? "
    "1 : 0) <= 1": lambda s: sum(k in s for k in ("exactMatch", "regexMatch", "labelMatch")) <= 1,
}


def _normal(rule: str) -> str:
    return " ".join(rule.split())


_CEL = {_normal(k): v for k, v in CEL.items()}


def _rules(value: Any, schema: Any, path: str) -> Iterator[tuple[str, str, bool]]:
    """(path, rule, holds) for every CEL rule on the schema path of `value`."""
    if not isinstance(schema, dict):
        return
    for v in schema.get("x-kubernetes-validations", []):
        rule = _normal(v["rule"])
        if "oldSelf" in rule:
            continue
        check = _CEL.get(rule)
        if check is None:
            raise AssertionError(f"{path}: CEL rule with no Python check in crd.CEL: {rule}")
        yield path, rule, check(value)
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in schema.get("properties", {}):
                yield from _rules(sub, schema["properties"][key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from _rules(sub, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            yield from _rules(sub, schema["items"], f"{path}[{i}]")


def problems(obj: Obj) -> list[str]:
    """Everything wrong with one CRD object (empty: it would be accepted as written)."""
    key = (obj["apiVersion"], obj["kind"])
    where = f"{obj['kind']} {obj.get('metadata', {}).get('name')}"
    out = [
        f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator(*key).iter_errors(obj)
    ]
    out += [
        f"{where}: {p}: CEL rule fails: {rule}"
        for p, rule, holds in _rules(obj, _schemas()[key], "")
        if not holds
    ]
    return out
