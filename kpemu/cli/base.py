"""What every subcommand module shares: the argument parser class and the console for humans."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from kpemu.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console


def human_console(stderr: bool = False) -> Console:
    """A rich console; when output is not a terminal (CI logs, pipes) tables get 140 columns, not 80."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 140)


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as kpemu input errors (exit 2, one clear line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")
