"""The kernel's own drop reasons for a run's packets (effects): bpftrace on `skb:kfree_skb`.

One tracer covers a run, started before the lab is deployed, and keeps only the lab's namespaces;
each drop is printed with its tuple (and the inner tuple of VXLAN) so that kpemu.analyse.drops joins
it to a connection. Without bpftrace, BTF, or in an emulated guest (or KPEMU_DROP_TRACE=tracefs) a
private tracefs instance gives the reason and time only, joined by time window. How tracefs stays
private and nothing is left behind: docs/provenance.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.kernel.btf import BtfError, drop_offsets
from kpemu.pace import scaled

READY = "KPEMU-DROPS-READY"
# bpftrace prints a tick ten times a second; a tick stamped after the traffic ended says it has read
# every drop until then (a starved bpftrace would otherwise be stopped with events still unread)
TICK = "KPEMU-DROPS-TICK"
DRAIN_TIMEOUT = 5.0
INSTANCE_PREFIX = "kpemu-"  # tracefs instances of the time-window reader: kpemu-<its pid>
PR_SET_PDEATHSIG = 1
ATTACH_TIMEOUT = 15.0
FORMAT = "/sys/kernel/tracing/events/skb/kfree_skb/format"
VXLAN_PORTS = (8472, 4789)

# tracefs, mounted in the private mount namespace unless it is there already (as in kpemu's guest).
MOUNT_TRACEFS = ("[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null "
                 "|| { echo KPEMU-DROPS-NO-TRACEFS; exit 3; }")
# Runs in the private mount namespace: mount tracefs there, print the reason table, exec bpftrace.
BPFTRACE_WRAPPER = f"""set -e
{MOUNT_TRACEFS}
sed -n 's/.*__print_symbolic(REC->reason, //p' {FORMAT} | tr '}}' '\\n' \\
  | sed -n 's/^[ ,]*{{ *\\([0-9]*\\), *"\\([A-Za-z0-9_]*\\)".*/REASON \\1 \\2/p'
exec bpftrace -B line -e "$KPEMU_DROPS_PROG"
"""


# The same, from tracefs alone: a private instance with kfree_skb on (IPv4), read until SIGTERM (or SIGINT),
# then the reader stopped, the event disabled and the instance removed. A dead reader's instance goes too.
TRACEFS_WRAPPER = f"""set -e
{MOUNT_TRACEFS}
I=/sys/kernel/tracing/instances
for d in $I/{INSTANCE_PREFIX}*; do
  [ -d "$d" ] && ! kill -0 "${{d##*-}}" 2>/dev/null && rmdir "$d" 2>/dev/null || true
done
T=$I/{INSTANCE_PREFIX}$$
mkdir "$T" || {{ echo "KPEMU-DROPS-NO-TRACEFS"; exit 3; }}
stop() {{ kill "$R" 2>/dev/null || true; wait "$R" 2>/dev/null || true; grep -v '^#' "$T/trace" || true
  echo 0 > "$T/events/skb/kfree_skb/enable" || true; rmdir "$T" || true; exit 0; }}
trap stop INT TERM
echo mono > "$T/trace_clock"
echo 'protocol == 2048' > "$T/events/skb/kfree_skb/filter"
echo 1 > "$T/events/skb/kfree_skb/enable"
cat "$T/trace_pipe" & R=$!
echo "{READY}"
wait "$R" || true
stop
"""
_TRACEFS_LINE = re.compile(r"\s(\d+)\.(\d+): kfree_skb: .*?location=(\S+) reason: (\w+)")


def tracefs_drops(text: str, note: str) -> str:
    """The tracefs reader's text as `TDROP <monotonic ns> <reason> <function>` lines (no tuple, no
    namespace), after a `NOTE` line saying why the packet could not be read (pure)."""
    out = [f"NOTE {note}"]
    for line in text.splitlines():
        m = _TRACEFS_LINE.search(line)
        if m:
            sec, frac, location, reason = m.groups()
            ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
            function = location.split("+", 1)[0]
            if re.fullmatch(r"(0x)?[0-9a-f]+", function):  # a hashed pointer (%p, kernels before 6.3): unknown
                function = "?"
            out.append(f"TDROP {ns} {reason} {function}")
    return "\n".join(out) + "\n"


def bpf_program(root_inode: int, off: dict[str, int]) -> str:
    """The bpftrace program: one `DROP` line per IPv4 packet dropped outside the root namespace.

    `off`: byte offsets of the sk_buff / net_device / net fields read (kernel/btf.py), so bpftrace
    needs no BTF of its own. Fields: monotonic ns, netns inode, ifindex, reason number, function,
    IP protocol, src, dst, sport, dport (or ICMP type/code), then the inner IP protocol, src, dst,
    sport, dport of a VXLAN packet (zeros otherwise), then the packet's length in bytes.
    """
    vx = " || ".join(f"$dp == {p}" for p in VXLAN_PORTS)
    return f"""
tracepoint:skb:kfree_skb /args->protocol == 0x0800/
{{
  $skb = (uint64)args->skbaddr;
  $dev = *(uint64 *)($skb + {off["skb_dev"]});
  if ($dev != 0) {{
    $ns = *(uint32 *)(*(uint64 *)($dev + {off["dev_net"]}) + {off["net_inum"]});
    if ($ns != {root_inode}) {{
      $ip = *(uint64 *)($skb + {off["skb_head"]}) + *(uint16 *)($skb + {off["skb_nh"]});
      $proto = *(uint8 *)($ip + 9);
      $l4 = $ip + ((*(uint8 *)$ip & 15) * 4);
      $sp = bswap(*(uint16 *)$l4);
      $dp = bswap(*(uint16 *)($l4 + 2));
      $in = (uint8)0; $isrc = (uint32)0; $idst = (uint32)0; $isp = (uint16)0; $idp = (uint16)0;
      if ($proto == 17 && ({vx})) {{
        $ip2 = $l4 + 30;
        $in = *(uint8 *)($ip2 + 9); $isrc = *(uint32 *)($ip2 + 12); $idst = *(uint32 *)($ip2 + 16);
        $l42 = $ip2 + ((*(uint8 *)$ip2 & 15) * 4);
        $isp = bswap(*(uint16 *)$l42); $idp = bswap(*(uint16 *)($l42 + 2));
      }}
      printf("DROP %llu %u %d %d %s %u %s %s %u %u %u %s %s %u %u %u\\n", nsecs, $ns,
             *(int32 *)($dev + {off["dev_ifindex"]}), args->reason, ksym(args->location), $proto,
             ntop(*(uint32 *)($ip + 12)), ntop(*(uint32 *)($ip + 16)), $sp, $dp, $in, ntop($isrc), ntop($idst),
             $isp, $idp, *(uint32 *)($skb + {off["skb_len"]}));
    }}
  }}
}}
BEGIN {{ printf("{READY}\\n"); }}
interval:ms:100 {{ printf("{TICK} %llu\\n", nsecs); }}
"""


def _parent_death(sig: int) -> Callable[[], None]:
    """In the child: get `sig` when kpemu dies (unshare and sh exec, so the reader keeps the pid and this),
    so even a killed run leaves no probe attached. bpftrace gets SIGKILL (its probes detach as it exits:
    nobody is left to read what it would still print); the tracefs reader SIGTERM, which it traps to
    stop its `cat` and remove its tracefs instance."""

    def set_it() -> None:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)

    return set_it


def netns_inode(netns: str) -> int | None:
    """The inode of a named namespace (the `ns.inum` the kernel reports)."""
    try:
        return os.stat(f"/run/netns/{netns}").st_ino
    except OSError:
        return None


def why_no_reasons() -> str | None:
    """Why no drop reason at all can be read here (not even by time window), or None (cheap checks)."""
    if os.environ.get("KPEMU_DROP_TRACE") == "0":
        return "turned off (KPEMU_DROP_TRACE=0)"
    if os.geteuid() != 0:
        return "tracing drops needs root (BPF and tracefs)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed: tracefs cannot be mounted privately"
    return None


def why_unavailable(in_guest: bool = False) -> str | None:
    """Why this kernel or machine cannot trace drops by tuple (bpftrace), or None when it can (cheap checks
    only); the time-window reader may still run (`why_no_reasons`). `in_guest`: the runtime runs this in
    kpemu's guest (where software emulation makes bpftrace too slow to start)."""
    if (why := why_no_reasons()) is not None:
        return why
    forced = os.environ.get("KPEMU_DROP_TRACE")
    if forced == "tracefs":
        return "bpftrace not used (KPEMU_DROP_TRACE=tracefs)"
    if forced != "bpftrace" and in_guest and scaled(1.0) > 1.0:
        return ("bpftrace not used in a software-emulated guest, where it takes about a minute to start "
                "(KPEMU_DROP_TRACE=bpftrace uses it anyway)")
    if shutil.which("bpftrace") is None:
        return "bpftrace is not installed (Debian package bpftrace; make setup installs it)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "this kernel has no BTF (/sys/kernel/btf/vmlinux): bpftrace cannot read the dropped packet"
    return None


@dataclass
class DropSession:
    """A running drop tracer; `stop()` returns its text (`REASON n NAME` and `DROP ...` lines, or `NOTE` and
    `TDROP ...` lines from the tracefs reader)."""

    path: Path
    members: dict[int, str] = field(default_factory=dict)  # netns inode -> lab member (see `watch`)
    proc: subprocess.Popen | None = None
    unavailable: str | None = None
    text: str = ""
    by_time: str | None = None  # the time-window reader runs: why bpftrace could not read the packet
    ready: bool = False  # its probes are attached

    def watch(self, members: dict[str, str]) -> None:
        """The lab's namespaces (member -> netns): only their drops are kept."""
        self.members = {ino: m for m, ns in members.items() if (ino := netns_inode(ns)) is not None}

    def wait_ready(self, timeout: float = ATTACH_TIMEOUT) -> None:
        """Block until the probes are attached; when bpftrace cannot attach, fall back to the time-window
        reader; on failure record why and stop."""
        if self.proc is None:
            return
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            text = self.path.read_text(errors="replace") if self.path.exists() else ""
            if READY in text:
                self.ready = True
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        by_time = self.by_time
        self.by_time = None  # what was printed is kept whole, for the reason it failed
        self.stop()
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip() and "RLIMIT_MEMLOCK" not in ln]
        last = [ln for ln in lines if "ERROR" in ln][-1:] or lines  # bpftrace's error, not its caret line
        if "KPEMU-DROPS-NO-TRACEFS" in self.text:
            self.unavailable = "tracefs could not be mounted (kernel without tracefs, or not allowed here)"
        elif by_time is None:
            self.by_time = ("bpftrace did not attach to skb:kfree_skb: "
                            + (last[-1] if last else f"nothing within {scaled(timeout)}s"))
            self._spawn(TRACEFS_WRAPPER, dict(os.environ))
            self.wait_ready(timeout)
        else:
            self.unavailable = f"the tracefs reader did not start: {last[-1] if last else 'no output'}"

    def _spawn(self, script: str, env: dict[str, str]) -> None:
        """Run `script` (a wrapper above) in a private mount namespace, its output into `path`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w") as out:
            self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                                         stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                         preexec_fn=_parent_death(self._stop_signal(script)))

    @staticmethod
    def _stop_signal(script: str) -> signal.Signals:
        """What stops the reader: SIGTERM for the tracefs reader, never SIGINT, which a shell started from a
        background job (`cmd &`, as CI harnesses start runs) ignored on entry and so can neither trap nor
        receive: its instance would stay; SIGKILL for bpftrace (see `_parent_death`)."""
        return signal.SIGTERM if script == TRACEFS_WRAPPER else signal.SIGKILL

    def drained(self, since_ns: int, timeout: float = DRAIN_TIMEOUT) -> bool:
        """Wait until bpftrace has printed a tick stamped at `since_ns` (CLOCK_MONOTONIC, as bpftrace's
        nsecs) or later: what was dropped before then has been read. False when none came in time."""
        deadline = time.monotonic() + scaled(timeout)
        while self.proc is not None and self.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), self.path.open("rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
                ticks = [ln.split() for ln in fh.read().decode(errors="replace").splitlines() if ln.startswith(TICK)]
                if any(len(t) == 2 and t[1].isdigit() and int(t[1]) >= since_ns for t in ticks):
                    return True
            time.sleep(0.02)
        return False

    def stop(self) -> str:
        """Stop bpftrace (its probes detach as it exits) and return the lab's part of what it printed."""
        if self.proc is not None:
            if self.ready and self.by_time is None and self.proc.poll() is None:
                self.drained(time.monotonic_ns())
            if self.proc.poll() is None:  # bpftrace prints what its buffers still hold on SIGINT, then exits
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGTERM if self.by_time is not None else signal.SIGINT)
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=3)
            self.proc = None
            raw = self.path.read_text(errors="replace") if self.path.exists() else ""
            if self.by_time is not None:
                self.text = tracefs_drops(raw, self.by_time)
            else:
                self.text = "".join(ln + "\n" for ln in raw.splitlines() if self._keep(ln))
            # from bpftrace only the lab's namespaces stay on disk; the tracefs reader cannot tell namespaces apart.
            # A deploy that failed has removed the lab's scratch folder already: nothing to keep there.
            if self.path.parent.is_dir():
                self.path.write_text(self.text)
        return self.text

    def _keep(self, line: str) -> bool:
        f = line.split()
        if f[:1] == [TICK]:
            return False
        if f[:1] != ["DROP"]:
            return True
        return len(f) > 2 and f[2].isdigit() and int(f[2]) in self.members


def start_drop_tracing(path: Path, in_guest: bool = False) -> DropSession:
    """Start bpftrace for drops outside the root namespace (or, without it, the tracefs reader); output
    goes to `path`. `in_guest`: as `why_unavailable`.

    Returns at once (attaching takes a while): `watch()` the lab's namespaces once deployed and
    `wait_ready()` before the traffic. A session that cannot run has `unavailable` set and
    collects nothing.
    """
    session = DropSession(path)
    session.unavailable = why_no_reasons()
    if session.unavailable is not None:
        return session
    session.by_time = why_unavailable(in_guest)
    env = dict(os.environ)
    if session.by_time is None:
        try:
            env["KPEMU_DROPS_PROG"] = bpf_program(os.stat("/proc/self/ns/net").st_ino, drop_offsets())
        except (OSError, BtfError) as e:
            session.by_time = f"could not read the sk_buff layout from the kernel's BTF: {e}"
    session._spawn(BPFTRACE_WRAPPER if session.by_time is None else TRACEFS_WRAPPER, env)
    return session
