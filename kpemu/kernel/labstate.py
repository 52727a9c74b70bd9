"""The state file of a lab: what it consists of, written before the first namespace exists.

State files live in /run/kpemu/labs/<lab>.json (tmpfs, like /run/netns, so both vanish together at
reboot). Standard library only: the executor of a run writes it, in the guest too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from kpemu.statedir import STATE_DIR, state_path

PREFIX = "kp-"


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

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE_DIR / f".{self.lab}.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(state_path(self.lab))


def load_state(lab: str) -> LabState | None:
    """The recorded state of `lab`, or None when there is no state file."""
    try:
        return LabState(**json.loads(state_path(lab).read_text()))
    except FileNotFoundError:
        return None
