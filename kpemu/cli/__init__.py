# PYTHON_ARGCOMPLETE_OK
"""The kpemu command line: the only package that parses arguments or prints for humans.

Each module registers its subcommands (`register(sub)`); `COMMANDS` lists them in help order.
Exit codes: 0 ok, 1 an expectation failed, 2 bad input, 3 the environment cannot run it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from kpemu import __version__
from kpemu.cli import clustercmds, labcmds, offline, runcmd, runscmd, setupcmd, upstreamcmds, vmcmds
from kpemu.cli.base import Parser, add_command, merge_topology
from kpemu.errors import InputError, KpemuError

COMMANDS = (offline, clustercmds, labcmds, vmcmds, runcmd, runscmd, setupcmd, upstreamcmds)
EPILOG = """examples:
  kpemu examples                                   the shipped topologies and scenarios
  kpemu validate example:nodeport-ipvs             check a file (or every file given)
  sudo kpemu run example:nodeport-iptables         real TCP through a NodePort, every hop captured
  kpemu runs                                       past runs; kpemu runs open NAME prints a report
  sudo kpemu exec LAB MEMBER -- CMD                a command in a lab member (everything after -- is its own)

Commands that report something take -o json|yaml|table. Shell completion: eval "$(kpemu completion bash)".
"""


def cmd_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["kpemu"], shell=args.shell), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole `kpemu` parser, every module's subcommands included."""
    p = Parser(prog="kpemu", description="Emulated Kubernetes Service data path.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"kpemu {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    s = add_command(sub, "completion", "print the shell completion script (argcomplete)",
                    ['eval "$(kpemu completion bash)"', "kpemu completion zsh > ~/.zfunc/_kpemu"])
    s.add_argument("shell", nargs="?", default="bash", choices=["bash", "zsh", "fish", "tcsh", "powershell"])
    s.set_defaults(func=cmd_completion)
    return p


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """kpemu's own arguments and the command after the first `--` (deploy, exec, vm exec), kept whole:
    `kpemu deploy F -- kpemu exec lab node1 -- ipvsadm -Sn` keeps the inner `--`."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request, when this run is one (argcomplete sets _ARGCOMPLETE)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)


@contextlib.contextmanager
def _kernel_series(series: str | None) -> Iterator[None]:
    """`--kernel SERIES` as $KPEMU_KERNEL while the command runs: one setting for this process and the
    guests it boots, and gone after it (an in-process caller's later commands are not moved to it)."""
    if not series:
        yield
        return
    from kpemu.runtimes.kernels import KERNEL_ENV, wanted_series

    before = os.environ.get(KERNEL_ENV)
    os.environ[KERNEL_ENV] = str(wanted_series(series))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(KERNEL_ENV, None)
        else:
            os.environ[KERNEL_ENV] = before


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kpemu` console script."""
    try:
        own, command = split_command(sys.argv[1:] if argv is None else argv)
        parser = build_parser()
        _complete(parser)
        args = parser.parse_args(own)
        if command and not getattr(args, "takes_command", None):
            raise InputError(f"kpemu {args.command}: takes no command after --")
        args.cmd = command
        merge_topology(args)
        with _kernel_series(getattr(args, "kernel", None)):
            from kpemu.runtimes import adopt_owner

            adopt_owner()  # every process this command starts carries its token: a kill leaves none unfound
            return int(args.func(args))
    except KpemuError as e:
        print(f"kpemu: {e}" if not isinstance(e, InputError) else str(e), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kpemu: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kpemu runs -o json | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
