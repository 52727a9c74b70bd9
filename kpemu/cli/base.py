"""What every subcommand module shares: the parser class, adding a subcommand with its examples,
the `-o json|yaml|table` output choice, the console for humans and progress lines."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kpemu.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

OUTPUTS = ("table", "json", "yaml")


def human_console(stderr: bool = False) -> Console:
    """A rich console; when output is not a terminal (CI logs, pipes) tables get 140 columns, not 80."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 140)


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as kpemu input errors (exit 2, one clear line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


def add_command(sub: argparse._SubParsersAction, name: str, help: str, examples: Sequence[str],
                description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with examples (each a whole command line)."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=help, description=description or help, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_topology(p: argparse.ArgumentParser, dest: str = "file", required: bool = True,
                 help: str = "a YAML file, or example:NAME (see kpemu examples)") -> None:
    """The topology as the first argument or as `-t/--topo FILE` (containerlab's spelling); merged into
    `dest` by `merge_topology` once parsed."""
    from kpemu.cli.complete import attach, yaml_or_example

    files = yaml_or_example("topology")
    attach(p.add_argument(dest, nargs="?", metavar="TOPOLOGY", help=help + "; or give it with -t/--topo"), files)
    attach(p.add_argument("-t", "--topo", metavar="TOPOLOGY", default=None,
                          help="the topology (instead of the argument)"), files)
    p.set_defaults(topology_dest=dest, topology_required=required)


def add_node(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """`--node NAME`, completed from the topology given before it."""
    from kpemu.cli.complete import attach, node_names

    attach(p.add_argument("--node", required=True, help=help or "the node's name in the topology"), node_names)


def add_lab(p: argparse.ArgumentParser, optional: bool = False, help: str = "the lab's name") -> None:
    """The LAB argument, completed from the labs deployed here."""
    from kpemu.cli.complete import attach, lab_names

    attach(p.add_argument("name", nargs="?" if optional else None, metavar="LAB", help=help), lab_names)


def merge_topology(args: argparse.Namespace) -> None:
    """Put `-t/--topo` into the topology argument; exactly one of them when the command needs one."""
    dest = getattr(args, "topology_dest", None)
    if dest is None:
        return
    given, topo = getattr(args, dest), args.topo
    if given is not None and topo is not None:
        raise InputError(f"kpemu {args.command}: give the topology once: {given} as the argument or "
                         f"-t {topo}, not both")
    if given is None and topo is None and args.topology_required:
        raise InputError(f"kpemu {args.command}: which topology? give it as the first argument or with -t FILE")
    setattr(args, dest, given if given is not None else topo)


def add_output(p: argparse.ArgumentParser) -> None:
    """`-o json|yaml|table` (default table), and the older `--json` as its alias."""
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                   help="how to print the result: a table or text for people (default), json or yaml for scripts")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


def add_kernel(p: argparse.ArgumentParser, runs_labs: bool = True) -> None:
    """`--kernel SERIES`: the guest kernel series (kpemu.runtimes.kernels; `kpemu main` sets $KPEMU_KERNEL)."""
    p.add_argument("--kernel", default=None, metavar="SERIES",
                   help="the guest kernel series, such as 6.1 or 6.12 (Debian's packages; kpemu vm setup --kernel "
                        "SERIES provides one)" + ("; the lab runs in the guest" if runs_labs else ""))


def guest_runtime(runtime: str | None, kernel: str | None, command: str) -> str | None:
    """The runtime a lab command uses: a guest kernel series asked for puts it in the guest (vm); with
    --runtime host that is a contradiction (InputError)."""
    if kernel is None:
        return runtime
    if runtime == "host":
        raise InputError(f"kpemu {command}: --kernel {kernel} picks a guest kernel, and --runtime host runs on this "
                         "one; give one of them")
    return "vm"


def add_query(sub: argparse._SubParsersAction, name: str, help: str, examples: Sequence[str],
              func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A subcommand that reports something, printed as `-o` asks, and runs `func`."""
    p = add_command(sub, name, help, examples)
    add_output(p)
    p.set_defaults(func=func)
    return p


def emit(args: argparse.Namespace, data: Any, table: Callable[[Any], str | None]) -> None:
    """Print `data` as args.output asks; `table` renders it for people (and may print itself, returning None)."""
    if args.output == "json":
        print(json.dumps(data, indent=2, default=str))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False), end="")
    else:
        text = table(data)
        if text is not None:
            print(text, end="" if text.endswith("\n") else "\n")


@contextmanager
def progress(console: Console) -> Iterator[Callable[[str], None]]:
    """A callback that shows the current phase: a spinner with the elapsed time on a terminal,
    plain timestamped lines otherwise (CI logs, pipes)."""
    start = time.monotonic()
    if not console.is_terminal:
        def line(msg: str) -> None:
            console.print(f"[{time.monotonic() - start:6.1f}s] {msg}", markup=False, highlight=False)

        yield line
        return
    with console.status("starting") as status:
        def update(msg: str) -> None:
            status.update(f"{msg} [dim]({time.monotonic() - start:.1f}s)[/]")

        yield update
