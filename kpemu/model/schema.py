"""JSON schemas of topology and scenario files, from the pydantic models (pure).

schemas/*.schema.json are these, committed for editors: every shipped YAML file names its schema
in a first-line `# yaml-language-server: $schema=...` comment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kpemu.model.fielddocs import described
from kpemu.model.scenario import ScenarioSpec
from kpemu.model.topology import Topology

KINDS = {"topology": Topology, "scenario": ScenarioSpec}
DIALECT = "https://json-schema.org/draft/2020-12/schema"


# Shorthands the models accept before validation, which pydantic's schema cannot see: (model, list field) -> item
SHORTHANDS = {("Pod", "ports"): {"type": "integer", "minimum": 1, "maximum": 65535}}


def schema(kind: str, fault_kinds: Sequence[str]) -> dict[str, Any]:
    """The JSON schema (draft 2020-12) that a `kind` file (topology | scenario) must match; a fault's
    kind is one of `fault_kinds` (the fault registry's names, which the model cannot import)."""
    out = KINDS[kind].model_json_schema(by_alias=True, mode="validation")
    for name, model in [(KINDS[kind].__name__, out), *out.get("$defs", {}).items()]:
        for key, prop in model.get("properties", {}).items():
            words = described(name, key)
            if words is not None:
                prop["description"] = words
    fault = out.get("$defs", {}).get("Fault", {}).get("properties", {})
    if "kind" in fault:
        fault["kind"] = {"enum": list(fault_kinds), **fault["kind"]}
    for (model, fld), short in SHORTHANDS.items():
        prop = out.get("$defs", {}).get(model, {}).get("properties", {}).get(fld)
        if prop and "items" in prop:
            prop["items"] = {"anyOf": [short, prop["items"]]}
    return {"$schema": DIALECT, "title": f"kpemu {kind}", **{k: v for k, v in out.items() if k != "title"}}


def schema_comment(kind: str, relative_dir: str) -> str:
    """The first line that points editors (yaml-language-server) at the schema."""
    return f"# yaml-language-server: $schema={relative_dir}/{kind}.schema.json"
