"""Whether a guest has hung, judged on evidence that it stopped, not on this host's clock alone.

A guest shows it lives by its agent's heartbeat (touched every second), its progress logs, and
console lines of its own; any change in any of them is a sign of life. The kernel's own console
messages (`[ 132.829600] rcu: INFO: rcu_preempt self-detected stall on CPU` and the stack dumps
after it) are not: a wedged guest kernel prints them for as long as it is wedged. Silence alone proves nothing: when
this whole host stalls (a paused or descheduled VM, a laptop's suspend) the poll that looks at the
guest does not run either, and when the guest is starved of CPU it cannot beat. So a silent
interval counts toward the limit only

- up to `POLL_CREDIT` seconds per poll: a longer gap between two polls is time in which this
  host did not run kpemu, and says nothing of the guest;
- when QEMU had its chance: its threads are stopped (SIGSTOP: frozen), or they ran, or they
  neither ran nor waited for a CPU (a guest idle in a wedged kernel). An interval in which QEMU's
  threads waited on the run queue longer than they ran (`/proc/PID/task/*/schedstat`) is
  starvation: it counts only toward a hard ceiling.

`judge` is pure: it takes `Sample`s; `Watch` takes them from the files and /proc.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.jobs import exchange
from kpemu.pace import scaled

HEARTBEAT_LIMIT = 30.0  # seconds (scaled; KPEMU_HEARTBEAT_LIMIT) of silence the guest could have broken
CEILING_FACTOR = 10.0  # silence with starvation counts up to this many limits (KPEMU_HEARTBEAT_CEILING, seconds)
POLL_CREDIT = 1.0  # seconds one poll counts at most (polls come ten times a second)
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Qemu:
    """QEMU's threads as /proc shows them: whether all are stopped, and their CPU and run-queue time."""

    stopped: bool
    ran_ns: int
    waited_ns: int


@dataclass(frozen=True)
class Sample:
    """One look at the guest: when (this host's monotonic clock), its signs of life, its QEMU."""

    at: float
    signs: tuple[int, ...] | None  # None until the agent first beats (booting has its own limit)
    qemu: Qemu | None  # None when its QEMU cannot be read


@dataclass
class Tally:
    """What the samples so far add up to."""

    silent: float = 0.0  # seconds of silence in which the guest could have run
    starved: float = 0.0  # seconds of silence in which it waited for a CPU
    last: Sample | None = None
    stopped: bool = False  # the last silent interval found QEMU stopped


def judge(tally: Tally, now: Sample, limit: float, ceiling: float) -> str | None:
    """Add `now` to `tally`; why the guest counts as hung, or None (pure)."""
    last, tally.last = tally.last, now
    if last is None or now.signs is None or now.signs != last.signs:
        tally.silent = tally.starved = 0.0
        return None
    step = min(max(now.at - last.at, 0.0), POLL_CREDIT)
    tally.stopped = now.qemu is not None and now.qemu.stopped
    if now.qemu is None or last.qemu is None or now.qemu.stopped:
        tally.silent += step
    else:
        ran = now.qemu.ran_ns - last.qemu.ran_ns
        waited = now.qemu.waited_ns - last.qemu.waited_ns
        if waited > ran:
            tally.starved += step
        else:
            tally.silent += step
    if tally.silent > limit:
        how = "; its QEMU is stopped" if tally.stopped else ""
        return f"its agent gave no sign of life for {tally.silent:.0f}s in which it could run{how}"
    if tally.silent + tally.starved > ceiling:
        return (f"its agent gave no sign of life for {tally.silent + tally.starved:.0f}s, "
                f"{tally.starved:.0f}s of them waiting for a CPU")
    return None


def limits() -> tuple[float, float]:
    """The limit and the ceiling, in seconds (scaled, as every readiness wait)."""
    limit = scaled(float(os.environ.get("KPEMU_HEARTBEAT_LIMIT") or HEARTBEAT_LIMIT))
    ceiling = os.environ.get("KPEMU_HEARTBEAT_CEILING")
    return limit, max(limit, float(ceiling)) if ceiling else limit * CEILING_FACTOR


def read_qemu(pid: int) -> Qemu | None:
    """QEMU's threads from /proc (None when it is gone): all stopped, CPU time, run-queue time."""
    states, ran, waited = [], 0, 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        base = f"/proc/{pid}/task/{tid}"
        try:
            stat = Path(f"{base}/stat").read_text().rpartition(")")[2].split()
            sched = Path(f"{base}/schedstat").read_text().split()
        except OSError:
            try:  # no schedstat (a kernel without CONFIG_SCHED_INFO): CPU time from stat, no wait time
                sched = [str((int(stat[11]) + int(stat[12])) * 1_000_000_000 // _TICKS), "0"]
            except (IndexError, ValueError, UnboundLocalError):
                continue
        states.append(stat[0])
        ran += int(sched[0])
        waited += int(sched[1])
    if not states:
        return None
    return Qemu(all(s in "tT" for s in states), ran, waited)


def qemu_sharing(root: Path) -> int | None:
    """The pid of the QEMU whose guest shares directory `root` (9p), or None."""
    needle = str(root.resolve()).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].rsplit(b"/", 1)[-1].startswith(b"qemu-system") and any(needle in a for a in argv[1:]):
            return int(entry)
    return None


# a line the kernel printed: `[    0.512875] ...`, `[  788.529543]  </TASK>`
_KERNEL_LINE = re.compile(rb"^\[ *\d+\.\d+\]")
CONSOLE_READ = 1 << 20  # bytes of new console text read at most per poll


@dataclass
class ConsoleLife:
    """The console lines a guest printed that are not the kernel's own messages, counted as they come."""

    pos: int = 0
    count: int = 0
    partial: bytes = b""

    def lines(self, path: Path) -> int:
        """The count so far, after reading what `path` gained since the last call (-1: unreadable)."""
        try:
            with path.open("rb") as f:
                f.seek(self.pos)
                new = f.read(CONSOLE_READ)
        except OSError:
            return -1
        self.pos += len(new)
        *done, self.partial = (self.partial + new).split(b"\n")
        self.count += sum(1 for ln in done if ln.strip() and not _KERNEL_LINE.match(ln))
        return self.count


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


@dataclass
class Watch:
    """Whether the guest sharing `root` has hung: call it at every poll (see the module's docstring)."""

    root: Path
    tally: Tally = field(default_factory=Tally)
    pid: int | None = None
    console: ConsoleLife = field(default_factory=ConsoleLife)

    def sample(self) -> Sample:
        """The guest's signs of life and its QEMU, now."""
        try:
            beat = (self.root / exchange.HEARTBEAT).stat().st_mtime_ns
        except OSError:
            beat = None
        signs = None
        if beat is not None:
            logs = sorted((self.root / exchange.WORK).glob("*/log"))
            signs = (beat, self.console.lines(self.root / "guest-console.log"), _size(self.root / "guest-output.log"),
                     *(_size(p) for p in logs))
        qemu = read_qemu(self.pid) if self.pid is not None else None
        if qemu is None:
            self.pid = qemu_sharing(self.root)
            qemu = read_qemu(self.pid) if self.pid is not None else None
        return Sample(time.monotonic(), signs, qemu)

    def __call__(self) -> str | None:
        """Why the guest counts as hung, or None."""
        return judge(self.tally, self.sample(), *limits())
