"""The arrows point one way: model <- k8s <- inputs, model <- plan <- cni/proxy <- faults, all of them
<- kernel/jobs <- runtimes <- pipeline <- cli, analysis and reports never import kernel code, and the
CLI reaches the kernel only through the pipeline and the runtimes. Every `import` in the package is
read (function-level imports included), so a lazy import cannot hide a wrong arrow."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kpemu"
# The layers that run, deploy or touch the kernel.
KERNEL_SIDE = {"kernel", "jobs", "runtimes", "pipeline", "docker", "cli"}
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
    "analyse": KERNEL_SIDE,
    "report": KERNEL_SIDE,
    "dumps": KERNEL_SIDE,
    "kernel": {"faults", "inputs", "runtimes", "pipeline", "cli"},
    "jobs": {"runtimes", "pipeline", "cli"},
    "docker": {"runtimes", "pipeline", "cli"},
    "runtimes": {"pipeline", "cli"},
}
# Wrong arrows still there, as (file, imported module), each until the change named removes it.
PENDING = {
    ("kpemu/plan/types.py", "kpemu.proxy.state"),  # Plan.proxy: a LabPlan above plan/ and proxy/ replaces it
}
# What the CLI may import: the pipeline, the runtimes, the pure packages and the light root modules.
CLI_MAY_IMPORT = {"cli", "pipeline", "runtimes", "model", "plan", "cni", "proxy", "analyse", "report", "dumps",
                  "k8s", "inputs", "faults", "examples", "errors", "system", "readiness",
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
             if where.endswith(f"({layer})") and name.split(".")[1] in FORBIDDEN[layer]
             and (where.split(":")[0], name) not in PENDING]
    assert wrong == []


def test_the_cli_reaches_the_kernel_only_through_the_pipeline_and_the_runtimes() -> None:
    wrong = [f"{where} imports {name}" for where, name in _imports()
             if where.endswith("(cli)") and name.split(".")[1] not in CLI_MAY_IMPORT]
    assert wrong == []


def test_every_pending_arrow_is_still_there() -> None:
    """An arrow removed leaves PENDING too, so the rule it breaks is enforced from then on."""
    assert {(where.split(":")[0], name) for where, name in _imports()} >= PENDING


def test_the_check_sees_lazy_imports() -> None:
    """The reader finds a function-level import (the kind that once hid model -> plan and model -> k8s)."""
    assert any(name == "kpemu.inputs.topology" and "cli/labcmds.py" in where for where, name in _imports())
