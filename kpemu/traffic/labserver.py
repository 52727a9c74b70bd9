"""A deployed lab's pods served until the lab is destroyed (`kpemu deploy --serve`): the serving process
started detached, recorded in the lab's scratch directory, and stopped by destroy.

It must outlive the command that deployed the lab, so it neither dies with its parent nor carries the
deploying process's owner token (kpemu.kernel.runowner: a helper with a dead owner's token is an
orphan that the next sweep kills); it is recorded instead as `pid:start` in `serve.pid`, which
destroy (kpemu.controlplane.procs.stop_recorded, over the scratch directory) stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kpemu.errors import EnvironmentProblem
from kpemu.kernel.runowner import ENV, token_of
from kpemu.pace import scaled

READY_TIMEOUT = 10.0  # seconds (scaled) for every socket to be bound
SERVE_FILES = "serve."  # serve.json, serve.log, serve.pid in the lab's scratch directory
PIDFILE = SERVE_FILES + "pid"


def start_lab_server(pods: list[dict[str, object]], directory: Path,
                     health: list[dict[str, object]] | None = None) -> str:
    """Start serving `pods` ({pod, ns, tcp, udp, sctp}) and kube-proxy's `health` servers (HealthSpec JSON)
    from a detached process recorded in `directory`; its `pid:start` token once it is ready.
    EnvironmentProblem with its log when it does not get ready."""
    directory.mkdir(parents=True, exist_ok=True)
    spec, log = directory / f"{SERVE_FILES}json", directory / f"{SERVE_FILES}log"
    spec.write_text(json.dumps({"pods": pods, "health": health or []}))
    env = {k: v for k, v in os.environ.items() if k != ENV}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kpemu.traffic.serve_lab", str(spec)], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd="/")
    token = token_of(proc.pid) or str(proc.pid)
    (directory / PIDFILE).write_text(token + "\n")
    deadline = time.monotonic() + scaled(READY_TIMEOUT)
    while time.monotonic() < deadline:
        if b"ready" in log.read_bytes():
            return token
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    tail = log.read_text(errors="replace")[-800:]
    raise EnvironmentProblem(f"the lab's pod servers did not start: {tail.strip() or 'no output'}",
                             f"see {log}")
