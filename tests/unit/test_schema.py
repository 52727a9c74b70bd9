"""The committed JSON schemas are the models' own, every shipped YAML file names its schema on its
first line, and validates against it."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from kpemu.faults import names
from kpemu.model.schema import schema, schema_comment
from tests.helpers import ROOT, SCENARIOS, TOPOLOGIES

SHIPPED = [("scenario", p) for p in sorted(SCENARIOS.glob("*.yaml"))] + \
          [("topology", p) for p in sorted(TOPOLOGIES.glob("*.yaml"))]


@pytest.mark.parametrize("kind", ["topology", "scenario"])
def test_committed_schema_is_the_models(kind: str) -> None:
    committed = json.loads((ROOT / "schemas" / f"{kind}.schema.json").read_text())
    assert committed == schema(kind, names()), f"regenerate: kpemu schema {kind} > schemas/{kind}.schema.json"


@pytest.mark.parametrize(("kind", "path"), SHIPPED, ids=[p.name for _, p in SHIPPED])
def test_shipped_file_names_and_matches_its_schema(kind: str, path) -> None:
    text = path.read_text()
    assert text.splitlines()[0] == schema_comment(kind, "../schemas")
    jsonschema.validate(yaml.safe_load(text), schema(kind, names()))


def test_schema_rejects_what_the_model_rejects() -> None:
    data = yaml.safe_load((TOPOLOGIES / "calico-ipip.yaml").read_text())
    data["kubeProxy"]["mode"] = "userspace"
    with pytest.raises(jsonschema.ValidationError, match="userspace"):
        jsonschema.validate(data, schema("topology", names()))
