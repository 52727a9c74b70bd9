"""What every runtime does: the contract between the pipeline (and the CLI) and a place labs run in.

A runtime is where a lab's kernel half runs: `host` (this kernel, kpemu.runtimes.host) or `vm` (a
guest kernel, kpemu.runtimes.guest). Callers never ask which one they hold: they resolve a
topology for it, send it jobs, and deploy, destroy, exec and inspect labs through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kpemu.errors import KpemuError

if TYPE_CHECKING:
    from kpemu.jobs.schema import Job
    from kpemu.model.topology import Topology

Progress = Callable[[str], None]  # told what a runtime is doing now (the CLI shows it)


def quiet(_: str) -> None:
    """A Progress that says nothing."""


@dataclass(frozen=True)
class Work:
    """One collect job for a runtime: the scenario it is for (named in errors), the job, its output folder."""

    name: str
    job: Job
    out: Path


@dataclass(frozen=True)
class Gathered:
    """A job the runtime collected: its files are in the output folder (collected.json among them)."""

    how: str = ""  # how the runtime ran it, added to the run's reason ("warm guest"); "" on the host
    logs: str = ""  # where the runtime's own logs are, for an error that finds the files incomplete


@dataclass(frozen=True)
class Executed:
    """A command run in a lab member: its exit code, and its output when it was not on the terminal."""

    rc: int
    stdout: str = ""
    stderr: str = ""


class Runtime(Protocol):
    """A place labs run in (see the module docstring)."""

    name: str  # host | vm: what the reports and the CLI say
    batched: bool  # collects every job of a run in one go; one job's failure then is that job's alone
    streams: bool  # exec's output reaches the terminal as it comes (kpemu capture), not at the end
    keeps_labs: bool  # a run's lab can stay after it (kpemu run --keep)

    def refuses(self, topo: Topology) -> tuple[str, str] | None:
        """Why this runtime cannot run the lab (container members need the host's kernel), with the fix;
        None when it can."""
        ...

    def resolve(self, topo: Topology) -> Topology:
        """The topology with what depends on this runtime's kernel decided: randomFully from the
        iptables version, nfacct from what the kernel can create."""
        ...

    def kernel_release(self) -> str:
        """The release of the kernel this runtime runs labs on (kube-proxy's rules are generated for it)."""
        ...

    def collect(self, jobs: Sequence[Work], work_root: Path, progress: Progress = quiet,
                notice: Progress = quiet) -> list[Gathered | KpemuError]:
        """Run every collect job into its output folder (`work_root`: where the runtime may make a folder of
        its own files, named by the runtime); per
        job what was gathered, or the error that job met. `notice` is told what must stay on screen."""
        ...

    def could_not_run(self, what: str, reason: str, error: KpemuError) -> str:
        """How a failure of `what` (a mode's run) is said, with `reason` this runtime was chosen for."""
        ...

    def deploy(self, topo: Topology, source: str, reason: str, say: Progress, serve: bool = False) -> str:
        """Build a lab that stays up (checked against kube-proxy's text); one line saying so. `say` prints
        what the runtime tells on the way (`reason`: why this runtime was chosen); with `serve` its pods
        keep serving until it is destroyed."""
        ...

    def destroy(self, lab: str) -> str:
        """Remove a lab; a paragraph saying what was removed and what was left alone."""
        ...

    def exec(self, lab: str, member: str, argv: list[str]) -> Executed:
        """Run `argv` in a lab member."""
        ...

    def inspect(self, lab: str | None) -> dict[str, Any]:
        """The namespaces, interfaces, addresses and routes of one lab, or of every lab it has."""
        ...
