"""The agent in the guest: takes requests from the shared exchange directory and does the kernel work.

`python -S -m kpemu.jobs.agent DIR --once` (a cold guest: answer what is queued, then exit so the
guest powers off) or `--serve --idle SECONDS` (a warm guest: wait for requests until `stop`, or
until idle that long). Requests: `collect` (a run's job, files into work/<id>/), `deploy` (a lab
that stays up; its rules saved into work/<id>/rules for the host to check), `destroy`, `exec`,
`inspect`, `stop`. Standard library and light kpemu modules only, like the executor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from kpemu.errors import KpemuError
from kpemu.jobs import exchange
from kpemu.jobs.execute import collect, deploy
from kpemu.jobs.schema import Job
from kpemu.kernel import netns as nsmod

HEARTBEAT_SECONDS = 1.0
POLL_SECONDS = 0.05
EXEC_TIMEOUT = 600.0


def _beat(root: Path, stop: threading.Event) -> None:
    """Touch the heartbeat every second; a touch that fails is said on stderr (the guest's output log,
    which the host also reads as a sign of life), and the beat goes on."""
    path = root / exchange.HEARTBEAT
    while not stop.wait(HEARTBEAT_SECONDS):
        try:
            path.touch()
        except OSError as e:
            print(f"kpemu agent: heartbeat {path} could not be touched: {e}", file=sys.stderr, flush=True)


def handle(root: Path, req: dict[str, Any]) -> dict[str, Any]:
    """Do one request; its result (rc 0 ok, else the exit code kpemu would use, with `error`)."""
    from kpemu.kernel import lab
    from kpemu.kernel.snapshot import save_rules

    work = root / exchange.WORK / req["id"]
    work.mkdir(parents=True, exist_ok=True)
    log = (work / "log").open("a", buffering=1)

    def progress(msg: str) -> None:
        log.write(msg + "\n")

    kind = req["kind"]
    try:
        if kind == "collect":  # Job.from_json refuses a job of another version before anything runs
            return {"rc": 0, "seconds": collect(Job.from_json(req["job"]), work, progress)}
        if kind == "deploy":
            job = Job.from_json(req["job"])
            state = deploy(job, progress)
            save_rules(job.nodes, job.backend, list(job.rule_kinds), work / "rules")
            return {"rc": 0, "namespaces": state.namespaces, "seconds": state.deploy_seconds}
        if kind == "destroy":
            removal = lab.destroy_all() if req.get("all") else lab.destroy(req["lab"])
            return {"rc": 0, "removed": removal.namespaces, "summary": removal.summary()}
        if kind == "inspect":
            return {"rc": 0, "data": lab.inspect(req.get("lab"))}
        if kind == "exec":
            ns = lab.member_netns(req["lab"], req["member"])
            res = nsmod.run_in(ns, req["argv"], timeout=EXEC_TIMEOUT)
            return {"rc": res.returncode, "stdout": res.stdout, "stderr": res.stderr}
        if kind == "stop":
            return {"rc": 0}
        return {"rc": 2, "error": f"unknown request kind {kind!r}"}
    except KpemuError as e:
        return {"rc": e.exit_code, "error": str(e)}
    except FileNotFoundError as e:
        return {"rc": 127, "error": f"command not found: {e.filename}"}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "error": f"timed out after {EXEC_TIMEOUT:.0f}s"}
    except Exception:  # the agent must answer whatever happened
        return {"rc": 1, "error": traceback.format_exc(limit=8)}
    finally:
        log.close()


def serve(root: Path, once: bool, idle: float) -> int:
    """Answer requests until none are left (`once`), a `stop`, or `idle` seconds without one."""
    exchange.prepare(root)
    stop = threading.Event()
    (root / exchange.HEARTBEAT).touch()  # beating before the agent announces itself, however busy the CPU
    threading.Thread(target=_beat, args=(root, stop), daemon=True).start()
    exchange.write_json(root / exchange.AGENT, {"pid": os.getpid(), "kernel": os.uname().release,
                                                "started": time.time(), "idle": idle,
                                                "code": exchange.code_fingerprint()})
    last = time.monotonic()
    try:
        while True:
            reqs = exchange.pending(root)
            if not reqs:
                if once or (idle and time.monotonic() - last > idle):
                    return 0
                time.sleep(POLL_SECONDS)
                continue
            for path in reqs:
                running = root / exchange.RUNNING / path.name
                try:
                    path.replace(running)
                except FileNotFoundError:
                    continue
                req = json.loads(running.read_text())
                print(f"agent: {req['kind']} {req['id']}", flush=True)
                res = handle(root, req)
                exchange.write_json(root / exchange.RESULTS / path.name, res)
                running.unlink(missing_ok=True)
                last = time.monotonic()
                if req["kind"] == "stop":
                    return 0
    finally:
        stop.set()


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0])
    once = "--once" in args
    idle = float(args[args.index("--idle") + 1]) if "--idle" in args else 0.0
    return serve(root, once, idle)


if __name__ == "__main__":
    sys.exit(main())
