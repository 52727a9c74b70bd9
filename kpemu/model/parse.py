"""Parsed YAML into typed models, turning every mistake into a `Problem` with a field path (and, given
the lines the reader recorded, the line it is on)."""

from __future__ import annotations

import difflib
import typing
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


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type can hold: itself, or inside Optional, list, dict and unions."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> set[str]:
    """The keys a mapping at `loc` (a field path inside `model`) may have, by their YAML names."""
    models = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            for name, f in m.model_fields.items():
                if part in (name, f.alias):
                    nxt += _models_in(f.annotation)
        if not nxt:
            return set()
        models = nxt
    return {f.alias or name for m in models for name, f in m.model_fields.items()}


def _unknown_key(loc: tuple[int | str, ...], model: type[BaseModel]) -> str:
    """An unknown key's message, with the key it most likely meant."""
    msg = "unknown field (check the spelling; keys are camelCase as in Kubernetes)"
    key = loc[-1] if loc else None
    if isinstance(key, str):
        known = keys_at(model, loc[:-1])
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6) or [
            k for k in sorted(known) if k.lower() == key.lower()]
        if close:
            return f"unknown field; did you mean {close[0]!r}?"
    return msg


def _message(err: dict[str, Any], model: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return _unknown_key(tuple(err["loc"]), model)
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
