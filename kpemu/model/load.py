"""Reading YAML into typed models, turning every mistake into a `Problem` with a field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from kpemu.errors import InputError, Problem

M = TypeVar("M", bound=BaseModel)


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
        msg += f" (got {err['input']!r})"
    return msg


def read_yaml(path: Path, documents: bool = False) -> Any:
    """Parse a YAML file, reporting syntax errors with their line; `documents`: a list of every
    `---`-separated document (Kubernetes manifests)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError([Problem(str(path), "", f"cannot read the file: {e.strerror}")]) from None
    try:
        return list(yaml.safe_load_all(text)) if documents else yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise InputError([Problem(str(path), where, f"not valid YAML: {problem}")]) from None


def parse_model(model: type[M], data: Any, file: str, prefix: tuple[int | str, ...] = ()) -> M:
    """Validate `data` against `model`, raising InputError with one Problem per error."""
    if not isinstance(data, dict):
        raise InputError([Problem(file, field_path(prefix), "expected a mapping of keys to values")])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = [
            Problem(file, field_path(prefix + tuple(err["loc"])), _message(err, model))  # type: ignore[arg-type]
            for err in e.errors()
        ]
        raise InputError(problems) from None
