"""Topology and scenario schema, loading and semantic validation (pure; no root needed)."""

from __future__ import annotations

from pathlib import Path

from kpemu.errors import InputError
from kpemu.model.load import parse_model, read_yaml
from kpemu.model.topology import Topology
from kpemu.model.validate import check_topology


def topology_from_data(data: object, file: str) -> Topology:
    """Validate already-parsed YAML as a topology; InputError lists every problem."""
    topo = parse_model(Topology, data, file)
    problems = check_topology(topo, file)
    if problems:
        raise InputError(problems)
    return topo


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file."""
    path = Path(path)
    return topology_from_data(read_yaml(path), str(path))


__all__ = ["Topology", "load_topology", "topology_from_data"]
