"""The host runtime: labs on the kernel this process runs on (which may be kpemu's guest kernel, when
kpemu itself was started in the guest).

A run's job goes to the executor in this process (kpemu.jobs.execute); labs that stay up are built
by the same executor and removed, inspected and entered through kpemu.kernel.lab.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpemu.docker.engine import blocker
from kpemu.errors import ApplyError, KpemuError
from kpemu.kernel import lab as kernel_lab
from kpemu.kernel.netfilter import resolve_random_fully
from kpemu.kernel.nfacct import supported_here, with_nfacct
from kpemu.runtimes.base import Executed, Gathered, Progress, Work, quiet

if TYPE_CHECKING:
    from kpemu.kernel.labstate import LabState
    from kpemu.model.topology import Topology
    from kpemu.plan.types import Plan


def _warm_scapy() -> threading.Thread:
    """Import scapy in the background while the lab runs (it takes about a second; the analysis needs it)."""

    def imp() -> None:
        with contextlib.suppress(Exception):
            import scapy.layers.inet
            import scapy.layers.vxlan  # noqa: F401

    t = threading.Thread(target=imp, daemon=True)
    t.start()
    return t


@dataclass(frozen=True)
class HostRuntime:
    """The host runtime (kpemu.runtimes.base.Runtime). `inside_guest`: this kernel is kpemu's guest."""

    inside_guest: bool = False
    name: str = "host"
    batched: bool = False
    streams: bool = True
    keeps_labs: bool = True

    def refuses(self, topo: Topology) -> tuple[str, str] | None:
        """Container members need a docker engine here, and not kpemu's guest (kpemu.docker.engine.blocker)."""
        return blocker(bool(topo.containers()), guest_kernel=self.inside_guest)

    def resolve(self, topo: Topology) -> Topology:
        """randomFully from this iptables' version, nfacct from what this kernel can create."""
        return with_nfacct(resolve_random_fully(topo), supported_here)

    def kernel_release(self) -> str:
        """This kernel's release."""
        return os.uname().release

    def collect(self, jobs: Sequence[Work], work_root: Path, progress: Progress = quiet,
                notice: Progress = quiet) -> list[Gathered | KpemuError]:
        """Each job on this kernel, one after the other (kpemu.jobs.execute.collect: deploy, serve, capture,
        send, snapshot, destroy, always); the first failure is raised."""
        from kpemu.jobs.execute import collect

        kernel_lab.require_root()
        out: list[Gathered | KpemuError] = []
        for w in jobs:
            warm = _warm_scapy()
            collect(replace(w.job, in_guest=self.inside_guest), w.out, progress)
            warm.join(timeout=10)
            out.append(Gathered())
        return out

    def could_not_run(self, what: str, reason: str, error: KpemuError) -> str:
        """`<what> could not run on this kernel: <error>`."""
        return f"{what} could not run on this kernel: {error}"

    def deploy(self, topo: Topology, source: str, reason: str, say: Progress, serve: bool = False) -> str:
        """Build the lab on this kernel (`deploy_lab`)."""
        state = deploy_lab(topo, source, serve=serve)
        served = "; its pods serve until kpemu destroy" if serve else ""
        return f"lab {state.lab} deployed: {len(state.namespaces)} namespaces in {state.deploy_seconds:.2f}s{served}"

    def destroy(self, lab: str) -> str:
        """Remove the lab from this kernel (kpemu.kernel.lab.destroy)."""
        return kernel_lab.destroy(lab).summary()

    def exec(self, lab: str, member: str, argv: list[str]) -> Executed:
        """Run `argv` in the member with the terminal attached (its output goes there)."""
        return Executed(kernel_lab.exec_in(lab, member, argv))

    def inspect(self, lab: str | None) -> dict[str, Any]:
        """This kernel's labs (kpemu.kernel.lab.inspect)."""
        return kernel_lab.inspect(lab)


def deploy_lab(topo: Topology, source: str = "", fabric: Plan | None = None, serve: bool = False) -> LabState:
    """Build the lab on this kernel (kpemu.jobs.execute: fabric, kube-proxy's rules per node, CNI rules)
    from its lab plan (with `fabric` in place of its CNI's, to test a broken one) and check what the kernel
    reads back against kube-proxy's text; rolls back on any failure."""
    from kpemu.jobs.build import deploy_job, release_tuple
    from kpemu.jobs.execute import deploy
    from kpemu.jobs.verify import readback_problems
    from kpemu.kernel.snapshot import rules_text
    from kpemu.labplan import lab_plan

    kernel_lab.require_root()
    topo = HostRuntime().resolve(topo)
    lp = lab_plan(topo, release_tuple(os.uname().release))
    job = deploy_job(lp if fabric is None else replace(lp, fabric=fabric), source, serve)
    state = deploy(job)
    try:
        problems = readback_problems(job.readback, lambda node, kind: rules_text(
            job.nodes[node], kind, job.backend))
        if problems:
            raise ApplyError("\n".join(problems))
    except BaseException:
        kernel_lab.destroy(topo.name)
        raise
    return state
