"""Kubernetes objects from read YAML documents (a kubectl `List`, several documents; the files are
read by kpemu.inputs.topology); each object keeps where it came from (file, item, and the lines of its fields)
so an error names the file, the line and the field path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kpemu.errors import InputError, Problem
from kpemu.k8s.shapes import display, shape_problems
from kpemu.model.parse import Lines, line_of

KINDS = ("Node", "Pod", "Service", "EndpointSlice", "Endpoints", "KubeProxyConfiguration", "ConfigMap")
KUBE_PROXY_CONFIG_KEY = "config.conf"  # the kube-proxy ConfigMap's key kubeadm (and kube-proxy's --config) use


@dataclass(frozen=True)
class K8sObject:
    """One object: its kind, its data as read, the file and where in the file (`items[3]`, `document 2`);
    `root` is that place as a path (document index first) into `lines`, the file's field lines."""

    kind: str
    data: dict[str, Any]
    file: str
    where: str
    root: tuple[int | str, ...] = ()
    lines: Mapping[tuple[int | str, ...], int] = field(default_factory=dict, compare=False, repr=False)

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
        """A Problem at a Kubernetes field path of this object (e.g. spec.ports[0].port), with the line
        of that field (or of its nearest parent that is in the file)."""
        return located(self.file, self.lines, self.root + _steps(path), f"{self.label()} {path}".strip(), message)


def _steps(path: str) -> tuple[int | str, ...]:
    """"spec.ports[0].port" -> ("spec", "ports", 0, "port")."""
    return tuple(int(i) if i else k for k, i in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path))


def located(file: str, lines: Mapping[tuple[int | str, ...], int], at: tuple[int | str, ...], where: str,
            message: str) -> Problem:
    """A Problem naming the line of `at` (a path into the file's `lines`) before `where`."""
    line = line_of(lines, at)
    if line is None:
        return Problem(file, where, message)
    return Problem(file, f"line {line}: {where}" if where else f"line {line}", message)


def is_kubernetes(data: object) -> bool:
    """Whether parsed YAML is a Kubernetes object (apiVersion and kind) rather than a kpemu file."""
    return isinstance(data, dict) and "apiVersion" in data and "kind" in data


@dataclass(frozen=True)
class _Source:
    """One file's documents being read: its name and the lines of its fields."""

    file: str
    lines: Lines

    def problem(self, at: tuple[int | str, ...], where: str, message: str) -> Problem:
        return located(self.file, self.lines, at, where, message)


def _flatten(doc: object, src: _Source, where: str, root: tuple[int | str, ...], out: list[K8sObject],
             problems: list[Problem]) -> None:
    if doc is None:
        return
    if not is_kubernetes(doc):
        problems.append(src.problem(root, where, "not a Kubernetes object (expected apiVersion and kind); give "
                                                 "kubectl output, e.g. kubectl get nodes,pods,services,endpointslices "
                                                 "-A -o yaml"))
        return
    assert isinstance(doc, dict)
    kind = str(doc["kind"])
    if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
        if not isinstance(doc.get("items") or [], list):
            problems.append(src.problem((*root, "items"), f"{where} items".strip(), "Invalid value: must be a list"))
            return
        for i, item in enumerate(doc.get("items") or []):
            _flatten(item, src, f"{where + '.' if where else ''}items[{i}]", (*root, "items", i), out, problems)
        return
    if kind not in KINDS:
        problems.append(src.problem((*root, "kind"), f"{where} kind".strip(),
                                    f"unknown kind {kind!r}; kpemu reads {', '.join(KINDS)} (and Lists of them): "
                                    "remove it or select kinds, e.g. kubectl get nodes,pods,services,endpointslices"))
        return
    wrong = shape_problems(kind, doc)
    problems += [src.problem((*root, *path), f"{where} {display(path)}".strip(), message) for path, message in wrong]
    if wrong:
        return
    if not isinstance((doc.get("metadata") or {}).get("name", "" if kind == "KubeProxyConfiguration" else None),
                      str):
        problems.append(src.problem((*root, "metadata", "name"), f"{where} metadata.name".strip(), "Required value"))
        return
    if kind == "ConfigMap":
        _config_map(doc, src, where, root, out, problems)
        return
    out.append(K8sObject(kind, doc, src.file, where, root, src.lines))


def _config_map(doc: dict[str, Any], src: _Source, where: str, root: tuple[int | str, ...], out: list[K8sObject],
                problems: list[Problem]) -> None:
    """The kube-proxy ConfigMap (`kubectl -n kube-system get cm kube-proxy -o yaml`): its config.conf
    is a KubeProxyConfiguration, read as one; any other ConfigMap is refused."""
    meta = doc.get("metadata") or {}
    label = f"{where} (ConfigMap {meta.get('namespace') or 'default'}/{meta.get('name')})".strip()
    text = (doc.get("data") or {}).get(KUBE_PROXY_CONFIG_KEY)
    if meta.get("name") == "kube-proxy" and text is not None and not isinstance(text, str):
        problems.append(src.problem((*root, "data", KUBE_PROXY_CONFIG_KEY), f'{label} data["{KUBE_PROXY_CONFIG_KEY}"]',
                                    "Invalid value: must be a string (the KubeProxyConfiguration file)"))
        return
    if meta.get("name") != "kube-proxy" or not isinstance(text, str):
        problems.append(src.problem(root, label, "kpemu reads only the kube-proxy ConfigMap (its data "
                                                 f"{KUBE_PROXY_CONFIG_KEY!r}): kubectl -n kube-system get cm "
                                                 "kube-proxy -o yaml; remove this one"))
        return
    at = f'{label} data["{KUBE_PROXY_CONFIG_KEY}"]'
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where_in = f" line {mark.line + 1} of the embedded file" if mark is not None else ""
        problems.append(src.problem((*root, "data", KUBE_PROXY_CONFIG_KEY), at,
                                    f"not YAML{where_in}: {getattr(e, 'problem', None) or e}"))
        return
    if not isinstance(config, dict) or config.get("kind") != "KubeProxyConfiguration":
        problems.append(src.problem((*root, "data", KUBE_PROXY_CONFIG_KEY), at,
                                    "expected a KubeProxyConfiguration (kind: KubeProxyConfiguration)"))
        return
    wrong = shape_problems("KubeProxyConfiguration", config)
    problems += [src.problem((*root, "data", KUBE_PROXY_CONFIG_KEY), f"{at} {display(path)}", message)
                 for path, message in wrong]
    if not wrong:
        out.append(K8sObject("KubeProxyConfiguration", config, src.file, at, (*root, "data", KUBE_PROXY_CONFIG_KEY),
                             src.lines))


def _collect(docs: list[object], src: _Source, out: list[K8sObject], problems: list[Problem]) -> None:
    for i, doc in enumerate(docs):
        _flatten(doc, src, f"document {i + 1}" if len(docs) > 1 else "", (i,), out, problems)


def objects_from_documents(docs: list[object], file: str, lines: Lines | None = None) -> list[K8sObject]:
    """The objects of already-read documents of one file (a topology file holding Kubernetes objects);
    `lines` (from read_yaml) puts the line into error messages."""
    out: list[K8sObject] = []
    problems: list[Problem] = []
    _collect(docs, _Source(file, lines or {}), out, problems)
    if problems:
        raise InputError(problems)
    return out
