"""Apply a scenario's faults to a deployed lab (effects), inside the lab's own namespaces only.

A fault arrives as plan/faults.py's FaultStep in JSON (a job's `faults`); standard library only,
so the job executor can run it (in the guest too).
"""

from __future__ import annotations

from typing import Any

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.proxy.xtables import RESTORE, SAVE


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
    return done


def apply_faults(steps: list[dict[str, Any]], backend: str = "nft") -> list[dict[str, Any]]:
    """Apply every fault in order; each step's JSON with `done` added."""
    return [{**s, "done": apply_fault(s, backend)} for s in steps]
