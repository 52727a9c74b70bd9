"""Who owns a lab or a helper process: a pid with its start time, so a reused pid is never the owner;
and what a refused run is told about the lab's owner."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kpemu.kernel import runowner
from kpemu.kernel.labstate import LabState, taken


def test_start_time_is_field_22_counted_after_the_command_name() -> None:
    stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 " + " ".join(["0"] * 12) + " 987654 100 200"
    assert runowner.start_time(stat) == 987654
    assert runowner.start_time("4242 (zombie) Z 1 " + " ".join(["0"] * 20)) is None
    assert runowner.start_time("garbage") is None


def test_a_token_names_one_process_and_dies_with_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    token = runowner.token_of(child.pid)
    assert token is not None and token.startswith(f"{child.pid}:") and runowner.alive(token)
    pid, start = token.split(":")
    assert not runowner.alive(f"{pid}:{int(start) + 1}")  # the same pid, started at another time: another process
    child.kill()
    child.wait()
    assert not runowner.alive(token)
    assert runowner.parse_token("warm-guest") is None and not runowner.alive("warm-guest")


def test_helpers_carry_the_token_and_are_orphans_once_it_is_dead() -> None:
    env = dict(os.environ, **{runowner.ENV: "1:1"})  # pid 1 never started at tick 1 here: a dead owner
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in {h.pid for h in runowner.orphans()} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in {h.pid for h in runowner.orphans()}
        assert os.getpid() not in {h.pid for h in runowner.helpers()}
    finally:
        child.kill()
        child.wait()
    assert runowner.owner_in_environ(b"A=1\0KPEMU_OWNER=12:34\0B=2") == "12:34"
    assert runowner.owner_in_environ(b"A=1\0") is None


def _state(**kw: object) -> LabState:
    return LabState(lab="web", source="", namespaces=[], members={}, created_at=0.0, **kw)  # type: ignore[arg-type]


def test_what_a_refused_run_is_told() -> None:
    me = runowner.my_token()
    pid = os.getpid()
    assert taken("web", _state(owner=me, command="run", out="runs/web")) == (
        f"lab 'web' is in use by kpemu run (pid {pid}, output folder runs/web); this run was refused and changed "
        "nothing",
        f"wait for it (tail --pid={pid} -f /dev/null), stop it (kill {pid}: it removes its lab as it stops), or "
        "build this one under another lab name: --name web-2")
    assert taken("web", _state(owner=me, command="deploy", complete=True)) == (
        "lab 'web' is deployed (kpemu deploy)", "kpemu destroy web, or build this one under another lab name: "
        "--name web-2")
    assert taken("web", _state(owner="1:1", command="run", out="runs/web")) == (
        "lab 'web' was left by a kpemu process that is gone (kpemu run (pid 1, output folder runs/web))",
        "kpemu destroy web removes what it left, or build this one under another lab name: --name web-2")
