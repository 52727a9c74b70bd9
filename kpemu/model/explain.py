"""`kpemu explain FIELD`: a topology or scenario field's meaning, type, default and allowed values, and
its own fields, from the JSON schemas (pure)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kpemu.errors import InputError
from kpemu.model.schema import KINDS, schema


@dataclass(frozen=True)
class Explained:
    """One field: where it is, what it means, what it takes, and the fields under it."""

    kind: str  # topology | scenario
    path: str
    description: str
    type: str
    default: str | None = None
    children: list[tuple[str, str, str]] = field(default_factory=list)  # (key, type, description)

    def text(self) -> str:
        """As `kpemu explain` prints it."""
        head = f"{self.kind} {self.path}: {self.type}" + (f" (default {self.default})" if self.default else "")
        out = [head, f"  {self.description}" if self.description else "  (no description)"]
        if self.children:
            width = max(len(k) for k, _, _ in self.children)
            out += ["", "  fields:"] + [f"    {k:<{width}}  {t}" + (f"\n    {'':<{width}}  {d}" if d else "")
                                         for k, t, d in self.children]
        return "\n".join(out) + "\n"


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow $ref, and from anyOf/allOf the branch that is an object or array of objects (else the first
    that is not null): what the field holds."""
    while True:
        if "$ref" in node:
            node = {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
            continue
        branches = node.get("anyOf") or node.get("allOf")
        if branches:
            real = [b for b in branches if b.get("type") != "null"]
            pick = next((b for b in real if "$ref" in b or b.get("type") in ("object", "array")), real[0] if real
                        else branches[0])
            node = {**{k: v for k, v in node.items() if k not in ("anyOf", "allOf")}, **pick}
            continue
        return node


def _inner(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """What a field's keys are under: the object itself, or an array's (or map's) item object."""
    node = _deref(node, defs)
    if node.get("type") == "array" and "items" in node:
        return _deref(node["items"], defs)
    if node.get("type") == "object" and "properties" not in node and isinstance(node.get("additionalProperties"),
                                                                                   dict):
        return _deref(node["additionalProperties"], defs)
    return node


def _type(node: dict[str, Any], defs: dict[str, Any]) -> str:
    raw = node
    node = _deref(node, defs)
    if "enum" in node:
        return "one of " + ", ".join(str(v) for v in node["enum"])
    if "const" in node:
        return f"exactly {node['const']}"
    branches = raw.get("anyOf") or []
    kinds = [_deref(b, defs).get("type", "object") for b in branches if b.get("type") != "null"]
    if len(kinds) > 1:
        return " or ".join(dict.fromkeys(str(k) for k in kinds))
    t = node.get("type", "object")
    if t == "array":
        item = _deref(node.get("items", {}), defs)
        return f"list of {item.get('title') or item.get('type', 'value')}"
    bounds = [f"{op} {node[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
              if k in node]
    return str(t) + (f" ({', '.join(bounds)})" if bounds else "")


def explain(path: str, fault_kinds: Sequence[str]) -> list[Explained]:
    """The field `path` (`kubeProxy.mode`, `flows.to.via`, or with a leading `topology.`/`scenario.`; list
    indexes such as `[0]` are ignored) in each kind that has it; InputError with the nearest names when none."""
    parts = [p for p in re.sub(r"\[\d*\]", "", path).split(".") if p]
    kinds = [parts.pop(0)] if parts and parts[0] in KINDS else list(KINDS)
    found, misses = [], []
    for kind in kinds:
        root = schema(kind, fault_kinds)
        defs = root.get("$defs", {})
        node: dict[str, Any] = root
        ok = True
        for i, part in enumerate(parts):
            props = _inner(node, defs).get("properties", {})
            if part not in props:
                misses.append((kind, ".".join(parts[:i]), part, sorted(props)))
                ok = False
                break
            node = props[part]
        if not ok:
            continue
        inner = _inner(node, defs)
        children = [(k, _type(v, defs), v.get("description", ""))
                    for k, v in inner.get("properties", {}).items()]
        default = json.dumps(node["default"]) if "default" in node and node["default"] not in (None, [], {}) \
            else None
        found.append(Explained(kind, ".".join(parts) or "(the file)", node.get("description", "") if parts else
                               f"A kpemu {kind} file.", _type(node, defs) if parts else "object", default, children))
    if found:
        return found
    kind, at, part, known = max(misses, key=lambda m: len(m[1]))  # the kind where more of the path was found
    close = difflib.get_close_matches(part, known, n=3, cutoff=0.5)
    where = f"{kind} {at}" if at else kind
    raise InputError(f"kpemu explain: no field {part!r} in {where}"
                     + (f"; did you mean {', '.join(close)}?" if close else "")
                     + f" (its fields: {', '.join(known)})")
