"""Error types that map to kpemu's exit codes (0 ok, 1 expectation failed, 2 bad input, 3 environment)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One problem in an input file: which file, which field, what was expected."""

    file: str
    path: str
    message: str
    line: int | None = None  # where in the file, when known (kpemu.inputs.locate)
    column: int | None = None

    def __str__(self) -> str:
        file = f"{self.file}:{self.line}:{self.column}" if self.file and self.line else self.file
        where = ": ".join(part for part in (file, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


class KpemuError(Exception):
    """Base class; `exit_code` is what the CLI exits with."""

    exit_code = 1


class InputError(KpemuError):
    """Bad input: a YAML file, a CLI argument or a topology that cannot work. Exit code 2."""

    exit_code = 2

    def __init__(self, problems: list[Problem] | str):
        if isinstance(problems, str):
            problems = [Problem("", "", problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class EnvironmentProblem(KpemuError):
    """The machine cannot run what was asked (missing kernel feature, tool, guest kernel). Exit code 3."""

    exit_code = 3

    def __init__(self, reason: str, fix: str = ""):
        self.reason = reason
        self.fix = fix
        super().__init__(reason + (f"\n  fix: {fix}" if fix else ""))


class GuestHung(EnvironmentProblem):
    """The guest's agent stopped beating in the middle of a request (the emulated machine hung). Exit code 3.

    `answered`: (work directory, kpemu.jobs.schema.Reply) of the requests it finished before, in order
    (filled by who knows them)."""

    def __init__(self, reason: str, fix: str = ""):
        super().__init__(reason, fix)
        self.answered: list[tuple[Path, Any]] = []


class ApplyError(KpemuError):
    """The kernel refused part of a plan (deploy rolls back). Exit code 3."""

    exit_code = 3
