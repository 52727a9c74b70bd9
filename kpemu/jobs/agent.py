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

from kpemu.errors import KpemuError
from kpemu.jobs import exchange
from kpemu.jobs.execute import collect, deploy
from kpemu.jobs.schema import Reply, Request
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


def answer(root: Path, data: object) -> tuple[Request | None, Reply]:
    """Read one request document and do it: (the request, None when it could not be read; the reply).
    A request that cannot be read (malformed, or a job of another JOB_VERSION) is answered with its
    exit code before anything runs."""
    try:
        req = Request.from_json(data)
    except KpemuError as e:
        return None, Reply(rc=e.exit_code, error=str(e))
    print(f"agent: {req.kind} {req.id}", flush=True)
    return req, handle(root, req)


def handle(root: Path, req: Request) -> Reply:
    """Do one request; its reply (rc 0 ok, else the exit code kpemu would use, with `error`)."""
    from kpemu.kernel import lab
    from kpemu.kernel.snapshot import save_rules

    work = root / exchange.WORK / req.id
    work.mkdir(parents=True, exist_ok=True)
    log = (work / "log").open("a", buffering=1)

    def progress(msg: str) -> None:
        log.write(msg + "\n")

    try:
        if req.kind in ("collect", "deploy") and req.job is None:
            return Reply(rc=2, error=f"a {req.kind} request without a job")
        if req.kind == "collect" and req.job is not None:
            return Reply(rc=0, seconds=collect(req.job, work, progress))
        if req.kind == "deploy" and req.job is not None:
            state = deploy(req.job, progress)
            save_rules(req.job.nodes, req.job.backend, list(req.job.rule_kinds), work / "rules")
            return Reply(rc=0, namespaces=tuple(state.namespaces), seconds=state.deploy_seconds)
        if req.kind == "destroy":
            removal = lab.destroy_all() if req.all else lab.destroy(req.lab or "")
            return Reply(rc=0, removed=tuple(removal.namespaces), summary=removal.summary())
        if req.kind == "inspect":
            return Reply(rc=0, data=lab.inspect(req.lab))
        if req.kind == "exec":
            ns = lab.member_netns(req.lab or "", req.member)
            res = nsmod.run_in(ns, list(req.argv), timeout=EXEC_TIMEOUT)
            return Reply(rc=res.returncode, stdout=res.stdout, stderr=res.stderr)
        if req.kind == "stop":
            return Reply(rc=0)
        return Reply(rc=2, error=f"unknown request kind {req.kind!r}")
    except KpemuError as e:
        return Reply(rc=e.exit_code, error=str(e))
    except FileNotFoundError as e:
        return Reply(rc=127, error=f"command not found: {e.filename}")
    except subprocess.TimeoutExpired:
        return Reply(rc=124, error=f"timed out after {EXEC_TIMEOUT:.0f}s")
    except Exception:  # the agent must answer whatever happened
        return Reply(rc=1, error=traceback.format_exc(limit=8))
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
                try:
                    data = json.loads(running.read_text())
                except (OSError, ValueError) as e:
                    req, res = None, Reply(rc=2, error=f"{path.name}: not a JSON request: {e}")
                else:
                    req, res = answer(root, data)
                exchange.write_json(root / exchange.RESULTS / path.name, res.to_json())
                running.unlink(missing_ok=True)
                last = time.monotonic()
                if req is not None and req.kind == "stop":
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
