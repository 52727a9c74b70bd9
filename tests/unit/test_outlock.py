"""An output folder belongs to one run at a time: a second holder is refused and changes nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpemu.errors import EnvironmentProblem
from kpemu.outlock import LOCK_NAME, out_dir_lock

HOLD = """
import sys, time
from pathlib import Path
from kpemu.outlock import out_dir_lock
with out_dir_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(30)
"""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A folder with a file in it, held by another process."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.md").write_text("the first run's report\n")
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield out, proc.pid
    finally:
        proc.kill()
        proc.wait()


def _files(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir()}


def test_second_holder_is_refused_and_changes_nothing(held: tuple[Path, int]) -> None:
    out, pid = held
    before = _files(out)
    refused = rf"output folder {out} is in use by another kpemu run \(pid {pid}\)"
    with pytest.raises(EnvironmentProblem, match=refused), out_dir_lock(out):
        (out / "report.md").write_text("overwritten")
    assert _files(out) == before


def test_lock_is_released_when_the_holder_dies(held: tuple[Path, int]) -> None:
    out, pid = held
    subprocess.run(["kill", "-9", str(pid)], check=True)
    for _ in range(200):
        try:
            with out_dir_lock(out):
                return
        except EnvironmentProblem:
            time.sleep(0.01)
    pytest.fail("the lock of a killed holder was never released")


def test_reentrant_in_one_process(tmp_path: Path) -> None:
    with out_dir_lock(tmp_path / "a"), out_dir_lock(tmp_path / "a"):
        (tmp_path / "a" / "x").write_text("x")
    assert (tmp_path / "a" / "x").exists() and not (tmp_path / "a" / LOCK_NAME).exists()


def test_a_failure_leaves_no_folder_it_created(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError), out_dir_lock(out):
        raise RuntimeError("lab already exists")
    assert not out.exists()


def test_a_file_is_not_an_output_folder(tmp_path: Path) -> None:
    from kpemu.errors import InputError

    (tmp_path / "f").write_text("x")
    refused = "--out: cannot be the output folder: File exists"
    with pytest.raises(InputError, match=refused), out_dir_lock(tmp_path / "f"):
        pass
    assert (tmp_path / "f").read_text() == "x"
