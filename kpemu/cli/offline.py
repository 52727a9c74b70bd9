"""`validate`, `rules`, `graph`: commands on files that need no root."""

from __future__ import annotations

import argparse
from pathlib import Path

from kpemu.proxy.render import FORMATS


def cmd_validate(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.model.scenario import is_scenario_file, load_scenario

    for f in args.files:
        if is_scenario_file(Path(f)):
            load_scenario(f)
        else:
            load_topology(f)
        print(f"{f}: ok")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.proxy.render import render_rules

    topo = load_topology(args.file)
    print(render_rules(topo, args.node, args.format), end="")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.report.graph import render_graph

    print(render_graph(load_topology(args.file), args.format), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = sub.add_parser("validate", help="check a topology or scenario file")
    s.add_argument("files", nargs="+")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("rules", help="the exact state kube-proxy would program on a node")
    s.add_argument("file")
    s.add_argument("--node", required=True)
    s.add_argument("--format", default="all", choices=FORMATS)
    s.set_defaults(func=cmd_rules)

    s = sub.add_parser("graph", help="the topology as a picture (Mermaid, Graphviz dot or HTML)")
    s.add_argument("file")
    s.add_argument("--format", default="mermaid", choices=["mermaid", "dot", "html"])
    s.set_defaults(func=cmd_graph)
