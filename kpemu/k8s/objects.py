"""Reading Kubernetes objects: a kubectl `List`, several YAML documents, a directory of manifests,
or standard input; each object keeps where it came from (file and item) for error messages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpemu.errors import InputError, Problem
from kpemu.model.load import read_stdin_yaml, read_yaml

KINDS = ("Node", "Pod", "Service", "EndpointSlice", "Endpoints", "KubeProxyConfiguration")
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class K8sObject:
    """One object: its kind, its data as read, the file and where in the file (`items[3]`, `document 2`)."""

    kind: str
    data: dict[str, Any]
    file: str
    where: str

    @property
    def name(self) -> str:
        return str((self.data.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str((self.data.get("metadata") or {}).get("namespace") or "default")

    @property
    def key(self) -> str:
        """`namespace/name` (or the name of a cluster-scoped object)."""
        return self.name if self.kind in ("Node", "KubeProxyConfiguration") else f"{self.namespace}/{self.name}"

    def label(self) -> str:
        """How a message names the object: `items[3] (Service default/web)`."""
        return f"{self.where} ({self.kind}{' ' + self.key if self.key else ''})".strip()

    def problem(self, path: str, message: str) -> Problem:
        """A Problem at a Kubernetes field path of this object (e.g. spec.ports[0].port)."""
        return Problem(self.file, f"{self.label()} {path}".strip(), message)


def is_kubernetes(data: object) -> bool:
    """Whether parsed YAML is a Kubernetes object (apiVersion and kind) rather than a kpemu file."""
    return isinstance(data, dict) and "apiVersion" in data and "kind" in data


def _flatten(doc: object, file: str, where: str, out: list[K8sObject], problems: list[Problem]) -> None:
    if doc is None:
        return
    if not is_kubernetes(doc):
        problems.append(Problem(file, where, "not a Kubernetes object (expected apiVersion and kind); give kubectl "
                                             "output, e.g. kubectl get nodes,pods,services,endpointslices -A -o yaml"))
        return
    assert isinstance(doc, dict)
    kind = str(doc["kind"])
    if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
        for i, item in enumerate(doc.get("items") or []):
            _flatten(item, file, f"{where + '.' if where else ''}items[{i}]", out, problems)
        return
    if kind not in KINDS:
        problems.append(Problem(file, f"{where} kind".strip(),
                                f"unknown kind {kind!r}; kpemu reads {', '.join(KINDS)} (and Lists of them): "
                                "remove it or select kinds, e.g. kubectl get nodes,pods,services,endpointslices"))
        return
    if not isinstance((doc.get("metadata") or {}).get("name", "" if kind == "KubeProxyConfiguration" else None),
                      str):
        problems.append(Problem(file, f"{where} metadata.name".strip(), "Required value"))
        return
    out.append(K8sObject(kind, doc, file, where))


def _files(source: str) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _MANIFEST_SUFFIXES)
    if not path.exists():
        raise InputError([Problem(source, "", "no such file or directory")])
    return [path]


def _collect(docs: list[object], file: str, out: list[K8sObject], problems: list[Problem]) -> None:
    for i, doc in enumerate(docs):
        _flatten(doc, file, f"document {i + 1}" if len(docs) > 1 else "", out, problems)


def objects_from_documents(docs: list[object], file: str) -> list[K8sObject]:
    """The objects of already-read documents of one file (a topology file holding Kubernetes objects)."""
    out: list[K8sObject] = []
    problems: list[Problem] = []
    _collect(docs, file, out, problems)
    if problems:
        raise InputError(problems)
    return out


def read_objects(sources: Iterable[str]) -> list[K8sObject]:
    """Every Kubernetes object in the sources (files, directories, `-`); InputError lists every
    document that is not one and every kind kpemu does not read."""
    out: list[K8sObject] = []
    problems: list[Problem] = []
    for source in sources:
        if source == "-":
            _collect(read_stdin_yaml(documents=True), "-", out, problems)
            continue
        for path in _files(source):
            _collect(read_yaml(path, documents=True), str(path), out, problems)
    if problems:
        raise InputError(problems)
    if not out:
        dirs = [s for s in sources if s != "-" and Path(s).is_dir()]
        what = ("is a directory with no Kubernetes manifests in it; expected a regular YAML file or a directory "
                "of manifests (*.yaml, *.yml, *.json)") if dirs and len(dirs) == len(sources) else \
            "no Kubernetes objects found"
        raise InputError([Problem(", ".join(sources), "", what)])
    return out
