"""Runs never touch each other: one scenario run twice at once (the second refused with its owner
named, or run under its own lab name), and `destroy --all` while a run is live."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import load_state
from kpemu.statedir import scratch_dir
from tests.helpers import SCENARIOS, kpemu, needs_root, start_kpemu

pytestmark = [needs_root, pytest.mark.root]
SCENARIO = SCENARIOS / "faults" / "stale-conntrack.yaml"  # traced, with the drop tracer: scratch files to lose
LAB = "flt-stale-conntrack"


def _kpemu(*args: str) -> subprocess.Popen[str]:
    return start_kpemu(*args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _owned(lab: str, run: subprocess.Popen[str]) -> None:
    """Wait until `run` has claimed lab `lab` (its state file names it)."""
    deadline = time.monotonic() + 60
    while (state := load_state(lab)) is None or not state.owner.startswith(f"{run.pid}:"):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.01)


def _passed(run: subprocess.Popen[str], out: Path) -> dict:
    text, _ = run.communicate(timeout=300)
    assert run.returncode == 0, text[-3000:]
    hops = json.loads((out / "hops.json").read_text())
    assert hops["ok"], text[-3000:]
    return hops


def test_a_second_run_of_a_running_lab_is_refused_and_the_first_passes_untouched(tmp_path: Path) -> None:
    first = _kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path / "first"))
    _owned(LAB, first)
    second = kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path / "second"), timeout=120)
    err = " ".join(second.stderr.split())
    assert second.returncode == 3, err
    assert (f"kpemu: lab '{LAB}' is in use by kpemu run (pid {first.pid}, output folder {tmp_path / 'first'}, "
            "since ") in err
    assert (f"this run was refused and changed nothing fix: wait for it (tail --pid={first.pid} -f /dev/null), "
            f"stop it (kill {first.pid}: it removes its lab as it stops), or build this one under another lab name: "
            f"--name {LAB}-2") in err
    assert not (tmp_path / "second").exists()
    _passed(first, tmp_path / "first")
    drops = (tmp_path / "first" / "trace" / "drops.txt")
    assert drops.exists() and drops.read_text().strip(), "the first run's drop trace was lost"
    assert not scratch_dir(LAB).exists()


def test_two_copies_run_at_once_under_two_lab_names(tmp_path: Path) -> None:
    first = _kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path / "a"))
    _owned(LAB, first)
    second = _kpemu("run", str(SCENARIO), "--runtime", "host", "--name", "stale-copy", "--out", str(tmp_path / "b"))
    _owned("stale-copy", second)
    assert load_state(LAB) is not None  # both live at once
    _passed(second, tmp_path / "b")
    _passed(first, tmp_path / "a")
    assert not nsmod.list_netns("kp-stale-copy-") and not nsmod.list_netns(f"kp-{LAB}-")


def test_destroy_all_leaves_a_live_run_alone(tmp_path: Path) -> None:
    run = _kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path / "live"))
    _owned(LAB, run)
    destroy = kpemu("destroy", "--all", timeout=120)
    assert destroy.returncode == 0, destroy.stderr
    out = " ".join(destroy.stdout.split())
    assert f"left alone, in use: lab {LAB} by kpemu run (pid {run.pid}, output folder {tmp_path / 'live'}" in out
    by_name = kpemu("destroy", LAB, timeout=120)
    assert by_name.returncode == 3 and f"lab '{LAB}' is in use by kpemu run (pid {run.pid}" in by_name.stderr
    _passed(run, tmp_path / "live")
