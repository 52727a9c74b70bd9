"""Apply a scenario's faults to a deployed lab (effects), inside the lab's own namespaces only (and
one kernel-wide setting, in kpemu's guest only, put back when the run ends).

A fault arrives as a kpemu.plan.faultstep.FaultStep (a job's `faults`) and goes back as an AppliedFault;
standard library only, so the job executor can run it (in the guest too).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.plan.faultstep import AppliedFault, FaultStep
from kpemu.proxy.conntrack import NO_ENTRY, parse_entries, stale
from kpemu.proxy.xtables import RESTORE, SAVE

PROC_SYS = Path("/proc/sys")
CMDLINE = Path("/proc/cmdline")
_RESTORE: list[tuple[Path, str]] = []  # kernel-wide settings a fault changed: (path, value before), in order


def in_kpemu_guest(said: bool) -> bool:
    """Whether this is kpemu's guest: the runtime `said` so (kpemu.runtimes.in_guest, carried by the job),
    and the kernel was booted by virtme-ng (its command line carries virtme's parameters). Either
    alone could be set by mistake on a host."""
    try:
        booted_by_virtme = "virtme" in CMDLINE.read_text()
    except OSError:
        return False
    return said and booted_by_virtme


def _set_kernel_wide(key: str, value: str, kind: str, in_guest: bool) -> str:
    """Set a kernel-wide sysctl (from the initial network namespace); only in a kpemu guest (`in_guest`,
    as the runtime says, and `in_kpemu_guest`), which is disposable: the host's kernel-wide settings are
    never changed. Restored by `restore_kernel_wide`."""
    if not in_kpemu_guest(in_guest):
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


def nft_rules_to_delete(listing: str, statement: str) -> list[tuple[str, str]]:
    """(handle, rule) of each rule in an `nft -a list chain` text whose words include `statement` (pure):
    "masquerade" finds `masquerade fully-random` and `... @hairpin-connections masquerade fully-random`."""
    found = []
    for line in listing.splitlines():
        rule, sep, handle = line.strip().rpartition(" # handle ")
        words = rule.split(' comment "', 1)[0].split()
        if sep and handle.isdigit() and statement in words and words[0] not in ("chain", "type"):
            found.append((handle, rule))
    return found


def _delete_nft(ns: str, kind: str, which: tuple[str, str, str, str]) -> list[str]:
    """Remove the nft rules `which` (a FaultStep's `delete_nft`) names, in one transaction; what was done."""
    family, table, chain, statement = which
    found = nft_rules_to_delete(_run(ns, ["nft", "-a", "list", "chain", family, table, chain], kind), statement)
    if not found:
        raise ApplyError(f"{ns}: fault {kind}: no rule with {statement} in nft chain {family} {table} {chain} "
                         "to remove")
    _run(ns, ["nft", "-f", "-"], kind,
         "".join(f"delete rule {family} {table} {chain} handle {h}\n" for h, _ in found))
    return [f"nft delete rule {family} {table} {chain} handle {h}  # {rule}" for h, rule in found]


def _run(ns: str, argv: list[str], what: str, text: str | None = None) -> str:
    res = run_in(ns, argv, input=text)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: fault {what}: {' '.join(argv)} failed: {res.stderr.strip()}")
    return res.stdout


def apply_fault(step: FaultStep, backend: str = "nft", in_guest: bool = False) -> list[str]:
    """Apply one fault (`in_guest`: the runtime runs this in kpemu's guest); returns what was done,
    command by command (for the run's record)."""
    ns, kind = step.netns, step.kind
    done: list[str] = []
    if step.kernel_wide:  # first: on the host it is refused before anything else changes
        done.append(_set_kernel_wide(*step.kernel_wide, kind, in_guest))
    for argv in step.commands:
        _run(ns, list(argv), kind)
        done.append(" ".join(argv))
    if step.delete_rules:
        table, chains, target = step.delete_rules
        lines = rules_to_delete(_run(ns, [SAVE[backend], "-t", table], kind), chains, target)
        if not lines:
            raise ApplyError(f"{ns}: fault {kind}: no -j {target} rule in {table} {', '.join(chains)} to remove")
        text = "\n".join([f"*{table}", *("-D" + ln[2:] for ln in lines), "COMMIT"]) + "\n"
        _run(ns, [RESTORE[backend], "--noflush", "--wait"], kind, text)
        done += [f"iptables -t {table} -D{ln[2:]}" for ln in lines]
    if step.delete_nft:
        done += _delete_nft(ns, kind, step.delete_nft)
    for other, argv, text in step.elsewhere:
        _run(other, list(argv), kind, text)
        done.append(f"in {other}: {' '.join(argv)}" + (f" < {len(text.splitlines())} lines" if text else ""))
    for other, plan in step.conntrack:
        done += [f"in {other}: {line}" for line in conntrack_cleanup(other, plan, kind)]
    return done


def _delete(ns: str, argv: list[str], kind: str) -> str:
    """One `conntrack -D`; "0 flow entries have been deleted" is success, as kube-proxy takes it."""
    res = run_in(ns, argv)
    said = (res.stderr + res.stdout).strip()
    if res.returncode != 0 and NO_ENTRY not in said:
        raise ApplyError(f"{ns}: fault {kind}: {' '.join(argv)} failed: {said}")
    last = said.splitlines()[-1] if said else ""
    return f"{' '.join(argv)}: {last.split('): ', 1)[-1]}"


def conntrack_cleanup(ns: str, plan: dict[str, Any], kind: str) -> list[str]:
    """kube-proxy's UDP conntrack cleanup in one node's namespace, as kpemu.proxy.ctplan planned it:
    its own conntrack tool commands (before 1.32), or the reconciler (1.32+): the table listed, the
    stale entries selected as kube-proxy selects them and each deleted with the conntrack tool."""
    if "commands" in plan:
        return [f"kube-proxy: {_delete(ns, list(argv), kind)}" for argv in plan["commands"]]
    if "reconcile" in plan:
        entries = parse_entries(_run(ns, ["conntrack", "-L", "-p", "udp"], kind))
        gone = stale(entries, plan["reconcile"])
        return [f"kube-proxy's conntrack reconciler: {len(entries)} UDP entries listed, {len(gone)} stale"] + \
            [f"kube-proxy's conntrack reconciler: {_delete(ns, list(e.delete_argv()), kind)}" for e in gone]
    return [f"kube-proxy: {plan.get('skipped', 'no conntrack cleanup')}"]


def apply_faults(steps: tuple[FaultStep, ...] | list[FaultStep], backend: str = "nft", after: str | None = None,
                 in_guest: bool = False) -> list[AppliedFault]:
    """Apply, in order, the faults due before the first flow (`after` None) or after the flow `after`
    (`in_guest`: as `apply_fault`); each step with what was `done`."""
    return [AppliedFault(**asdict(s), done=tuple(apply_fault(s, backend, in_guest))) for s in steps
            if s.after == after]
