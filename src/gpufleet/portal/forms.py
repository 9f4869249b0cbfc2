"""The submit form <-> `JobRequest`: parsing what a browser sends, and errors per field.

The rules stay in `JobRequest` and `jobs.submit`; this module only turns form strings into
the request's types (a duration such as "30min", a command line split as a shell would)
and puts each error the rules raise next to the field it is about, in the form's words.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
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


@dataclass
class Parsed:
    """The request body the form stands for, and the fields that could not even be read."""

    data: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


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
    return out


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


def validation_errors(exc: ValidationError) -> dict[str, str]:
    """`JobRequest`'s validation errors by form field."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        name, message = _field_message(err)
        errors.setdefault(name, message)
    return errors


def _field_message(err: ErrorDetails) -> tuple[str, str]:
    loc = [str(p) for p in err["loc"]]
    message = str(err["msg"]).removeprefix("Value error, ")
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
