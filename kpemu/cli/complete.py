"""Shell completion of what kpemu knows by name (argcomplete completers): labs and their members from
this kernel's lab records, a topology's nodes, and `example:NAME` beside the files. A completer never
fails: what it cannot read completes to nothing."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Completer = Callable[..., Iterable[str]]


def lab_names(prefix: str, **_: Any) -> list[str]:
    """The labs deployed on this kernel."""
    from kpemu.runtimes import recorded_labs

    with contextlib.suppress(OSError, ValueError, TypeError):
        return [n for n in recorded_labs() if n.startswith(prefix)]
    return []


def member_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The members of the lab named before (`kpemu exec LAB MEMBER`)."""
    from kpemu.runtimes import recorded_labs

    with contextlib.suppress(OSError, ValueError, TypeError):
        return [m for m in recorded_labs().get(getattr(parsed_args, "name", None) or "", []) if m.startswith(prefix)]
    return []


def node_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The nodes of the topology given before (`--node`)."""
    from kpemu.errors import KpemuError
    from kpemu.examples import resolve
    from kpemu.inputs.topology import load_topology

    ref = next((v for k in ("file", "topology", "topo") if isinstance(v := getattr(parsed_args, k, None), str)),
               None)
    if ref is None or ref == "-":
        return []
    with contextlib.suppress(KpemuError, OSError):
        return [n.name for n in load_topology(resolve(ref)).nodes if n.name.startswith(prefix)]
    return []


def yaml_or_example(kind: str) -> Completer:
    """YAML files and directories under the prefix, and `example:NAME` of the shipped `kind` ("topology",
    "scenario", or "" for both)."""

    def complete(prefix: str, **_: Any) -> list[str]:
        from kpemu.examples import examples

        out = [f"example:{e.name}" for e in examples() if not kind or e.kind == kind]
        out = [o for o in out if o.startswith(prefix)]
        if prefix.startswith("example:"):
            return out
        base = Path(prefix).parent if prefix and not prefix.endswith("/") else Path(prefix or ".")
        with contextlib.suppress(OSError):
            for p in sorted(base.iterdir()):
                shown = str(p) if str(base) != "." or prefix.startswith("./") else p.name
                if shown.startswith(prefix) and (p.is_dir() or p.suffix in (".yaml", ".yml")):
                    out.append(shown + "/" if p.is_dir() else shown)
        return out

    return complete


def attach(action: argparse.Action, completer: Completer) -> None:
    """Give `action` its completer (argcomplete reads the attribute)."""
    action.completer = completer  # type: ignore[attr-defined]
