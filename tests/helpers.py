"""What the tests share: the repository's paths, the one way to run the kpemu command, the root marker.

`kpemu(...)` runs the venv's `kpemu` console script (the one users run) as a subprocess, from the
repository root, with this checkout first on PYTHONPATH (so a worktree's code is what runs, whatever
the virtualenv was installed from); `start_kpemu(...)` starts the same command without waiting.
`cli(...)` calls the same entry point in this process, for unit tests that need no process of its own.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"
SCENARIOS = ROOT / "scenarios"
DATA = ROOT / "tests" / "data"

_SCRIPT = Path(sys.executable).with_name("kpemu")  # the console script beside this interpreter: the venv's kpemu
KPEMU: list[str] = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "kpemu.cli"]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def kpemu_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH, and `extra` on top."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def kpemu(*args: str, timeout: float = 900, env: dict[str, str] | None = None,
          input: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kpemu ARGS` from the repository root, waited for (`timeout` seconds), output captured as text;
    `env` is added to the environment."""
    return subprocess.run([*KPEMU, *args], cwd=ROOT, env=kpemu_env(env), capture_output=True, text=True,
                          input=input, stdin=None if input is not None else subprocess.DEVNULL,
                          timeout=timeout, check=False)


def start_kpemu(*args: str, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`kpemu ARGS` started from the repository root and not waited for; `popen` goes to Popen (stdout,
    stderr, ...), `env` is added to the environment."""
    return subprocess.Popen([*KPEMU, *args], cwd=ROOT, env=kpemu_env(env), text=True, **popen)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`kpemu ARGS` called in this process (kpemu.cli.main) from the repository root: exit code and output."""
    from kpemu.cli import main

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(["kpemu", *args], code, out.getvalue(), err.getvalue())


def without_places(text: str, file: object) -> str:
    """`text` with the `:LINE:COLUMN` after `file` taken out, for tests about the field path and message."""
    return re.sub(rf"{re.escape(str(file))}:\d+:\d+:", f"{file}:", text)
