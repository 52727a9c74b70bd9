"""Topology and scenario schema, loading and semantic validation (pure; no root needed)."""

from __future__ import annotations

from pathlib import Path

from kpemu.errors import InputError
from kpemu.model.load import parse_model
from kpemu.model.topology import Topology
from kpemu.model.validate import check_topology


def topology_from_data(data: object, file: str) -> Topology:
    """Validate already-parsed YAML as a topology; InputError lists every problem."""
    topo = parse_model(Topology, data, file)
    problems = check_topology(topo, file)
    if problems:
        raise InputError(problems)
    return topo


def read_topology_source(path: Path) -> object:
    """The topology data of a file: as written, or converted from the Kubernetes objects in it (or
    in a directory of manifests). kpemu.k8s is imported only here, when a topology is read."""
    from kpemu.k8s.load import topology_source

    return topology_source(path)


def load_topology(path: str | Path, name: str | None = None) -> Topology:
    """Read and validate a topology file (or Kubernetes objects: a file or a directory); `name` (the
    CLI's --name) replaces the lab name the file gives, and is validated as that field is."""
    path = Path(path)
    data = read_topology_source(path)
    if name is not None and isinstance(data, dict):
        data = {**data, "name": name}
    return topology_from_data(data, str(path))


__all__ = ["Topology", "load_topology", "read_topology_source", "topology_from_data"]
