"""Labs on this kernel: destroy, inspect, exec; a state file records what each lab created.

Where state files live and why a killed run leaves nothing unowned: kpemu/statedir.py. Without a
state file, `destroy NAME` removes only namespaces marked as NAME's, and `destroy --all` only
recorded labs, recorded probes and marked namespaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpemu.controlplane.procs import in_use, stop_recorded
from kpemu.errors import EnvironmentProblem, InputError, KpemuError
from kpemu.kernel import netns as nsmod
from kpemu.kernel.inspect import describe_netns
from kpemu.kernel.labstate import load_state, sweep_probes
from kpemu.kernel.owner import lab_owner, owner_of
from kpemu.kernel.runowner import kill_orphans, my_token, parse_token
from kpemu.statedir import PREFIX, STATE_DIR, scratch_dir, state_path

NEEDS_PRIVILEGE = "kpemu {} need root or CAP_NET_ADMIN + CAP_SYS_ADMIN; run with sudo"
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def privileged() -> bool:
    """Whether this process may build labs: root, or both capabilities in its effective set."""
    if os.geteuid() == 0:
        return True
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    caps = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapEff:")), 0)
    return all(caps >> bit & 1 for bit in (CAP_NET_ADMIN, CAP_SYS_ADMIN))


def require_root(commands: str = "deploy/run/destroy") -> None:
    """Refuse (exit 3, one line) before anything is probed or created when this process cannot build labs."""
    if not privileged():
        raise EnvironmentProblem(NEEDS_PRIVILEGE.format(commands))


def _remove_containers(lab: str | None) -> list[str]:
    """Container members: remove the lab's containers (every kpemu container when `lab` is None),
    found by their kpemu.lab label, before their namespaces are deleted. A lab recorded without
    containers needs no docker engine."""
    state = load_state(lab) if lab else None
    if state is not None and not state.containers:
        return []
    from kpemu.docker.members import remove_containers

    return remove_containers(lab)


@dataclass
class Removal:
    """What `destroy` found: the namespaces and files it removed, and the namespaces it left alone."""

    lab: str  # "" for --all
    recorded: bool  # whether the lab had a state file
    namespaces: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # namespace -> why it is not this lab's
    busy: dict[str, str] = field(default_factory=dict)  # lab -> the live kpemu process that owns it
    killed: list[str] = field(default_factory=list)  # helper processes a killed kpemu process left running

    def add(self, other: Removal) -> None:
        self.namespaces += other.namespaces
        self.files += other.files
        self.left.update(other.left)

    def summary(self) -> str:
        """One paragraph for humans: what was removed, and what was found but left alone, and why."""
        who = f"lab {self.lab}" if self.lab else "every kpemu lab"
        if self.lab and not self.recorded and not self.namespaces:
            head = f"{who}: no state file and no namespace marked as its own; removed nothing"
        else:
            head = f"{who}: removed {len(self.namespaces)} namespaces" + (
                ": " + " ".join(self.namespaces) if self.namespaces else "")
            if self.files:
                head += f" and {len(self.files)} recorded files"
        if self.killed:
            head += "\nkilled what killed kpemu processes left running: " + ", ".join(self.killed)
        if self.busy:
            head += "\nleft alone, in use: " + ", ".join(f"lab {lab} by {who}"
                                                         for lab, who in sorted(self.busy.items()))
        if self.left:
            head += "\nleft alone (not " + (f"{self.lab}'s" if self.lab else "kpemu's") + "): " + ", ".join(
                f"{ns} ({why})" for ns, why in sorted(self.left.items()))
        return head


def _remove_files(*paths: Path) -> list[str]:
    removed = []
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(str(p))
        elif p.exists():
            p.unlink(missing_ok=True)
            removed.append(str(p))
    return removed


def destroy(lab: str) -> Removal:
    """Remove what `lab`'s state file records (idempotent), or without one, its marked namespaces; the
    one destroy of a lab, for `kpemu destroy`, the executor (a run's lab, a failed deploy) and the agent.

    A lab a live kpemu process other than this one uses is refused. A recorded namespace marked as
    another lab's is left alone (a stale state file must not remove a lab deployed since); an unmarked
    recorded one is removed (the run was killed between creating and marking it). Container members
    go first, the processes in each namespace with it, the lab's scratch directory and state file last.
    """
    require_root()
    state = load_state(lab)
    if state is not None and state.in_use() and state.owner != my_token():
        raise EnvironmentProblem(f"lab {lab!r} is in use by {state.who()}: not removed",
                                 f"wait for it to finish, or stop it (kill {parse_token(state.owner)}: it removes "
                                 "its lab as it stops)")
    user = in_use(scratch_dir(lab))
    if user is not None and user != my_token():
        raise EnvironmentProblem(f"lab {lab!r}'s control plane is in use by kpemu pid {parse_token(user)}: not removed",
                                 f"wait for it to finish, or stop it (kill {parse_token(user)})")
    _remove_containers(lab)  # step 1 (container members): by label, so it needs no state file
    out = Removal(lab, state is not None)
    # what its scratch directory records (a --serve deploy's pod servers, its control plane), whoever
    # started it, before the namespaces their sockets hold
    out.killed += stop_recorded(scratch_dir(lab))
    mine = lab_owner(lab)
    for ns in state.namespaces if state else nsmod.list_netns(f"{PREFIX}{lab}-"):
        who = owner_of(ns)
        if who == mine or (state is not None and who is None):
            if nsmod.delete_netns(ns):
                out.namespaces.append(ns)
        elif nsmod.netns_exists(ns):
            out.left[ns] = f"marked {who}" if who else "not marked by kpemu"
    out.files = _remove_files(scratch_dir(lab), state_path(lab))
    return out


def destroy_all() -> Removal:
    """Remove every recorded lab, every recorded probe namespace and every namespace kpemu marked
    (the runtimes' `destroy_all` also stops every guest)."""
    require_root()
    out = Removal("", True)
    busy = {lab: state for lab in labs() if (state := load_state(lab)) is not None and state.in_use()}
    for lab, state in busy.items():
        out.busy[lab] = state.who()
    for helper in kill_orphans():
        out.killed.append(helper.describe())
    if not busy:  # container members: every container labelled kpemu.lab (a live run's would go too)
        _remove_containers(None)
    for lab in labs():
        if lab not in busy:
            out.add(destroy(lab))
    gone, live_probes = sweep_probes(nsmod.delete_netns)
    out.namespaces += gone
    out.left.update(dict.fromkeys(live_probes, "a start-up probe of a running kpemu process"))
    busy_marks = {lab_owner(lab) for lab in busy}
    for ns in nsmod.list_netns(PREFIX):
        if ns in live_probes:
            continue
        who = owner_of(ns)
        if who is None:
            out.left[ns] = "not marked by kpemu"
        elif who in busy_marks:
            out.left[ns] = f"marked {who}, in use"
        elif nsmod.delete_netns(ns):
            out.namespaces.append(ns)
    sweep_scratch(out, set(busy))
    out.files += _remove_files(*half_written_states())
    return out


def half_written_states() -> list[Path]:
    """State files a killed process left half written (`.LAB.PID.json.tmp`, kpemu.kernel.labstate: written,
    then renamed into place) whose process is gone."""
    out = []
    for tmp in sorted(STATE_DIR.glob(".*.json.tmp")) if STATE_DIR.is_dir() else []:
        pid = tmp.name.removesuffix(".json.tmp").rsplit(".", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            out.append(tmp)
    return out


def sweep_scratch(out: Removal, busy: set[str]) -> None:
    """Remove every lab's scratch directory but the busy labs' (also one left without its state file:
    a control plane started before the lab), stopping the processes its pid files name; one whose
    control plane a live kpemu process uses is left alone."""
    for d in sorted(STATE_DIR.glob("*.d")) if STATE_DIR.is_dir() else []:
        lab = d.name[:-2]
        if lab in busy:
            continue
        if (user := in_use(d)) is not None:
            out.busy[lab] = f"kpemu pid {parse_token(user)} (its control plane)"
            continue
        out.killed += stop_recorded(d)
        out.files += _remove_files(d)


def labs() -> list[str]:
    """Names of recorded labs."""
    return sorted(f.stem for f in STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []


def inspect(lab: str | None = None) -> dict[str, Any]:
    """Namespaces, interfaces with addresses, and routes of one lab or of all of them."""
    names = [lab] if lab else labs()
    if names:  # reading a lab's interfaces means entering its namespaces
        require_root("inspect/exec")
    present = set(nsmod.list_netns(PREFIX))
    out: dict[str, Any] = {"labs": []}
    for name in names:
        state = load_state(name)
        if state is None:
            raise InputError(f"kpemu inspect: no lab named {name!r} (labs: {', '.join(labs()) or 'none'})")
        out["labs"].append({
            "lab": name,
            "source": state.source,
            "complete": state.complete,
            "members": [
                {"member": m, "kind": state.kinds.get(m, ""), **describe_netns(ns)}
                for m, ns in state.members.items()
                if ns in present
            ],
        })
    out["orphans"] = sorted(present - {ns for n in labs() if (s := load_state(n)) for ns in s.namespaces})
    return out


def member_netns(lab: str, member: str) -> str:
    """The namespace of a lab member, with a clear error when either is unknown."""
    state = load_state(lab)
    if state is None:
        raise InputError(f"no lab named {lab!r} (labs: {', '.join(labs()) or 'none'}); deploy it first")
    if member not in state.members:
        raise InputError(f"lab {lab} has no member {member!r}; expected one of {sorted(state.members)}")
    return state.members[member]


def exec_in(lab: str, member: str, cmd: list[str]) -> int:
    """Run `cmd` in a member's namespace with the terminal attached; return its exit code. In a
    container member it runs in the container (`docker exec`), with the image's own tools."""
    ns = member_netns(lab, member)
    require_root("inspect/exec")
    try:
        state = load_state(lab)
        if state is not None and member in state.containers:
            from kpemu.docker.members import exec_argv

            return subprocess.run(exec_argv(ns, cmd, tty=os.isatty(0))).returncode
        return nsmod.run_in(ns, cmd, capture_output=False).returncode
    except FileNotFoundError:
        raise InputError(f"kpemu exec: command not found: {cmd[0]}") from None
    except subprocess.SubprocessError as e:
        raise KpemuError(str(e)) from None
