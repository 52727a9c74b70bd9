"""Apply a scenario's faults to a deployed lab (effects), inside the lab's own namespaces only (and
one kernel-wide setting, in kpemu's guest only, put back when the run ends).

A fault arrives as kpemu.faults.step.FaultStep in JSON (a job's `faults`); standard library only,
so the job executor can run it (in the guest too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.proxy.xtables import RESTORE, SAVE

PROC_SYS = Path("/proc/sys")
CMDLINE = Path("/proc/cmdline")
_RESTORE: list[tuple[Path, str]] = []  # kernel-wide settings a fault changed: (path, value before), in order


def in_kpemu_guest() -> bool:
    """Whether this is kpemu's guest: its agent's environment, and a kernel booted by virtme-ng (whose
    command line carries virtme's parameters). Either alone could be set by mistake on a host."""
    try:
        booted_by_virtme = "virtme" in CMDLINE.read_text()
    except OSError:
        return False
    return os.environ.get("KPEMU_IN_GUEST") == "1" and booted_by_virtme


def _set_kernel_wide(key: str, value: str, kind: str) -> str:
    """Set a kernel-wide sysctl (from the initial network namespace); only in a kpemu guest, which is
    disposable: the host's kernel-wide settings are never changed. Restored by `restore_kernel_wide`."""
    if not in_kpemu_guest():
        raise ApplyError(f"fault {kind}: {key.replace('/', '.')} is kernel-wide; kpemu sets it only in its guest "
                         "kernel, never on the host (run with --runtime vm)")
    path = PROC_SYS / key
    try:
        old = path.read_text().strip()
        path.write_text(value)
    except OSError as e:
        raise ApplyError(f"fault {kind}: {key.replace('/', '.')}={value} cannot be set: {e.strerror}") from None
    _RESTORE.append((path, old))
    return f"sysctl -w {key.replace('/', '.')}={value} (kernel-wide, was {old}; restored after the run)"


def restore_kernel_wide() -> None:
    """Put back every kernel-wide setting the faults changed, last change first."""
    while _RESTORE:
        path, old = _RESTORE.pop()
        try:
            path.write_text(old)
        except OSError:
            pass


def rules_to_delete(save_text: str, chains: tuple[str, ...] | list[str], target: str) -> list[str]:
    """The `-A <chain> ... -j target ...` lines of one table's iptables-save text, for any of `chains` (pure)."""
    return [ln for ln in save_text.splitlines()
            if ln.split(" ", 2)[:2] in [["-A", c] for c in chains] and f" -j {target} " in f"{ln} "]


def _run(ns: str, argv: list[str], what: str, text: str | None = None) -> str:
    res = run_in(ns, argv, input=text)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: fault {what}: {' '.join(argv)} failed: {res.stderr.strip()}")
    return res.stdout


def apply_fault(step: dict[str, Any], backend: str = "nft") -> list[str]:
    """Apply one fault; returns what was done, command by command (for the run's record)."""
    ns, kind = step["netns"], step["kind"]
    done: list[str] = []
    if step.get("kernel_wide"):  # first: on the host it is refused before anything else changes
        done.append(_set_kernel_wide(*step["kernel_wide"], kind))
    for argv in step.get("commands") or []:
        _run(ns, list(argv), kind)
        done.append(" ".join(argv))
    if step.get("delete_rules"):
        table, chains, target = step["delete_rules"]
        lines = rules_to_delete(_run(ns, [SAVE[backend], "-t", table], kind), chains, target)
        if not lines:
            raise ApplyError(f"{ns}: fault {kind}: no -j {target} rule in {table} {', '.join(chains)} to remove")
        text = "\n".join([f"*{table}", *("-D" + ln[2:] for ln in lines), "COMMIT"]) + "\n"
        _run(ns, [RESTORE[backend], "--noflush", "--wait"], kind, text)
        done += [f"iptables -t {table} -D{ln[2:]}" for ln in lines]
    for other, argv, text in step.get("elsewhere") or []:
        _run(other, list(argv), kind, text)
        done.append(f"in {other}: {' '.join(argv)}" + (f" < {len(text.splitlines())} lines" if text else ""))
    return done


def apply_faults(steps: list[dict[str, Any]], backend: str = "nft", after: str | None = None) -> list[dict[str, Any]]:
    """Apply, in order, the faults due before the first flow (`after` None) or after the flow `after`;
    each step's JSON with `done` added."""
    return [{**s, "done": apply_fault(s, backend)} for s in steps if s.get("after") == after]
