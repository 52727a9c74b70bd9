"""One loader for every place a topology is accepted: a kpemu topology file as written, or
Kubernetes objects (a file with a List or several documents, or a directory) converted."""

from __future__ import annotations

import re
from pathlib import Path

from kpemu.k8s.convert import Imported, embed_services, topology_data
from kpemu.k8s.objects import is_kubernetes, objects_from_documents, read_objects
from kpemu.model.load import Lines, read_yaml


def lab_name(path: Path) -> str:
    """A lab name from a file name (`cluster.yaml` -> `cluster`), as topology names must be."""
    name = re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-")[:32].strip("-")
    return name or "imported"


def topology_source(path: Path) -> object:
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


def render_topology(imported: Imported, sources: list[str]) -> str:
    """The topology as YAML, headed by comments: where it came from, the import's notes, and the
    fields of the objects kpemu does not model (with how many objects carry each)."""
    import yaml

    lines = [f"# kpemu topology imported from {', '.join(sources)} (kpemu import)."]
    if imported.notes:
        lines.append("# Notes:")
        lines += [f"#   {n}" for n in imported.notes]
    if imported.unmodelled:
        lines.append("# Not modelled (fields kpemu does not read; in how many objects):")
        for kind, fields in imported.unmodelled.items():
            lines.append(f"#   {kind}:")
            lines += [f"#     {f} ({n})" for f, n in fields.items()]
    body = yaml.safe_dump(imported.data, sort_keys=False, default_flow_style=None, width=120)
    return "\n".join(lines) + "\n" + body
