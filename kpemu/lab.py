"""Lab lifecycle: deploy, destroy, inspect, exec; a state file records what each lab created.

State files live in /run/kpemu/labs/<lab>.json (tmpfs, like /run/netns, so both vanish together at
reboot). The state file is written before the first namespace is created, so a deploy killed at
any point can be cleaned up by `destroy NAME` or `destroy --all`, which also sweeps every
namespace whose name starts with the kpemu prefix.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kpemu.errors import EnvironmentProblem, InputError, KpemuError
from kpemu.kernel import netns as nsmod
from kpemu.kernel.fabric import apply_fabric
from kpemu.kernel.inspect import describe_netns
from kpemu.kernel.rules import apply_rules
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.types import Namespace, Plan

PREFIX = "kp-"
STATE_DIR = Path(os.environ.get("KPEMU_STATE_DIR", "/run/kpemu/labs"))


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


def state_path(lab: str) -> Path:
    return STATE_DIR / f"{lab}.json"


def load_state(lab: str) -> LabState | None:
    """The recorded state of `lab`, or None when there is no state file."""
    try:
        return LabState(**json.loads(state_path(lab).read_text()))
    except FileNotFoundError:
        return None


def require_root() -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem("building a lab needs root (network namespaces)", "run as root, e.g. sudo kpemu ...")


def deploy(topo: Topology, source: str = "", plan: Plan | None = None) -> LabState:
    """Build the lab: namespaces, CNI wiring, CNI and kube-proxy rules. Rolls back on failure."""
    require_root()
    plan = plan or plan_fabric(topo)
    existing = set(nsmod.list_netns(PREFIX))
    clashes = [ns.name for ns in plan.namespaces if ns.name in existing]
    if clashes or load_state(topo.name):
        raise EnvironmentProblem(
            f"lab {topo.name!r} already exists ({', '.join(clashes) or 'state file present'})",
            f"kpemu destroy {topo.name}",
        )
    state = LabState(
        lab=topo.name,
        source=source,
        namespaces=[ns.name for ns in plan.namespaces],
        members={ns.member: ns.name for ns in plan.namespaces},
        kinds={ns.member: ns.kind for ns in plan.namespaces},
        containers=sorted(topo.containers()),
        created_at=time.time(),
    )
    state.save()
    started = time.perf_counter()
    created: list[str] = []
    try:
        apply_fabric(plan, created, _netns_maker(topo))
        apply_rules(topo, plan)
    except BaseException:
        if state.containers:
            with contextlib.suppress(KpemuError):  # the deploy's own error is the one to report
                _remove_containers(topo.name)
        for ns in reversed(created):
            nsmod.delete_netns(ns)
        state_path(topo.name).unlink(missing_ok=True)
        raise
    state.deploy_seconds = time.perf_counter() - started
    state.complete = True
    state.save()
    return state


def _netns_maker(topo: Topology) -> Callable[[Namespace], None] | None:
    """How deploy creates a namespace: None (empty named namespaces) unless some member has an
    image; then those members' namespaces are their containers' (kpemu.docker.members)."""
    containers = topo.containers()
    if not containers:
        return None
    from kpemu.docker.engine import connect
    from kpemu.docker.members import ContainerStarter

    client = connect(start=True)
    assert client is not None
    starter = ContainerStarter(client, topo.name, containers)

    def make(ns: Namespace) -> None:
        if ns.member in containers:
            starter.bind(ns.member, ns.name)
        else:
            nsmod.create_netns(ns.name)

    return make


def _remove_containers(lab: str | None) -> list[str]:
    """Container members: remove the lab's containers (every kpemu container when `lab` is None),
    found by their kpemu.lab label, before their namespaces are deleted. A lab recorded without
    containers needs no docker engine."""
    state = load_state(lab) if lab else None
    if state is not None and not state.containers:
        return []
    from kpemu.docker.members import remove_containers

    return remove_containers(lab)


def destroy(lab: str) -> list[str]:
    """Remove exactly what the lab's state file records (idempotent). Returns removed namespaces."""
    require_root()
    _remove_containers(lab)  # step 1 (container members): by label, so it needs no state file
    state = load_state(lab)
    names = state.namespaces if state else nsmod.list_netns(netns_name(lab, ""))
    removed = [ns for ns in names if nsmod.delete_netns(ns)]
    state_path(lab).unlink(missing_ok=True)
    return removed


def destroy_all() -> list[str]:
    """Remove every recorded lab and every leftover kpemu namespace found by prefix."""
    require_root()
    _remove_containers(None)  # step 1 (container members): every container labelled kpemu.lab
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
    """Run `cmd` in a member's namespace with the terminal attached; return its exit code. In a
    container member it runs in the container (`docker exec`), with the image's own tools."""
    ns = member_netns(lab, member)
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
