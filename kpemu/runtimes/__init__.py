"""Where labs run: the one place that chooses a runtime, `host` (this kernel) or `vm` (a guest kernel).

`choose()` turns `--runtime auto|host|vm` (or $KPEMU_RUNTIME) plus what each lab needs of a kernel
into a runtime and a one-line reason the CLI prints; `for_lab()` finds the runtime that holds a lab
already built. This package alone reads $KPEMU_RUNTIME and $KPEMU_IN_GUEST (`in_guest()`); what
depends on them below it (the executor, faults, the drop tracer, docker members) is told as data.

Adding a runtime: a module with a class that does what kpemu.runtimes.base.Runtime says, and a branch
in `choose()`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kpemu.errors import EnvironmentProblem, InputError, KpemuError
from kpemu.kernel import runowner
from kpemu.runtimes.base import Runtime

# The runtimes and the probe are imported where they are used: every command imports this package
# (`adopt_owner`), and shell completion must start fast.
if TYPE_CHECKING:
    from kpemu.kernel.probe import Capabilities
    from kpemu.model.scenario import Scenario
    from kpemu.model.topology import Topology
    from kpemu.runtimes.kernels import SetupResult

RUNTIMES = ("auto", "host", "vm")
T = TypeVar("T")


@dataclass(frozen=True)
class Needs:
    """What one lab needs of a kernel: its CNI and kube-proxy mode, and probe features beyond theirs."""

    cni: str
    mode: str
    extra: tuple[str, ...] = ()  # a scenario's faults' (kpemu.faults: each kind's features)
    sctp_flows: tuple[str, ...] = ()  # the scenario's SCTP flows ("flows[i] NAME"): they need feature sctp


def in_guest() -> bool:
    """True inside a kpemu guest (its script sets KPEMU_IN_GUEST=1, kpemu.runtimes.qemu)."""
    return os.environ.get("KPEMU_IN_GUEST") == "1"


def adopt_owner() -> None:
    """Make every process this command starts carry its owner token, so a kill leaves none unfound
    (kpemu.kernel.runowner)."""
    runowner.adopt()


def probe_here(kvm: bool = False) -> Capabilities:
    """This kernel's and machine's capabilities (kpemu.kernel.probe), with the runtimes' facts: whether
    this is kpemu's guest, the guest's tools found beside this Python too, and (`kvm`) a KVM trial."""
    from kpemu.kernel.probe import probe
    from kpemu.runtimes.qemu import find_tool, kvm_usable

    return probe(in_guest(), find_tool, kvm_usable if kvm else None)


def needs_of(sc: Scenario) -> Needs:
    """What a scenario's lab needs: its topology's CNI and mode, and its faults' features."""
    from kpemu.faults import FAULTS

    extra = tuple(f for fault in sc.spec.faults for f in FAULTS[fault.kind].features)
    sctp = tuple(f"{sc.path}: flows[{i}] {f.flow.name}" for i, f in enumerate(sc.flows) if f.protocol == "SCTP")
    return Needs(sc.topology.cni, sc.topology.kubeProxy.mode, extra, sctp)


def _requested(requested: str | None) -> str:
    req = requested or os.environ.get("KPEMU_RUNTIME") or "auto"
    if req not in RUNTIMES:
        raise InputError(f"--runtime {req}: expected one of {', '.join(RUNTIMES)}")
    return req


def _decide(caps: Capabilities, needs: Needs, refuse: bool) -> tuple[Runtime, str]:
    """This kernel when `caps` has everything `needs` lists, else the guest (`refuse`: raise instead)."""
    from kpemu.kernel.probe import can_run
    from kpemu.runtimes.guest import GuestRuntime
    from kpemu.runtimes.host import HostRuntime

    lacking: dict[str, list[str]] = {}
    ok, missing = can_run(caps, needs.cni, needs.mode)
    if not ok:
        lacking[f"{needs.cni}/{needs.mode}"] = missing
    if caps.missing(list(needs.extra)):
        lacking["a fault"] = caps.missing(list(needs.extra))
    if needs.sctp_flows and not caps.has("sctp"):
        lacking[f"SCTP flow {', '.join(needs.sctp_flows)} (sent as SCTP, never as TCP)"] = ["sctp"]
    if not lacking:
        return HostRuntime(), f"this kernel ({caps.kernel}) has everything {needs.cni}/{needs.mode} needs"
    why = "; ".join(f"{k} needs {', '.join(v)}" for k, v in lacking.items())
    if refuse:
        raise EnvironmentProblem(f"this kernel ({caps.kernel}) cannot run it: {why}",
                                 "use --runtime vm (or auto), or load the modules (modprobe)")
    return GuestRuntime(), f"this kernel ({caps.kernel}) lacks what is needed: {why}"


def choose(requested: str | None, labs: Sequence[Needs], caps: Capabilities | None = None,
           host_as_asked: bool = True) -> list[tuple[Runtime, str]]:
    """The runtime for each lab and why: (runtime, reason) per lab, in order.

    `requested` None means $KPEMU_RUNTIME, else auto. Inside the guest it is always this kernel. `auto`
    probes this kernel once (unless given `caps`) and picks it for each lab it can run, else the
    guest. `host` is taken as asked when `host_as_asked` (a run then fails on what is missing);
    otherwise a kernel that cannot run a lab raises EnvironmentProblem (exit 3) naming what is missing.
    """
    from kpemu.runtimes.guest import GuestRuntime
    from kpemu.runtimes.host import HostRuntime

    req = _requested(requested)
    if in_guest():
        return [(HostRuntime(inside_guest=True), "already inside the guest kernel")] * len(labs)
    if req == "vm":
        return [(GuestRuntime(), "--runtime vm asked for the guest kernel")] * len(labs)
    if req == "host" and host_as_asked:
        return [(HostRuntime(), "--runtime host: this kernel, as asked")] * len(labs)
    caps = caps if caps is not None else probe_here()
    return [_decide(caps, needs, refuse=req == "host") for needs in labs]


def for_deploy(requested: str | None, topo: Topology) -> tuple[Runtime, str]:
    """The runtime to build `topo`'s lab in, and why (as `choose`, `host` checked against this kernel).
    Refuses (exit 3, one line) without root before anything is probed, and a lab its runtime cannot run."""
    from kpemu.kernel.lab import require_root

    require_root()
    runtime, reason = choose(requested, [Needs(topo.cni, topo.kubeProxy.mode)], host_as_asked=False)[0]
    if why := runtime.refuses(topo):
        raise EnvironmentProblem(f"lab {topo.name}: {why[0]}", why[1])
    return runtime, reason


def batches(placed: Sequence[tuple[Runtime, str, T]]) -> list[tuple[Runtime, str, list[T]]]:
    """The items sent to each runtime together: every item of a batched runtime in one batch (with the
    first one's reason), then the others one by one, in order."""
    out: list[tuple[Runtime, str, list[T]]] = []
    for runtime, reason, _ in placed:
        if runtime.batched and all(runtime != r for r, _, _ in out):
            out.append((runtime, reason, [item for r, _, item in placed if r == runtime]))
    out += [(runtime, reason, [item]) for runtime, reason, item in placed if not runtime.batched]
    return out


def for_lab(lab: str) -> Runtime:
    """The runtime that holds lab `lab`: this kernel when it has a record of it, else the warm guest
    when one is up, else this kernel (which says what it knows of the lab)."""
    from kpemu.kernel.labstate import load_state
    from kpemu.runtimes.guest import GuestRuntime, warm_status
    from kpemu.runtimes.host import HostRuntime

    if load_state(lab) is None and warm_status() is not None:
        return GuestRuntime()
    return HostRuntime(inside_guest=in_guest())


def recorded_labs() -> dict[str, list[str]]:
    """The labs this kernel has records of, each with its members (cheap: no namespace is entered, as
    shell completion needs)."""
    from kpemu.kernel.lab import labs
    from kpemu.kernel.labstate import load_state

    return {lab: list(state.members) if (state := load_state(lab)) else [] for lab in labs()}


def inspect(lab: str | None) -> dict[str, Any]:
    """The labs of every runtime (`lab`: that one only): the warm guest's (marked runtime vm) and this
    kernel's, with this kernel's namespaces that no lab records."""
    from kpemu.runtimes.guest import GuestRuntime
    from kpemu.runtimes.host import HostRuntime

    guest_labs = GuestRuntime().inspect(None)["labs"]
    if lab and lab in {e["lab"] for e in guest_labs}:
        return {"labs": [e for e in guest_labs if e["lab"] == lab], "orphans": []}
    try:
        data = HostRuntime(inside_guest=in_guest()).inspect(lab)
    except KpemuError:
        if lab or not guest_labs:
            raise
        data = {"labs": [], "orphans": []}
    if not lab:
        data["labs"] += guest_labs
    return data


def destroy_all() -> list[str]:
    """Remove every lab of this kernel and stop every guest no live kpemu process uses; what was done,
    line by line."""
    from kpemu.kernel.lab import destroy_all as destroy_here
    from kpemu.runtimes.guest import stop_all

    lines = [destroy_here().summary()]
    stopped, left = stop_all()
    if stopped:
        lines.append(f"stopped the guest (pids {' '.join(map(str, stopped))})")
    lines += [f"left alone, in use: {why}" for why in left]
    return lines


def setup_guest_kernel(if_needed: bool = False) -> SetupResult:
    """Provide a guest kernel (kpemu.runtimes.kernels.setup). With `if_needed`, do nothing when this
    kernel already has everything (outside the guest, probed as root)."""
    from kpemu.kernel.probe import GUEST_FEATURES
    from kpemu.runtimes.kernels import SetupResult, find_kernel, setup

    t0 = time.monotonic()
    if if_needed and not in_guest():
        caps = probe_here()
        if caps.root and not caps.missing(GUEST_FEATURES):
            return SetupResult("not-needed", find_kernel(), f"this kernel has {', '.join(GUEST_FEATURES)}",
                               seconds=time.monotonic() - t0)
    return setup()


def guest_status() -> dict[str, Any]:
    """Which kernel the vm runtime would boot, the cache, QEMU, vng, KVM, whether this is the guest, and
    the warm guest (for `kpemu vm status`)."""
    from kpemu.runtimes.guest import warm_status
    from kpemu.runtimes.kernels import find_kernel, status
    from kpemu.runtimes.qemu import tools_status

    return {**status(), **tools_status(find_kernel()), "in_guest": in_guest(), "warm": warm_status()}
