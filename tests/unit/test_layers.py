"""The arrows point one way: model <- k8s <- inputs, model <- plan <- cni/proxy <- faults, all of them
<- kernel/runtime <- run, and analysis and reports never import kernel code. Every `import` in the
package is read (function-level imports included), so a lazy import cannot hide a wrong arrow."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kpemu"
# The layers that run, deploy or touch the kernel.
KERNEL_SIDE = {"kernel", "jobs", "run", "lab", "runtime", "guest", "vm", "docker", "cli"}
# layer -> the kpemu top-level modules it must not import
# Files are read only in kpemu.inputs, above the schema and the Kubernetes conversion.
READERS = {"inputs"}
FORBIDDEN = {
    "model": KERNEL_SIDE | READERS | {"k8s", "plan", "proxy", "faults", "analyse", "report", "capture",
                                      "traffic", "dumps"},
    "k8s": KERNEL_SIDE | READERS | {"plan", "proxy", "faults", "analyse", "report"},
    "inputs": KERNEL_SIDE | {"analyse", "report"},
    "cni": KERNEL_SIDE | READERS | {"proxy", "faults", "analyse", "report"},
    "plan": KERNEL_SIDE | READERS | {"cni", "proxy", "faults", "analyse", "report"},
    "proxy": KERNEL_SIDE | READERS | {"faults", "analyse", "report"},
    "faults": KERNEL_SIDE | READERS | {"analyse", "report"},
    "kernel": {"faults", "inputs"},
    "analyse": KERNEL_SIDE,
    "report": KERNEL_SIDE,
    "dumps": KERNEL_SIDE,
}
# Wrong arrows still there, as (file, imported module), each until the change named removes it.
PENDING = {
    ("kpemu/plan/types.py", "kpemu.proxy.state"),  # Plan.proxy: a LabPlan above plan/ and proxy/ replaces it
}


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
             if where.endswith(f"({layer})") and name.split(".")[1] in FORBIDDEN[layer]
             and (where.split(":")[0], name) not in PENDING]
    assert wrong == []


def test_every_pending_arrow_is_still_there() -> None:
    """An arrow removed leaves PENDING too, so the rule it breaks is enforced from then on."""
    assert {(where.split(":")[0], name) for where, name in _imports()} >= PENDING


def test_the_check_sees_lazy_imports() -> None:
    """The reader finds a function-level import (the kind that once hid model -> plan and model -> k8s)."""
    assert any(name == "kpemu.inputs.topology" and "cli/labcmds.py" in where for where, name in _imports())
