"""The state file of a lab: what it consists of, written before the first namespace exists.

Where it lives and why it comes first: kpemu/statedir.py. Standard library only: the executor of a
run writes it, in the guest too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kpemu.kernel.runowner import alive, my_token, parse_token
from kpemu.statedir import PROBE_DIR, STATE_DIR, state_path


@dataclass
class LabState:
    """What a deployed lab consists of, as recorded in its state file."""

    lab: str
    source: str
    namespaces: list[str]
    members: dict[str, str]  # member -> netns
    kinds: dict[str, str] = field(default_factory=dict)  # member -> node|pod|external|underlay
    containers: list[str] = field(default_factory=list)  # members that run as containers (image:)
    created_at: float = 0.0
    deploy_seconds: float = 0.0
    complete: bool = False
    owner: str = ""  # the token (kpemu.kernel.runowner) of the kpemu process that built the lab
    command: str = ""  # what built it: run (the lab lives as long as the run) or deploy (it stays)
    out: str = ""  # the run's output folder

    def _written(self) -> Path:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE_DIR / f".{self.lab}.{os.getpid()}.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        return tmp

    def save(self) -> None:
        """Record the state (replacing the lab's state file)."""
        self._written().replace(state_path(self.lab))

    def claim(self) -> LabState | None:
        """Record the state only if the lab has no state file yet (atomic: of two runs, one wins);
        None when this one did, else the state already recorded."""
        tmp = self._written()
        try:
            os.link(tmp, state_path(self.lab))
            return None
        except FileExistsError:
            return load_state(self.lab) or LabState(self.lab, "", [], {})
        finally:
            tmp.unlink(missing_ok=True)

    def in_use(self) -> bool:
        """Whether a live kpemu process is building or running the lab (a finished deploy is nobody's)."""
        return bool(self.owner) and alive(self.owner) and not (self.complete and self.command == "deploy")

    def who(self) -> str:
        """The owner for people: `kpemu run (pid 123, output folder runs/x, since 21:04:02)`."""
        parts = [f"pid {parse_token(self.owner)}"] + ([f"output folder {self.out}"] if self.out else [])
        if self.created_at:
            parts.append("since " + time.strftime("%H:%M:%S", time.localtime(self.created_at)))
        return f"kpemu {self.command or 'run'} ({', '.join(parts)})"


def taken(lab: str, state: LabState) -> tuple[str, str]:
    """Why lab `lab`, recorded as `state`, cannot be built again now, and the fix (reason, fix)."""
    other = f"or build this one under another lab name: --name {lab}-2"
    if state.in_use():
        pid = parse_token(state.owner)
        return (f"lab {lab!r} is in use by {state.who()}; this run was refused and changed nothing",
                f"wait for it (tail --pid={pid} -f /dev/null), stop it (kill {pid}: it removes its lab as it "
                f"stops), {other}")
    if state.complete and state.command == "deploy":
        return f"lab {lab!r} is deployed (kpemu deploy)", f"kpemu destroy {lab}, {other}"
    return (f"lab {lab!r} was left by a kpemu process that is gone ({state.who()})",
            f"kpemu destroy {lab} removes what it left, {other}")


def load_state(lab: str) -> LabState | None:
    """The recorded state of `lab`, or None when there is no state file."""
    try:
        data = json.loads(state_path(lab).read_text())
    except FileNotFoundError:
        return None
    known = LabState.__dataclass_fields__
    return LabState(**{k: v for k, v in data.items() if k in known})


def record_probe(ns: str) -> Path:
    """Record start-up probe namespace `ns` as this process's, before it is created; the record."""
    PROBE_DIR.mkdir(parents=True, exist_ok=True)
    record = PROBE_DIR / ns
    record.write_text(my_token() + "\n")
    return record


def probe_running(record: Path) -> bool:
    """Whether the process that recorded a probe namespace still runs (a record it cannot read: no)."""
    try:
        return alive(record.read_text().strip())
    except OSError:
        return False


def sweep_probes(delete: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """Remove (with `delete`) the probe namespaces whose recording process is gone, and their records;
    (the namespaces removed, the probes still running). A killed probe's namespace goes at the next probe."""
    gone, running = [], []
    for record in sorted(PROBE_DIR.iterdir()) if PROBE_DIR.is_dir() else []:
        if probe_running(record):
            running.append(record.name)
            continue
        if delete(record.name):
            gone.append(record.name)
        record.unlink(missing_ok=True)
    return gone, running
