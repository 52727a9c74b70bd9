"""The kpemu command line: the only package that parses arguments or prints for humans.

Each module registers its subcommands (`register(sub)`); `COMMANDS` lists them in help order.
Exit codes: 0 ok, 1 an expectation failed, 2 bad input, 3 the environment cannot run it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kpemu.cli import clustercmds, labcmds, offline, runcmd, vmcmds
from kpemu.cli.base import Parser
from kpemu.errors import InputError, KpemuError

COMMANDS = (offline, clustercmds, labcmds, vmcmds, runcmd)


def build_parser() -> argparse.ArgumentParser:
    """The whole `kpemu` parser, every module's subcommands included."""
    p = Parser(prog="kpemu", description="Emulated Kubernetes Service data path.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return p


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """kpemu's own arguments and the command after the first `--` (deploy, exec, vm exec), kept whole:
    `kpemu deploy F -- kpemu exec lab node1 -- ipvsadm -Sn` keeps the inner `--`."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kpemu` console script."""
    try:
        own, command = split_command(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(own)
        if command and not getattr(args, "takes_command", None):
            raise InputError(f"kpemu {args.command}: takes no command after --")
        args.cmd = command
        return int(args.func(args))
    except KpemuError as e:
        print(f"kpemu: {e}" if not isinstance(e, InputError) else str(e), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kpemu: interrupted", file=sys.stderr)
        return 130
