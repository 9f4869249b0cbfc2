"""Read YAML specs and turn validation failures into messages a person can act on.

pydantic reports errors as (location tuple, type, message); users need
`model.hiden: unknown field; did you mean 'hidden'?`. This module does that
translation in one place, so every command reports bad input the same way.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpufleet.errors import SpecError, UserError, suggest

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; missing, unreadable or malformed files are user errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a YAML file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a UTF-8 text file") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise UserError(f"{path}: YAML syntax error at {where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: YAML syntax error: {exc}") from None


def validate(model: type[M], data: Any, source: str) -> M:
    """Validate `data` as `model`; every problem is reported with its path."""
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else type(data).__name__
        raise SpecError(source, [f"expected a mapping of fields at the top level, got {kind}"])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # A cross-field check may report several problems, one per line.
        errors = _without_derived_noise(model, exc.errors())
        problems = [line for err in errors for line in describe(model, err).split("\n")]
        raise SpecError(source, problems) from None


def load(model: type[M], path: Path) -> M:
    """Load a spec of one kind; a file of another kind gets one clear line, not a cascade."""
    data = read_yaml(path)
    field = model.model_fields.get("kind")
    expected = field.default if field is not None else None
    if isinstance(data, Mapping) and isinstance(expected, str):
        given = data.get("kind")
        if given is not None and given != expected:
            raise SpecError(
                str(path),
                [f"kind: this command reads {expected} specs; this file is kind '{given}'"],
            )
    return validate(model, data, str(path))


def describe(model: type[BaseModel], err: ErrorDetails) -> str:
    """One line for one pydantic error: `path: what is wrong; what to do`."""
    loc = [p for p in err["loc"] if not _is_union_tag(p)]
    path = format_path(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _fields_at(model, loc[:-1])
        hint = suggest(str(loc[-1]), known, limit=1) if known else []
        tail = f"; did you mean '{hint[0]}'?" if hint else ""
        return f"{path}: unknown field{tail}"
    if kind == "missing":
        return f"{path}: required field missing"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        field = str(ctx.get("discriminator", "kind")).strip("'")
        options = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
        hint = suggest(str(ctx.get("tag", "")), options, limit=1)
        tail = f"; did you mean '{hint[0]}'?" if hint else f"; one of {', '.join(options)}"
        return f"{path}.{field}: unknown {field} '{ctx.get('tag')}'{tail}"
    if kind == "union_tag_not_found":
        ctx = err.get("ctx") or {}
        field = str(ctx.get("discriminator", "kind")).strip("'")
        return f"{path}.{field}: required field missing"
    message = err["msg"]
    if kind in _MESSAGES:
        message = _MESSAGES[kind].format(**(err.get("ctx") or {}))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind in _SHOW_INPUT:
        message = f"{message}, got {_show(err.get('input'))}"
    return f"{path}: {message}" if path else message


# pydantic's wording, rewritten to say what to write instead.
_MESSAGES: dict[str, str] = {
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "literal_error": "must be one of {expected}",
    "model_type": "expected a mapping of fields",
    "model_attributes_type": "expected a mapping of fields",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "too_short": "needs at least {min_length} item(s)",
    "string_too_short": "must not be empty",
}
_SHOW_INPUT = frozenset(_MESSAGES) - {"string_too_short", "too_short"}


def _without_derived_noise(
    model: type[BaseModel], errors: list[ErrorDetails]
) -> list[ErrorDetails]:
    """Drop "missing" for derived fields (head_dim) when their parent has other errors."""
    parents = [tuple(e["loc"][:-1]) for e in errors]

    def noise(i: int, err: ErrorDetails) -> bool:
        if err["type"] != "missing" or not err["loc"]:
            return False
        target = _model_of(_annotation_at(model, err["loc"][:-1]))
        derived: frozenset[str] = getattr(target, "derived_fields", frozenset())
        others = sum(1 for j, p in enumerate(parents) if p == parents[i] and j != i)
        return err["loc"][-1] in derived and others > 0

    return [e for i, e in enumerate(errors) if not noise(i, e)]


def format_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _show(value: object) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return repr(value)


def _is_union_tag(part: int | str) -> bool:
    # pydantic inserts the chosen union member or tag into locations, e.g.
    # ('workloads', 0, 'training', 'model'); such parts are not user keys.
    return isinstance(part, str) and (part.startswith("function-") or "[" in part)


def _annotation_at(model: type[BaseModel], loc: Sequence[int | str]) -> Any:
    """The type expected at `loc` inside `model`, or None when the path leaves the models."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            current = _element_type(current)
            continue
        sub = _model_of(current)
        if sub is None or part not in sub.model_fields:
            return None
        current = sub.model_fields[part].annotation
    return current


def _fields_at(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """Field names (and aliases) accepted at `loc`, for did-you-mean hints."""
    target = _model_of(_annotation_at(model, loc))
    if target is None:
        return []
    names: list[str] = []
    for name, field in target.model_fields.items():
        names.append(field.alias or name)
    names.extend(getattr(target, "extra_keys", ()))
    return names


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in _union_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _element_type(annotation: Any) -> Any:
    for candidate in [annotation, *_union_args(annotation)]:
        args = typing.get_args(candidate)
        origin = typing.get_origin(candidate)
        if origin in (list, tuple, Sequence) and args:
            return args[0]
        if origin in (dict, Mapping) and len(args) == 2:
            return args[1]
    return annotation


def _union_args(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(annotation)
    if origin is typing.Annotated:
        return (typing.get_args(annotation)[0],)
    return ()
