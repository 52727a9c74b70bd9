"""The arrows point one way: model <- plan/proxy/cni <- kernel/jobs <- runtimes <- pipeline <- cli,
analysis and reports never import kernel code, and the CLI reaches the kernel only through the
pipeline and the runtimes. Every `import` in the package is read (function-level imports included),
so a lazy import cannot hide a wrong arrow."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kpemu"
# The layers that run, deploy or touch the kernel.
KERNEL_SIDE = {"kernel", "jobs", "runtimes", "pipeline", "docker", "cli"}
# layer -> the kpemu top-level modules it must not import
FORBIDDEN = {
    "model": KERNEL_SIDE | {"plan", "proxy", "analyse", "report", "capture", "traffic", "dumps"},
    "cni": KERNEL_SIDE | {"proxy", "analyse", "report"},
    "plan": KERNEL_SIDE | {"analyse", "report"},
    "proxy": KERNEL_SIDE | {"analyse", "report"},
    "analyse": KERNEL_SIDE,
    "report": KERNEL_SIDE,
    "dumps": KERNEL_SIDE,
    "kernel": {"runtimes", "pipeline", "cli"},
    "jobs": {"runtimes", "pipeline", "cli"},
    "docker": {"runtimes", "pipeline", "cli"},
    "runtimes": {"pipeline", "cli"},
}
# What the CLI may import: the pipeline, the runtimes, the pure packages and the light root modules.
CLI_MAY_IMPORT = {"cli", "pipeline", "runtimes", "model", "plan", "cni", "proxy", "analyse", "report", "dumps",
                  "k8s", "examples", "errors", "system", "readiness"}


@functools.cache
def _imports() -> list[tuple[str, str]]:
    """(importing module's layer, imported kpemu module) for every import in the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
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
    """The reader finds a function-level import (the kind that once hid model -> plan)."""
    assert any(name == "kpemu.k8s.load" and "model/__init__.py" in where for where, name in _imports())
