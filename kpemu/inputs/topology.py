"""Reading a topology: a kpemu topology file as written, or Kubernetes objects (a file with a List or
several documents, a directory of manifests, or standard input) converted to one."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from kpemu.errors import InputError, Problem
from kpemu.inputs.locate import located
from kpemu.inputs.yaml_reader import read_stdin_yaml, read_yaml
from kpemu.k8s.convert import embed_services, topology_data
from kpemu.k8s.objects import K8sObject, is_kubernetes, objects_from_documents
from kpemu.model import topology_from_data
from kpemu.model.parse import Lines
from kpemu.model.topology import Topology

_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _files(source: str) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _MANIFEST_SUFFIXES)
    if not path.exists():
        raise InputError([Problem(source, "", "no such file or directory")])
    return [path]


def read_objects(sources: Iterable[str]) -> list[K8sObject]:
    """Every Kubernetes object in the sources (files, directories, `-`); InputError lists every
    document that is not one and every kind kpemu does not read."""
    out: list[K8sObject] = []
    problems: list[Problem] = []
    for source in sources:
        for file in ["-"] if source == "-" else [str(p) for p in _files(source)]:
            lines: Lines = {}
            docs = read_stdin_yaml(documents=True, lines=lines) if file == "-" else \
                read_yaml(Path(file), documents=True, lines=lines)
            try:
                out += objects_from_documents(docs, file, lines)
            except InputError as e:
                problems += e.problems
    if problems:
        raise InputError(problems)
    if not out:
        dirs = [s for s in sources if s != "-" and Path(s).is_dir()]
        what = ("is a directory with no Kubernetes manifests in it; expected a regular YAML file or a directory "
                "of manifests (*.yaml, *.yml, *.json)") if dirs and len(dirs) == len(sources) else \
            "no Kubernetes objects found"
        raise InputError([Problem(", ".join(sources), "", what)])
    return out


def lab_name(path: Path) -> str:
    """A lab name from a file name (`cluster.yaml` -> `cluster`), as topology names must be."""
    name = re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-")[:32].strip("-")
    return name or "imported"


def read_topology_source(path: Path) -> object:
    """The topology data of `path`: the mapping of a kpemu topology file, or the topology that
    the Kubernetes objects in the file or directory are equivalent to."""
    if path.is_dir():
        return topology_data(read_objects([str(path)]), name=lab_name(path)).data
    lines: Lines = {}
    every = read_yaml(path, documents=True, lines=lines)
    docs = [d for d in every if d is not None]
    if any(is_kubernetes(d) for d in docs):
        return topology_data(objects_from_documents(every, str(path), lines), name=lab_name(path)).data
    if len(docs) == 1:
        return embed_services(docs[0], str(path), lines, every.index(docs[0])) if isinstance(docs[0], dict) else docs[0]
    return read_yaml(path)  # several documents that are not Kubernetes objects: read_yaml says so


@located
def load_topology(path: str | Path, name: str | None = None) -> Topology:
    """Read and validate a topology file (or Kubernetes objects: a file or a directory); `name` (the
    CLI's --name) replaces the lab name the file gives, and is validated as that field is."""
    path = Path(path)
    data = read_topology_source(path)
    if name is not None and isinstance(data, dict):
        data = {**data, "name": name}
    return topology_from_data(data, str(path))
