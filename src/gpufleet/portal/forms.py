"""The submit form <-> `JobRequest`: parsing what a browser sends, and errors per field.

The rules stay in `JobRequest` and `jobs.submit`; this module only turns form strings into
the request's types (a duration such as "30min", a command line split as a shell would)
and puts each error the rules raise next to the field it is about, in the form's words.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gpufleet.control.auth import ForbiddenError, NotFoundError
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.portal.fmt import duration
from gpufleet.quantities import parse_duration

FORM = "_form"  # errors about the whole form, not one field
REQUEST_TYPES = ("gpus", "mig_profile", "gpu_fraction")
DURATIONS = {
    "checkpoint_interval_s": "checkpoint_interval",
    "runtime_estimate_s": "runtime_estimate",
}
_TEXT_FIELDS = ("name", "team", "project", "kind", "accelerator", "priority_class")


DATA_ROW = re.compile(r"^data_(source|target)_(\d{1,2})$")


@dataclass
class Parsed:
    """The request body the form stands for, and the fields that could not even be read.

    `data_rows[i]` is the form row of the request's `data[i]` (empty rows are skipped), so
    an error about `data[i]` goes next to the row it came from."""

    data: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    data_rows: list[int] = field(default_factory=list)


def data_row_count(values: Mapping[str, str]) -> int:
    """How many data-staging rows the form sent (the highest row number + 1)."""
    rows = [int(m.group(2)) for k in values if (m := DATA_ROW.match(k))]
    return max(rows) + 1 if rows else 0


def parse_submit(values: Mapping[str, str]) -> Parsed:
    """Form values -> a `JobRequest` body (only the request type chosen counts)."""
    out = Parsed()
    for name in _TEXT_FIELDS:
        if values.get(name):
            out.data[name] = values[name]
    chosen = values.get("request_type") or "gpus"
    if chosen not in REQUEST_TYPES:
        out.errors["request_type"] = "choose whole GPUs, a MIG profile or a fraction"
    elif chosen == "gpus":
        _number(out, values, "gpus", int)
    elif chosen == "gpu_fraction":
        _number(out, values, "gpu_fraction", float)
    elif values.get("mig_profile"):
        out.data["mig_profile"] = values["mig_profile"]
    _number(out, values, "workers", int)
    out.data["preemptible"] = values.get("preemptible") in ("on", "true", "1")
    for key, name in DURATIONS.items():
        raw = values.get(name, "")
        if raw:
            try:
                out.data[key] = parse_duration(raw)
            except ValueError as exc:
                out.errors[name] = str(exc)
    command = values.get("command", "")
    if command:
        try:
            out.data["command"] = shlex.split(command)
        except ValueError as exc:
            out.errors["command"] = f"cannot split it into arguments: {exc}"
    env = _env(values.get("env", ""), out)
    if env:
        out.data["env"] = env
    _data(values, out)
    return out


def _data(values: Mapping[str, str], out: Parsed) -> None:
    """Rows of (source, target) -> `data`; a row with only one of them is an error there."""
    staged = []
    for row in range(data_row_count(values)):
        source = values.get(f"data_source_{row}", "").strip()
        target = values.get(f"data_target_{row}", "").strip()
        if not source and not target:
            continue
        if not source:
            out.errors[f"data_source_{row}"] = "give the path to copy from (or clear the row)"
        elif not target:
            out.errors[f"data_target_{row}"] = "give where to put it (or clear the row)"
        else:
            staged.append({"source": source, "target": target})
            out.data_rows.append(row)
    if staged:
        out.data["data"] = staged


def _number(out: Parsed, values: Mapping[str, str], name: str, kind: type[int | float]) -> None:
    raw = values.get(name, "")
    if not raw:
        return
    try:
        out.data[name] = kind(raw)
    except ValueError:
        out.errors[name] = "a whole number" if kind is int else "a number such as 0.5"


def _env(text: str, out: Parsed) -> dict[str, str]:
    env: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            out.errors["env"] = f"line {n}: write NAME=value"
            continue
        env[key.strip()] = value
    return env


def validation_errors(exc: ValidationError, data_rows: Sequence[int] = ()) -> dict[str, str]:
    """`JobRequest`'s validation errors by form field (`data_rows` as in `Parsed`)."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        name, message = _field_message(err, data_rows)
        errors.setdefault(name, message)
    return errors


def _field_message(err: ErrorDetails, data_rows: Sequence[int]) -> tuple[str, str]:
    loc = [str(p) for p in err["loc"]]
    message = _plain(err)
    if loc and loc[0] == "data":
        if len(loc) >= 3 and loc[1].isdigit() and int(loc[1]) < len(data_rows):
            return f"data_{loc[2]}_{data_rows[int(loc[1])]}", message
        return "data", message  # e.g. too many inputs
    if not loc:  # a model-level rule
        if "workers" in message:
            return "workers", message
        return "request_type", message
    name = loc[0]
    if name in DURATIONS:
        ctx = err.get("ctx") or {}
        if "le" in ctx:
            message = f"at most {duration(float(ctx['le']))}"
        elif "gt" in ctx:
            message = "must be longer than 0 s"
        return DURATIONS[name], message
    return name, message


def _plain(err: ErrorDetails) -> str:
    """Pydantic's message in the form's words where it has a stock one ("Field required",
    "Input should be greater than or equal to 1")."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "missing":
        return "required"
    if kind == "greater_than_equal":
        return f"at least {ctx['ge']}"
    if kind == "less_than_equal":
        return f"at most {ctx['le']}"
    if kind == "greater_than":
        return f"more than {ctx['gt']}"
    if kind == "less_than":
        return f"less than {ctx['lt']}"
    return str(err["msg"]).removeprefix("Value error, ")


_PREFIXED = re.compile(r"^(gpus|gpu_fraction|command|workers|mig_profile|accelerator): ")
_UNKNOWN_KINDS = {
    "accelerator in this cluster": "accelerator",
    "MIG profile in this cluster": "mig_profile",
    "priority class": "priority_class",
    "team": "team",
}


def submit_errors(exc: UserError) -> dict[str, str]:
    """An error `jobs.submit` (or the API's submit) raised, next to its field."""
    message = str(exc)
    if isinstance(exc, UnknownNameError):
        if exc.kind.startswith("project of team"):
            return {"project": message}
        return {_UNKNOWN_KINDS.get(exc.kind, FORM): message}
    if isinstance(exc, NotFoundError) and "team" in message:
        return {"team": message}
    if isinstance(exc, ForbiddenError):
        return {FORM: message}
    found = _PREFIXED.match(message)
    if found:
        return {found.group(1): message.removeprefix(found.group(0))}
    if re.match(r"^\d+ x \d+ = ", message):
        return {"workers": message}
    if "which team" in message:
        return {"team": message}
    return {FORM: message}
