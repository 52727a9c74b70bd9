"""Where kpemu records what it creates outside a run's output folder (pure names and paths, no I/O).

    /run/netns/kp-<lab>-<member>  a lab member's network namespace (every kpemu namespace starts kp-)
    /run/netns/kp-probe-...       a start-up probe's throwaway namespace
    /run/kpemu/labs/<lab>.json    the lab's state file: its namespaces, written before the first exists
    /run/kpemu/labs/<lab>.d/      the lab's scratch files (trace monitor output while a flow runs)
    /run/kpemu/labs/<lab>.d/controlplane/  its etcd and kube-apiserver (kpemu/controlplane): data,
                                  secrets, logs, and pid files that `destroy` stops
    /run/kpemu/labs/probe/<ns>    a start-up probe namespace, recorded before it is created

/run is a tmpfs like /run/netns, so records and namespaces vanish together at reboot. Because the
state file exists before the first namespace and every namespace is marked with its lab as soon as
it exists (kpemu/kernel/owner.py), a deploy or run killed at any point is cleaned up by
`kpemu destroy NAME` or `destroy --all`; a name prefix alone is never taken as ownership.
`KPEMU_STATE_DIR` moves the labs directory (tests).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = Path(os.environ.get("KPEMU_STATE_DIR", "/run/kpemu/labs"))
PROBE_DIR = STATE_DIR / "probe"
PREFIX = "kp-"  # of every network namespace kpemu creates
PROBE_PREFIX = f"{PREFIX}probe-"  # of a probe's throwaway namespace


def state_path(lab: str) -> Path:
    """The state file of `lab`."""
    return STATE_DIR / f"{lab}.json"


def scratch_dir(lab: str) -> Path:
    """The directory for `lab`'s temporary files; `destroy` removes it with the lab."""
    return STATE_DIR / f"{lab}.d"
