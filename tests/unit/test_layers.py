"""The arrows point one way: model <- k8s <- inputs, model <- plan <- cni/proxy <- faults <- labplan,
all of them <- kernel/jobs <- runtimes <- pipeline <- cli, analysis and reports never import kernel
code, and the CLI reaches the kernel only through the pipeline and the runtimes; and no two files
import each other, directly or round a circle. Every `import` in the package is read (function-level
and `if TYPE_CHECKING:` imports included), so a lazy import cannot hide a wrong arrow or a circle."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "kpemu"
# The layers that run, deploy or touch the kernel.
KERNEL_SIDE = {"kernel", "jobs", "runtimes", "pipeline", "docker", "cli"}
# layer -> the kpemu top-level modules it must not import
# Files are read only in kpemu.inputs, above the schema and the Kubernetes conversion.
READERS = {"inputs"}
FORBIDDEN = {
    "model": KERNEL_SIDE | READERS | {"k8s", "plan", "proxy", "faults", "labplan", "analyse", "report", "capture",
                                      "traffic", "dumps"},
    "k8s": KERNEL_SIDE | READERS | {"plan", "proxy", "faults", "labplan", "analyse", "report"},
    "inputs": KERNEL_SIDE | {"analyse", "report"},
    "cni": KERNEL_SIDE | READERS | {"proxy", "faults", "labplan", "analyse", "report"},
    "plan": KERNEL_SIDE | READERS | {"cni", "proxy", "faults", "labplan", "analyse", "report"},
    "proxy": KERNEL_SIDE | READERS | {"faults", "labplan", "analyse", "report"},
    "faults": KERNEL_SIDE | READERS | {"labplan", "analyse", "report"},
    "labplan": KERNEL_SIDE | READERS | {"analyse", "report"},
    "analyse": KERNEL_SIDE,
    "report": KERNEL_SIDE,
    "dumps": KERNEL_SIDE,
    "kernel": {"faults", "inputs", "runtimes", "pipeline", "cli"},
    "jobs": {"runtimes", "pipeline", "cli"},
    "docker": {"runtimes", "pipeline", "cli"},
    "runtimes": {"pipeline", "cli"},
    # Upstream binaries are built without the kernel; the control plane runs them on the host.
    "upstream": KERNEL_SIDE | READERS | {"controlplane", "analyse", "report"},
    "controlplane": {"runtimes", "pipeline", "cli", "inputs"},
    # The real kube-proxy in a lab: the executor's half (jobs.execute runs kpemu.realproxy.lab)
    "realproxy": {"runtimes", "pipeline", "cli", "inputs", "conformance"},
    "conformance": {"runtimes", "pipeline", "cli"},
}
# What the CLI may import: the pipeline, the runtimes, the pure packages and the light root modules.
CLI_MAY_IMPORT = {"cli", "pipeline", "runtimes", "model", "plan", "cni", "proxy", "analyse", "report", "dumps",
                  "k8s", "inputs", "faults", "examples", "errors", "system", "readiness", "upstream", "matrix",
                  "conformance",
                  "__version__"}  # kpemu's own version (`from kpemu import __version__`)


@functools.cache
def _imports() -> list[tuple[str, str]]:
    """(importing module's layer, imported kpemu module) for every import in the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"kpemu.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module == "kpemu" \
                else [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            out += [(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} ({layer})", n)
                    for n in names if n.startswith("kpemu.")]
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer: str) -> None:
    wrong = [f"{where} imports {name}" for where, name in _imports()
             if where.endswith(f"({layer})") and name.split(".")[1] in FORBIDDEN[layer]]
    assert wrong == []


def test_the_cli_reaches_the_kernel_only_through_the_pipeline_and_the_runtimes() -> None:
    wrong = [f"{where} imports {name}" for where, name in _imports()
             if where.endswith("(cli)") and name.split(".")[1] not in CLI_MAY_IMPORT]
    assert wrong == []



def test_the_check_sees_lazy_imports() -> None:
    """The reader finds a function-level import (the kind that once hid model -> plan and model -> k8s)."""
    assert any(name == "kpemu.inputs.topology" and "cli/labcmds.py" in where for where, name in _imports())


# ---------------------------------------------------------------- no import circle, at the level of files
def _module_file(dotted: str) -> Path | None:
    """The file of kpemu module `dotted` (a package's __init__.py), or None when it names no module."""
    parts = dotted.split(".")[1:]
    base = PACKAGE.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _targets(node: ast.AST) -> list[str]:
    """The kpemu modules one import statement names (`from kpemu.a import b` names kpemu.a.b when b is a
    module, else kpemu.a)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("kpemu.")]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
            (node.module == "kpemu" or node.module.startswith("kpemu.")):
        return [f"{node.module}.{a.name}" if _module_file(f"{node.module}.{a.name}") else node.module
                for a in node.names]
    return []


def import_graph() -> dict[Path, set[Path]]:
    """File -> the kpemu files it imports."""
    graph: dict[Path, set[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        edges = graph.setdefault(path, set())
        for node in ast.walk(ast.parse(path.read_text())):
            for name in _targets(node):
                target = _module_file(name)
                if target is not None and target != path:
                    edges.add(target)
    return graph


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected components of more than one file (Tarjan's algorithm, iterative)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    found = [[str(p.relative_to(PACKAGE.parent)) for p in c] for c in circles(import_graph())]
    assert found == []


def test_the_check_finds_a_circle_hidden_in_a_function() -> None:
    a, b, c = Path("a.py"), Path("b.py"), Path("c.py")
    assert circles({a: {b}, b: {c}, c: {a}}) == [[a, b, c]]
    assert circles({a: {b}, b: set(), c: {a}}) == []


def test_the_reader_sees_local_and_type_checking_imports() -> None:
    tree = ast.parse("if TYPE_CHECKING:\n    from kpemu.errors import Problem\n"
                     "def f():\n    import kpemu.errors\n    from kpemu import cni\n")
    names = [n for node in ast.walk(tree) for n in _targets(node)]
    assert names == ["kpemu.errors", "kpemu.errors", "kpemu.cni"]
