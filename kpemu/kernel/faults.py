"""Apply a scenario's faults to a deployed lab (effects), inside the lab's own namespaces only."""

from __future__ import annotations

from kpemu.errors import ApplyError
from kpemu.kernel import netfilter
from kpemu.kernel.netns import run_in
from kpemu.plan.faults import FaultStep


def rules_to_delete(save_text: str, chains: tuple[str, ...], target: str) -> list[str]:
    """The `-A <chain> ... -j target ...` lines of one table's iptables-save text, for any of `chains` (pure)."""
    return [ln for ln in save_text.splitlines()
            if ln.split(" ", 2)[:2] in [["-A", c] for c in chains] and f" -j {target} " in f"{ln} "]


def apply_fault(step: FaultStep, backend: str = "nft") -> list[str]:
    """Apply one fault; returns what was done, command by command (for the run's record)."""
    done: list[str] = []
    for argv in step.commands:
        res = run_in(step.netns, argv)
        if res.returncode != 0:
            raise ApplyError(f"{step.netns}: fault {step.kind}: {' '.join(argv)} failed: {res.stderr.strip()}")
        done.append(" ".join(argv))
    if step.delete_rules is not None:
        table, chains, target = step.delete_rules
        lines = rules_to_delete(netfilter.save(step.netns, backend, table), chains, target)
        if not lines:
            raise ApplyError(f"{step.netns}: fault {step.kind}: no -j {target} rule in {table} "
                             f"{', '.join(chains)} to remove")
        netfilter.restore(step.netns, "\n".join([f"*{table}", *("-D" + ln[2:] for ln in lines), "COMMIT"]) + "\n",
                          backend)
        done += [f"iptables -t {table} -D{ln[2:]}" for ln in lines]
    return done


def apply_faults(steps: list[FaultStep], backend: str = "nft") -> list[list[str]]:
    """Apply every fault in order."""
    return [apply_fault(s, backend) for s in steps]
