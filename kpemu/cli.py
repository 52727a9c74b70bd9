"""The kpemu command line: the only module that parses arguments or prints for humans.

Exit codes: 0 ok, 1 an expectation failed, 2 bad input, 3 the environment cannot run it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kpemu.errors import InputError, KpemuError


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as kpemu input errors (exit 2, one clear line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


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


def cmd_deploy(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.model import load_topology

    topo = load_topology(args.file)
    state = lab.deploy(topo, source=args.file)
    print(f"lab {state.lab} deployed: {len(state.namespaces)} namespaces in {state.deploy_seconds:.2f}s")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    from kpemu import lab

    if args.all:
        removed = lab.destroy_all()
    elif args.name:
        removed = lab.destroy(args.name)
    else:
        raise InputError("kpemu destroy: give a lab NAME or --all")
    print(f"removed {len(removed)} namespaces" + (": " + " ".join(removed) if removed else ""))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.report.inspect import render_inspect

    data = lab.inspect(args.name)
    print(json.dumps(data, indent=2) if args.json else render_inspect(data), end="\n" if args.json else "")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from kpemu import lab

    cmd = [c for c in args.cmd if c != "--"]
    if not cmd:
        raise InputError("kpemu exec: give a command after --, e.g. kpemu exec LAB node1 -- ip route")
    return lab.exec_in(args.name, args.member, cmd)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kpemu", description="Emulated Kubernetes Service data path.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("validate", help="check a topology or scenario file")
    s.add_argument("files", nargs="+")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("rules", help="the exact state kube-proxy would program on a node")
    s.add_argument("file")
    s.add_argument("--node", required=True)
    s.add_argument("--format", default="all",
                   choices=["iptables-restore", "iptables-save", "ipset", "ipvs", "all"])
    s.set_defaults(func=cmd_rules)

    s = sub.add_parser("deploy", help="build a lab from a topology (root)")
    s.add_argument("file")
    s.set_defaults(func=cmd_deploy)

    s = sub.add_parser("destroy", help="remove a lab, or every kpemu lab with --all (root)")
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_destroy)

    s = sub.add_parser("inspect", help="namespaces, interfaces, addresses and routes of labs")
    s.add_argument("name", nargs="?")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("exec", help="run a command in a lab member's namespace")
    s.add_argument("name")
    s.add_argument("member")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_exec)

    # >>> doctor / vm subcommands (guest runtime)
    # <<< doctor / vm subcommands
    # >>> run subcommand (scenarios)
    # <<< run subcommand
    # >>> graph subcommand (pictures)
    # <<< graph subcommand
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kpemu` console script."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except KpemuError as e:
        print(f"kpemu: {e}" if not isinstance(e, InputError) else str(e), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kpemu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
