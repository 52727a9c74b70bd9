"""Requests and results through a shared directory: how the host talks to the agent in the guest.

The guest has no network device; it shares directories with the host (9p). The host writes
`requests/<id>.json` (atomically: a temporary name, then rename), the agent claims it by renaming
it into `running/`, works in `work/<id>/` (a collect job's files; `log` holds progress lines) and
answers with `results/<id>.json`. The agent also keeps `agent.json` (who it is) and touches
`heartbeat` every second, so the host can tell a busy guest from a dead one. Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from kpemu.errors import KpemuError
from kpemu.jobs.schema import Reply, Request
from kpemu.kernel.runowner import token_of

AGENT = "agent.json"
HEARTBEAT = "heartbeat"
REQUESTS, RUNNING, RESULTS, WORK = "requests", "running", "results", "work"


def code_fingerprint() -> str:
    """Which kpemu code this is (the names, sizes and times of its source files): a warm guest whose agent
    started from other code is restarted rather than trusted."""
    src = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1()
    for path in sorted(src.rglob("*.py")):
        st = path.stat()
        digest.update(f"{path.relative_to(src)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def prepare(root: Path) -> None:
    """Create the exchange directory's parts (idempotent)."""
    for sub in (REQUESTS, RUNNING, RESULTS, WORK):
        (root / sub).mkdir(parents=True, exist_ok=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so that a reader on the other side never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def submit(root: Path, kind: str, **fields: Any) -> str:
    """Queue a request of `kind` (the other fields of kpemu.jobs.schema.Request: job, lab, member, argv,
    all); its id (also the name of its work directory)."""
    prepare(root)
    rid = f"{time.time_ns():020d}-{kind}-{secrets.token_hex(3)}"  # sorts in the order submitted
    (root / WORK / rid).mkdir(parents=True, exist_ok=True)
    req = Request(id=rid, kind=kind, by=token_of(os.getpid()), **fields)
    write_json(root / REQUESTS / f"{rid}.json", req.to_json())
    return rid


def waiting(root: Path) -> list[str]:
    """The owner tokens (kpemu.kernel.runowner) of the processes whose requests are queued or running
    and not yet answered."""
    found = []
    for sub in (REQUESTS, RUNNING):
        for path in sorted((root / sub).glob("*.json")) if (root / sub).is_dir() else []:
            with contextlib.suppress(OSError, ValueError, KpemuError):
                req = Request.from_json(json.loads(path.read_text()))
                if not (root / RESULTS / path.name).exists() and req.by is not None:
                    found.append(req.by)
    return found


def pending(root: Path) -> list[Path]:
    """Queued requests, oldest first."""
    try:
        return sorted((root / REQUESTS).glob("*.json"))
    except OSError:
        return []


def result(root: Path, rid: str) -> Reply | None:
    """The reply to request `rid`, or None while there is none; InputError naming the field of a
    malformed one."""
    try:
        data = json.loads((root / RESULTS / f"{rid}.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return Reply.from_json(data)


def heartbeat_age(root: Path) -> float | None:
    """Seconds since the agent last touched its heartbeat (None: it never did)."""
    try:
        return time.time() - (root / HEARTBEAT).stat().st_mtime
    except FileNotFoundError:
        return None
