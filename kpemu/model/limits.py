"""How large a lab this machine can build: limits derived from its descriptors, memory and the kernel's
namespace limit, never fixed caps (pure, given a `Machine`; `Machine.here()` reads this one).

Every node, pod and external is a network namespace (plus the underlay router). What a lab costs:
- kernel memory: about `NETNS_BYTES` per namespace with its veth pair, addresses, routes and
  kube-proxy's rules (measured: a 48-node, 1,440-pod, 40-service lab);
- descriptors, while a run serves and captures: one socket per pod port, `CAPTURE_FDS` per capture
  point, `BASE_FDS` for the rest; building and removing a lab holds a bounded few at a time;
- one of the kernel's `user.max_net_namespaces`, shared with every other namespace on the machine.
A lab over any of them is refused before anything is created, naming the machine's numbers and
what to change. Descriptors are raised as far as needed when a lab is built (`kpemu.kernel.netns.
raise_nofile`), so the soft limit never counts, only the hard one (root may raise it to fs.nr_open).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from kpemu.sizing import BASE_FDS, CAPTURE_FDS, descriptors_needed

NETNS_BYTES = 400 * 1024  # kernel memory per lab namespace (measured 345 KB at 48 x 1,440; with margin)
MEMORY_SHARE = 0.5  # of MemAvailable a lab may take: the rest is the machine's and kpemu's own
NETNS_RESERVE = 64  # namespaces left to the rest of the machine


@dataclass(frozen=True)
class Machine:
    """The numbers that bound a lab here."""

    nofile_hard: int  # RLIMIT_NOFILE hard limit: how far this process may raise its soft limit
    nr_open: int  # fs.nr_open: how far a privileged process may raise the hard limit
    privileged: bool  # whether this process may raise the hard limit (root)
    mem_available: int  # bytes (/proc/meminfo MemAvailable)
    netns_max: int  # user.max_net_namespaces
    netns_named: int  # named network namespaces now (/run/netns)

    @classmethod
    def here(cls) -> Machine:
        """This machine's numbers (what cannot be read counts as unlimited: the kernel will say)."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            nofile_hard=hard if hard != resource.RLIM_INFINITY else 1 << 30,
            nr_open=_int_file("/proc/sys/fs/nr_open", 1 << 20),
            privileged=os.geteuid() == 0,
            mem_available=_meminfo_available(),
            netns_max=_int_file("/proc/sys/user/max_net_namespaces", 1 << 30),
            netns_named=len(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else 0,
        )

    @property
    def descriptors(self) -> int:
        """The most descriptors a kpemu process here can open."""
        return max(self.nofile_hard, self.nr_open) if self.privileged else self.nofile_hard


def _int_file(path: str, default: int) -> int:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _meminfo_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 50


__all__ = ["Machine", "Need", "descriptors_needed", "limit_problems"]


@dataclass(frozen=True)
class Need:
    """What a lab needs: its namespaces and the descriptors a run of it holds at once."""

    namespaces: int
    descriptors: int


def _size(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n // 1024} KB"


def limit_problems(need: Need, machine: Machine) -> list[str]:
    """Why this machine cannot build a lab of `need`: one sentence per resource it exceeds (limit, the
    machine's numbers, the fix); empty when it can."""
    out = []
    budget = int(machine.mem_available * MEMORY_SHARE)
    by_memory = budget // NETNS_BYTES
    if need.namespaces > by_memory:
        out.append(f"{need.namespaces:,} network namespaces need about {_size(need.namespaces * NETNS_BYTES)} of "
                   f"kernel memory, more than this machine can give a lab (at most {by_memory:,} namespaces: "
                   f"{_size(NETNS_BYTES)} each is an estimate; half of the "
                   f"{_size(machine.mem_available)} MemAvailable); free memory or split the lab into smaller ones")
    by_kernel = machine.netns_max - machine.netns_named - NETNS_RESERVE
    if need.namespaces > by_kernel:
        out.append(f"{need.namespaces:,} network namespaces are more than the kernel allows now (at most "
                   f"{max(by_kernel, 0):,}: user.max_net_namespaces is {machine.netns_max:,}, {machine.netns_named:,} "
                   f"named ones exist and {NETNS_RESERVE} are left to the machine); raise it (sysctl -w "
                   f"user.max_net_namespaces=N), remove unused namespaces, or split the lab")
    if need.descriptors > machine.descriptors:
        how = ("fs.nr_open" if machine.privileged else "the hard RLIMIT_NOFILE")
        fix = ("raise fs.nr_open (sysctl -w fs.nr_open=N)" if machine.privileged else
               "raise the hard limit (ulimit -Hn, or limits.conf) or run as root")
        out.append(f"a run of this lab holds about {need.descriptors:,} open descriptors at once (one socket per "
                   f"pod port, {CAPTURE_FDS} per capture point, {BASE_FDS} for kpemu), more than this process may "
                   f"open (at most {machine.descriptors:,}: {how}); {fix}, or split the lab")
    return out
