"""Parsed YAML into typed models, turning every mistake into a `Problem` with a field path (and, given
the lines the reader recorded, the line it is on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kpemu.errors import InputError, Problem

M = TypeVar("M", bound=BaseModel)
Lines = dict[tuple[int | str, ...], int]  # (document index, *field path) -> line (kpemu.inputs.yaml_reader)


def field_path(loc: tuple[int | str, ...]) -> str:
    """('services', 0, 'ports', 0, 'nodePort') -> 'services[0].ports[0].nodePort'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _message(err: dict[str, Any], model: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; keys are camelCase as in Kubernetes)"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "string_pattern_mismatch":
        msg = "expected a Kubernetes name: lower-case letters, digits and '-', starting and ending alphanumeric"
    if "input" in err and kind not in ("missing",) and not isinstance(err["input"], dict | list):
        shown = repr(err["input"])
        msg += f" (got {shown if len(shown) <= 80 else shown[:77] + '...'})"
    return msg


def line_of(lines: Mapping[tuple[int | str, ...], int], path: tuple[int | str, ...]) -> int | None:
    """The line of `path` (document index first), or of its nearest ancestor that is in the file
    (a missing field is reported where its parent is)."""
    for n in range(len(path), 0, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def parse_model(model: type[M], data: Any, file: str, prefix: tuple[int | str, ...] = (),
                context: dict[str, Any] | None = None) -> M:
    """Validate `data` against `model` (its validators given `context`), raising InputError with one
    Problem per error."""
    if not isinstance(data, dict):
        raise InputError([Problem(file, field_path(prefix), "expected a mapping of keys to values")])
    try:
        return model.model_validate(data, context=context)
    except ValidationError as e:
        problems = [
            Problem(file, field_path(prefix + tuple(err["loc"])), _message(err, model))  # type: ignore[arg-type]
            for err in e.errors()
        ]
        raise InputError(problems) from None
