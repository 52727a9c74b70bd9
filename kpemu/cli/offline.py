"""`validate`, `rules`, `graph`, `schema`, `examples`, `matrix`: commands on files that need no root."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpemu.cli.base import Parser, add_command, add_node, add_output, add_topology, emit
from kpemu.cli.complete import attach, yaml_or_example
from kpemu.errors import InputError, Problem

if TYPE_CHECKING:
    from kpemu.model.topology import Topology


def _check_file(ref: str) -> dict[str, Any]:
    """One file's validation result: {file, kind, ok, problems}."""
    from kpemu.examples import resolve
    from kpemu.inputs.scenario import load_file
    from kpemu.model.scenario import Scenario

    try:
        kind = "scenario" if isinstance(load_file(resolve(ref)), Scenario) else "topology"
        return {"file": ref, "kind": kind, "ok": True, "problems": []}
    except InputError as e:
        return {"file": ref, "kind": None, "ok": False,
                "problems": [{"file": p.file, "field": p.path, "message": p.message, "line": p.line,
                              "column": p.column} for p in e.problems]}


def cmd_validate(args: argparse.Namespace) -> int:
    results = [_check_file(f) for f in args.files]

    def table(rs: list[dict[str, Any]]) -> str:
        """Valid files on stdout; every problem on stderr, one line each (file: field: what was expected)."""
        for r in rs:
            if r["ok"]:
                print(f"{r['file']}: ok ({r['kind']})")
            for p in r["problems"]:
                print(Problem(p["file"], p["field"], p["message"], p["line"], p["column"]), file=sys.stderr)
        return f"{sum(r['ok'] for r in rs)} of {len(rs)} file(s) valid"

    emit(args, results, table)
    return 2 if any(not r["ok"] for r in results) else 0


def cmd_rules(args: argparse.Namespace) -> int:
    from kpemu.examples import resolve
    from kpemu.inputs.topology import load_topology
    from kpemu.proxy.render import render_rules, rules_texts

    topo = load_topology(resolve(args.file))
    if args.output == "table":
        print(render_rules(topo, args.node, args.format), end="")
        _deprecation_notice(topo)
        return 0
    emit(args, {"topology": topo.name, "node": args.node, "mode": topo.kubeProxy.mode,
                **rules_texts(topo, args.node, args.format)}, lambda d: None)
    return 0


def _deprecation_notice(topo: Topology) -> None:
    """What kube-proxy itself logs at startup for a deprecated mode (on stderr, not in the rules)."""
    from kpemu.proxy.modes import mode_of

    notice = mode_of(topo).notice(topo.kubeProxy)
    if notice:
        print(f"kube-proxy {topo.kubeProxy.version} logs at startup: {notice}", file=sys.stderr)


def cmd_graph(args: argparse.Namespace) -> int:
    from kpemu.examples import resolve
    from kpemu.inputs.topology import load_topology
    from kpemu.report.graph import render_graph

    topo = load_topology(resolve(args.file))
    text = render_graph(topo, args.format)
    emit(args, {"topology": topo.name, "format": args.format, "graph": text}, lambda d: d["graph"])
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kpemu.faults import names
    from kpemu.model.schema import schema

    emit(args, schema(args.kind, names()), lambda d: json.dumps(d, indent=2))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from kpemu.faults import names
    from kpemu.model.explain import explain

    found = explain(args.field, names())
    emit(args, [vars(e) for e in found], lambda rs: "\n".join(e.text() for e in found))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    from kpemu import matrix

    root = Path(args.root)
    files = [Path(f) for f in args.scenarios] or matrix.shipped(root)
    found = matrix.entries(root, files, matrix.kernels_of(args.kernels))
    if args.variant:
        found = [e for e in found if e.variant == args.variant]
    if args.files:
        print("\n".join(dict.fromkeys(e.file for e in found)))
        return 0
    data = matrix.grouped(found) if args.by == "kernel" else matrix.include(found)
    rows = data["include"]
    cols = [c for c in ("id", "kernel", "variant", "mode", "modes", "release", "releases", "scenarios")
            if rows and c in rows[0]]
    emit(args, data, lambda _: "\n".join("  ".join(str(r[c]) for c in cols) for r in [dict(zip(cols, cols,
                                                                                                strict=True)), *rows]))
    return 0


def cmd_examples_copy(args: argparse.Namespace) -> int:
    from kpemu.examples import copy_examples

    files = copy_examples(Path(args.dest))
    print(f"copied {len(files)} files into {args.dest}: its scenarios/, topologies/ and schemas/ "
          f"(e.g. kpemu validate {Path(args.dest) / 'scenarios'}/*.yaml)")
    return 0


def cmd_examples(args: argparse.Namespace) -> int:
    from kpemu.examples import examples

    rows = [{"name": e.name, "kind": e.kind, "ref": f"example:{e.name}", "summary": e.summary, "path": str(e.path)}
            for e in examples()]

    def table(rs: list[dict[str, Any]]) -> str:
        width = max((len(r["ref"]) for r in rs), default=10)
        return "\n".join(f"{r['ref']:<{width}}  {r['kind']:<8}  {r['summary']}".rstrip() for r in rs)

    emit(args, rows, table)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "validate", "check topology and scenario files (every file, every problem)",
                    ["kpemu validate scenarios/*.yaml topologies/*.yaml",
                     "kpemu validate example:nodeport-ipvs -o json"])
    attach(s.add_argument("files", nargs="+", metavar="FILE", help="a YAML file, or example:NAME (see kpemu examples)"),
           yaml_or_example(""))
    add_output(s)
    s.set_defaults(func=cmd_validate)

    s = add_command(sub, "rules", "the exact state kube-proxy would program on a node",
                    ["kpemu rules topologies/seed-001.yaml --node minikube --format iptables-save",
                     "kpemu rules example:calico-ipip --node node1 --format ipvs -o json"])
    add_topology(s)
    add_node(s)
    from kpemu.proxy.render import FORMATS

    s.add_argument("--format", default="all", choices=FORMATS)
    add_output(s)
    s.set_defaults(func=cmd_rules)

    s = add_command(sub, "graph", "the topology as a picture (Mermaid, Graphviz dot or HTML)",
                    ["kpemu graph topologies/flannel-vxlan.yaml --format dot | dot -Tsvg > lab.svg",
                     "kpemu graph example:calico-ipip --format html > lab.html"])
    add_topology(s)
    s.add_argument("--format", default="mermaid", choices=["mermaid", "dot", "html"])
    add_output(s)
    s.set_defaults(func=cmd_graph)

    s = add_command(sub, "schema", "the JSON schema of topology or scenario files (for editors)",
                    ["kpemu schema scenario > scenario.schema.json",
                     "kpemu schema topology -o yaml"])
    s.add_argument("kind", choices=["topology", "scenario"])
    add_output(s)
    s.set_defaults(func=cmd_schema)

    s = add_command(sub, "explain", "what a topology or scenario field means: its type, default and fields",
                    ["kpemu explain kubeProxy.mode", "kpemu explain services.ports",
                     "kpemu explain scenario.flows.to", "kpemu explain topology"])
    s.add_argument("field", metavar="FIELD", help="a field path such as kubeProxy.mode or flows.to.via (a "
                                                  "leading topology. or scenario. picks the kind)")
    add_output(s)
    s.set_defaults(func=cmd_explain)

    s = add_command(sub, "examples", "the example topologies and scenarios shipped with kpemu",
                    ["kpemu examples", "kpemu validate example:nodeport-ipvs",
                     "sudo kpemu run example:nodeport-iptables --out runs/np",
                     "kpemu examples copy ./kpemu-examples   # a copy to edit (and to --update-goldens)"])
    add_output(s)
    s.set_defaults(func=cmd_examples)
    esub = s.add_subparsers(dest="examples_command", parser_class=Parser)
    c = add_command(esub, "copy", "copy the shipped scenarios, topologies and schemas into a directory to edit",
                    ["kpemu examples copy ./kpemu-examples"])
    c.add_argument("dest", metavar="DIR", help="where to copy them (new, or without those files)")
    c.set_defaults(func=cmd_examples_copy)

    s = add_command(sub, "matrix", "every shipped scenario x mode x kernel x release, as a GitHub Actions matrix",
                    ["kpemu matrix", "kpemu matrix -o json --by kernel   # the workflow's jobs (fromJSON)",
                     "kpemu matrix --kernels 6.12 -o json", "kpemu matrix --variant nftables --kernels host --files"])
    s.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="scenario files (default: every shipped one "
                                                                      "under ROOT/scenarios)")
    s.add_argument("--root", default=".", help="the checkout whose scenarios/ to list (default: here)")
    s.add_argument("--kernels", default=None, help="comma-separated: host and guest kernel series (default: "
                                                   "host,6.1,6.12)")
    s.add_argument("--variant", choices=["as-written", "nftables"], default=None, help="only this mode variant")
    s.add_argument("--by", choices=["scenario", "kernel"], default="scenario",
                   help="one matrix entry per scenario run, or per kernel and mode variant with its files")
    s.add_argument("--files", action="store_true", help="print the scenario files only, one a line")
    add_output(s)
    s.set_defaults(func=cmd_matrix)
