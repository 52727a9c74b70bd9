"""Topology and scenario schema and semantic validation, on data already read (pure; no root needed).
Reading files is kpemu.inputs'."""

from __future__ import annotations

from kpemu.errors import InputError
from kpemu.model.parse import parse_model
from kpemu.model.topology import Topology
from kpemu.model.validate import check_topology


def topology_from_data(data: object, file: str) -> Topology:
    """Validate already-parsed YAML as a topology; InputError lists every problem."""
    topo = parse_model(Topology, data, file)
    problems = check_topology(topo, file)
    if problems:
        raise InputError(problems)
    return topo
