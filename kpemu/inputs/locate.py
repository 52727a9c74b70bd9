"""Where in its file a problem is: the line and column of the field path a Problem names, found in the
file's YAML node tree (the same file the problem came from; nothing is guessed: a path that is not in
the file gets the place of its nearest ancestor that is, as a missing field is reported where its
parent is, and a problem with no field path or no readable file keeps none)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import yaml

from kpemu.errors import InputError, Problem
from kpemu.inputs.yaml_reader import read_text, read_yaml

P = ParamSpec("P")
T = TypeVar("T")
_PART = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")  # a key (as kpemu's and Kubernetes' are) or an index


def _parts(path: str) -> list[str | int] | None:
    """'services[0].ports[1].port' -> ['services', 0, 'ports', 1, 'port']; None when it is no field path."""
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _PART.match(path, pos)
        if m is None or m.end() == pos:
            return None
        parts.append(m[1] if m[1] is not None else int(m[2]))
        pos = m.end()
    return parts


def _place(node: yaml.Node, parts: list[str | int]) -> tuple[int, int]:
    """(line, column), 1-based, of the deepest part of `parts` found under `node`."""
    mark = node.start_mark
    for part in parts:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    mark, child = k.start_mark, v
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            mark = child.start_mark
        if child is None:
            break
        node = child
    return mark.line + 1, mark.column + 1


def locate(problems: list[Problem]) -> list[Problem]:
    """`problems` with the line and column of each field path filled in where its file shows it."""
    trees: dict[str, yaml.Node | None] = {}
    out = []
    for p in problems:
        parts = _parts(p.path) if p.path and p.line is None else None
        if parts is None or not p.file:
            out.append(p)
            continue
        if p.file not in trees:
            trees[p.file] = _tree(p.file)
        tree = trees[p.file]
        if tree is None:
            out.append(p)
            continue
        line, column = _place(tree, parts)
        out.append(Problem(p.file, p.path, p.message, line, column))
    return out


def _tree(file: str) -> yaml.Node | None:
    """The file's YAML document as a node tree; None when it is not one document within the reader's
    bounds (a file refused for its depth or size is not composed again)."""
    if file != "-" and not Path(file).is_file():
        return None
    try:
        read_yaml(Path(file))
        return yaml.compose(read_text(Path(file)), Loader=yaml.SafeLoader)
    except (InputError, yaml.YAMLError):
        return None


def located(load: Callable[P, T]) -> Callable[P, T]:
    """A loader whose InputError names the line and column of each problem."""

    @functools.wraps(load)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return load(*args, **kwargs)
        except InputError as e:
            raise InputError(locate(e.problems)) from None

    return wrapper
