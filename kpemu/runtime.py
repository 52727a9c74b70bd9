"""Where a plan is applied: `host` (this kernel) or `vm` (a guest kernel, see kpemu.vm).

`choose_runtime()` turns `--runtime auto|host|vm` (or $KPEMU_RUNTIME) plus what the topologies
need into a decision and a one-line reason the CLI prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from kpemu.errors import EnvironmentProblem, InputError
from kpemu.kernel.probe import Capabilities, can_run, probe

RUNTIMES = ("auto", "host", "vm")


def choose_runtime(requested: str | None, needs: Iterable[tuple[str, str]],
                   caps: Capabilities | None = None, extra: Sequence[str] = ()) -> tuple[str, str]:
    """Pick `host` or `vm` for labs needing the given (cni, proxy mode) pairs and `extra` probe features
    (a scenario's faults'); (runtime, reason).

    `requested` None means $KPEMU_RUNTIME, else auto. Inside the guest it is always host. `host`
    on a kernel that cannot do it raises EnvironmentProblem (exit 3) naming what is missing.
    """
    req = requested or os.environ.get("KPEMU_RUNTIME") or "auto"
    if req not in RUNTIMES:
        raise InputError(f"--runtime {req}: expected one of {', '.join(RUNTIMES)}")
    if os.environ.get("KPEMU_IN_GUEST") == "1":
        return "host", "already inside the guest kernel"
    if req == "vm":
        return "vm", "--runtime vm asked for the guest kernel"
    pairs = sorted(set(needs))
    caps = caps if caps is not None else probe(kvm=False, in_guest=False)  # not in the guest: answered above
    lacking: dict[str, list[str]] = {}
    for cni, mode in pairs:
        ok, missing = can_run(caps, cni, mode)
        if not ok:
            lacking[f"{cni}/{mode}"] = missing
    if caps.missing(list(extra)):
        lacking["a fault"] = caps.missing(list(extra))
    if not lacking:
        what = ", ".join(f"{c}/{m}" for c, m in pairs) or "this"
        return "host", f"this kernel ({caps.kernel}) has everything {what} needs"
    why = "; ".join(f"{k} needs {', '.join(v)}" for k, v in lacking.items())
    if req == "host":
        raise EnvironmentProblem(f"this kernel ({caps.kernel}) cannot run it: {why}",
                                 "use --runtime vm (or auto), or load the modules (modprobe)")
    return "vm", f"this kernel ({caps.kernel}) lacks what is needed: {why}"


def needs_of(topologies: Iterable[object]) -> list[tuple[str, str]]:
    """The (cni, kube-proxy mode) pairs of model Topology objects, for `choose_runtime`."""
    return sorted({(t.cni, t.kubeProxy.mode) for t in topologies})  # type: ignore[attr-defined]
