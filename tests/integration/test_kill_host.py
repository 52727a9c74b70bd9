"""SIGKILL a host `kpemu run` at chosen moments; `kpemu destroy --all` must then leave nothing.

Nothing means: no kp- namespace, no state file, scratch directory, probe or process record, no
process the run started still alive, no trace file loose in /tmp, and the root namespace's links,
addresses, routes and both iptables backends' rules as they were before the run. The moments: as the state
file appears (deploy under way), while a flow is traced (the monitor's file exists), and at random
points. KPEMU_KILLS sets how many random kills (default 1; a soak runs many), KPEMU_KILL_SEED their
seed.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kpemu.kernel import netns as nsmod
from kpemu.kernel import runowner
from kpemu.kernel.owner import owner_of
from kpemu.statedir import STATE_DIR, scratch_dir, state_path
from tests.helpers import SCENARIOS, kpemu_env, needs_root, start_kpemu
from tests.integration.fabric_util import root_snapshot

pytestmark = [needs_root, pytest.mark.root]

SCENARIO = SCENARIOS / "nodeport-iptables.yaml"  # runs natively on this kernel
LAB = "nodeport-iptables"
KILLS = int(os.environ.get("KPEMU_KILLS", "1"))
SEED = int(os.environ.get("KPEMU_KILL_SEED", "1"))  # a soak sets its own, e.g. the time
RUN_SECONDS = 3.0  # about how long the run takes here; random kills land in its first RUN_SECONDS


def _state_file() -> bool:
    return state_path(LAB).exists()


def _tracing() -> bool:
    d = scratch_dir(LAB)
    return d.is_dir() and any(d.glob("trace-*"))


def _delay(seconds: float) -> Callable[[], bool]:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() >= deadline


def _stat(pid: int | str) -> list[str]:
    """/proc/PID/stat fields after the command name: [state, ppid, ...]; [] when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _descendants(pid: int) -> set[tuple[int, str]]:
    """Every process below `pid` as (pid, start time), so a reused pid is not mistaken for it."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (f := _stat(entry)):
            children.setdefault(int(f[1]), []).append((int(entry), f[19]))
    out: set[tuple[int, str]] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child[0])
    return out


def _alive(proc: tuple[int, str]) -> bool:
    f = _stat(proc[0])
    return bool(f) and f[19] == proc[1] and f[0] != "Z"


DIE_WITH_RUN = ("tcpdump", "xtables-monitor", "bpftrace", "nft")


def _helpers_of(pid: int) -> list[str]:
    """The capture, trace and drop-tracing processes started by kpemu process `pid` still running."""
    return [h.command for h in runowner.helpers()
            if runowner.parse_token(h.owner) == pid and h.command.split(" ", 1)[0].rsplit("/", 1)[-1] in DIE_WITH_RUN]


def _loose_trace_files() -> set[str]:
    return {str(p) for p in Path("/tmp").glob("kpemu-trace-*")}


def _kpemu(*args: str) -> subprocess.Popen[str]:
    return start_kpemu(*args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


# (name, a function called as the run starts that returns "has the moment come?")
MOMENTS: list[tuple[str, Callable[[], Callable[[], bool]]]] = [
    ("as the state file appears", lambda: _state_file),
    ("mid-trace", lambda: _tracing),
    *[(f"random {i + 1} (seed {SEED})", functools.partial(_delay, random.Random(SEED + i).uniform(0.3, RUN_SECONDS)))
      for i in range(KILLS)],
]


@pytest.mark.parametrize("moment", MOMENTS, ids=[m[0] for m in MOMENTS])
def test_kill_then_destroy_all_leaves_nothing(moment: tuple[str, Callable[[], Callable[[], bool]]],
                                              tmp_path: Path) -> None:
    name, start = moment
    assert not nsmod.list_netns(f"kp-{LAB}-"), f"lab {LAB} is already deployed: destroy it first"
    before, loose, namespaces_before = root_snapshot(), _loose_trace_files(), set(nsmod.list_netns("kp-"))
    run = _kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path / "out"))
    reached = start()
    seen: set[tuple[int, str]] = set()
    try:
        while not reached() and run.poll() is None:
            seen |= _descendants(run.pid)
            time.sleep(0.005)
        seen |= _descendants(run.pid)
        if run.poll() is not None and not name.startswith("random"):
            pytest.fail(f"the run ended (exit {run.returncode}) before the moment {name!r}")
        run.send_signal(signal.SIGKILL)
    finally:
        run.kill()
        run.wait()
    # its captures, trace monitors and drop tracer die with it (parent-death signal), before any destroy
    deadline = time.monotonic() + 5
    while (left := _helpers_of(run.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"still running after the run was killed: {left}"
    destroy = _kpemu("destroy", "--all")
    _, err = destroy.communicate(timeout=120)
    assert destroy.returncode == 0, err
    # the machine is shared: a kp- namespace that someone else made meanwhile, unmarked, is not ours
    ours = [ns for ns in set(nsmod.list_netns("kp-")) - namespaces_before
            if ns.startswith(f"kp-{LAB}-") or owner_of(ns) is not None]
    assert not ours
    records = [p for p in STATE_DIR.rglob("*") if p.is_file() or p.suffix == ".d"] if STATE_DIR.is_dir() else []
    assert not records, "state files, scratch files or probe records are left"
    deadline = time.monotonic() + 3
    while any(_alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in seen if _alive(p)], "processes the run started are still running"
    assert _loose_trace_files() == loose
    assert root_snapshot() == before


PROBE = "from kpemu.runtimes import probe_here; probe_here()"


@pytest.mark.parametrize(("sig", "cleanup"), [(signal.SIGINT, ""), (signal.SIGKILL, "destroy --all"),
                                              (signal.SIGKILL, "next probe")],
                         ids=["SIGINT", "SIGKILL then destroy --all", "SIGKILL then the next probe"])
def test_probe_interrupted_in_its_namespace_leaves_nothing(sig: signal.Signals, cleanup: str) -> None:
    """Ctrl-C while the start-up probe works in its namespace removes it on the way out; after a
    SIGKILL, `destroy --all` finds it by its record, and so does the next probe (no destroy needed)."""
    probe = subprocess.Popen([sys.executable, "-c", PROBE], env=kpemu_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = f"kp-probe-{probe.pid}-"
    try:
        deadline = time.monotonic() + 30
        while not nsmod.list_netns(mine) and probe.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert nsmod.list_netns(mine), "the probe never created its namespace"
        probe.send_signal(sig)
        probe.wait(timeout=30)
    finally:
        probe.kill()
        probe.wait()
    if cleanup == "destroy --all":
        destroy = _kpemu("destroy", "--all")
        _, err = destroy.communicate(timeout=60)
        assert destroy.returncode == 0, err
    elif cleanup == "next probe":
        assert nsmod.list_netns(mine), "the killed probe's namespace should be left for the next probe"
        again = subprocess.run([sys.executable, "-c", PROBE], env=kpemu_env(),
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
    assert not nsmod.list_netns(mine)
    assert not [p for p in STATE_DIR.rglob(f"{mine}*")]
