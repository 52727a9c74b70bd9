"""Run the kpemu CLI in-process from the repository root: exit code, stdout and stderr."""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass

from kpemu.cli import main
from tests.conftest import ROOT

__all__ = ["ROOT", "Result", "kpemu", "without_places"]


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def kpemu(*args: str) -> Result:
    """`kpemu ARGS...` with relative paths resolved from the repository root."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(cwd)
    return Result(code, out.getvalue(), err.getvalue())


def without_places(text: str, file: object) -> str:
    """`text` with the `:LINE:COLUMN` after `file` taken out, for tests about the field path and message."""
    import re

    return re.sub(rf"{re.escape(str(file))}:\d+:\d+:", f"{file}:", text)
