"""Lab lifecycle: deploy, destroy, inspect, exec; a state file records what each lab created.

State files live in /run/kpemu/labs/<lab>.json (tmpfs, like /run/netns, so both vanish together at
reboot). The state file is written before the first namespace is created, so a deploy killed at
any point can be cleaned up by `destroy NAME` or `destroy --all`, which also sweeps every
namespace whose name starts with the kpemu prefix.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

from kpemu.errors import ApplyError, EnvironmentProblem, InputError, KpemuError
from kpemu.kernel import netns as nsmod
from kpemu.kernel.inspect import describe_netns
from kpemu.kernel.labstate import PREFIX, STATE_DIR, LabState, load_state, state_path

if TYPE_CHECKING:  # the guest's agent imports this module: no model (pydantic) at import time
    from kpemu.model.topology import Topology
    from kpemu.plan.types import Plan


def require_root() -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem("building a lab needs root (network namespaces)", "run as root, e.g. sudo kpemu ...")


def deploy(topo: Topology, source: str = "", plan: Plan | None = None) -> LabState:
    """Build the lab (kpemu.jobs.execute: fabric, kube-proxy's rules per node, CNI rules) and check what
    the kernel reads back against kube-proxy's text; rolls back on any failure."""
    from kpemu.capture.snapshot import rules_text
    from kpemu.jobs.build import deploy_job, release_tuple
    from kpemu.jobs.execute import deploy as execute
    from kpemu.jobs.verify import readback_problems
    from kpemu.kernel.netfilter import resolve_random_fully
    from kpemu.kernel.nfacct import supported_here, with_nfacct
    from kpemu.plan.fabric import plan_fabric

    require_root()
    topo = with_nfacct(resolve_random_fully(topo), supported_here)
    job = deploy_job(topo, plan or plan_fabric(topo), release_tuple(os.uname().release), source)
    state = execute(job)
    try:
        problems = readback_problems(job["readback"], lambda node, kind: rules_text(
            job["nodes"][node], kind, job["backend"]))
        if problems:
            raise ApplyError("\n".join(problems))
    except BaseException:
        destroy(topo.name)
        raise
    return state


def destroy(lab: str) -> list[str]:
    """Remove exactly what the lab's state file records (idempotent). Returns removed namespaces."""
    require_root()
    state = load_state(lab)
    names = state.namespaces if state else nsmod.list_netns(f"{PREFIX}{lab}-")
    removed = [ns for ns in names if nsmod.delete_netns(ns)]
    state_path(lab).unlink(missing_ok=True)
    return removed


def destroy_all() -> list[str]:
    """Remove every recorded lab and every leftover kpemu namespace found by prefix."""
    require_root()
    removed: list[str] = []
    for f in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []:
        removed += destroy(f.stem)
    for ns in nsmod.list_netns(PREFIX):
        if nsmod.delete_netns(ns):
            removed.append(ns)
    return removed


def labs() -> list[str]:
    """Names of recorded labs."""
    return sorted(f.stem for f in STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []


def inspect(lab: str | None = None) -> dict[str, Any]:
    """Namespaces, interfaces with addresses, and routes of one lab or of all of them."""
    names = [lab] if lab else labs()
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
    """Run `cmd` in a member's namespace with the terminal attached; return its exit code."""
    ns = member_netns(lab, member)
    try:
        return nsmod.run_in(ns, cmd, capture_output=False).returncode
    except FileNotFoundError:
        raise InputError(f"kpemu exec: command not found: {cmd[0]}") from None
    except subprocess.SubprocessError as e:
        raise KpemuError(str(e)) from None
