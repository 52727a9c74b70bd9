"""The kernel's own drop reasons for a run's packets (effects): bpftrace on `skb:kfree_skb`.

Every freed-because-dropped packet passes the `skb:kfree_skb` tracepoint with a drop reason
(`IP_RPFILTER`, `NO_SOCKET`, `NETFILTER_DROP`, ...) and the kernel function that dropped it. The
tracepoint is global (not per network namespace), so the BPF program keeps only packets whose
device lives in one of the lab's namespaces (by namespace inode) and prints each one's IPv4
tuple, and the inner tuple when it is VXLAN, so the analysis joins a drop to a connection by
tuple (analyse/drops.py).

bpftrace needs tracefs for the tracepoint's format: it is mounted in a private mount namespace
of the bpftrace process only (`unshare -m`), never on the host's /sys. The reason names come
from that format file. Attaching takes a second or two (BTF is parsed for the packet casts), so
one tracer covers a run's traffic and is started while the servers and captures start; the
analysis keeps only the events inside each flow's time window. The BPF program is detached when
bpftrace exits: no tracing state is left behind, nothing in the root namespace is changed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.pace import scaled

READY = "KPEMU-DROPS-READY"
ATTACH_TIMEOUT = 15.0
FORMAT = "/sys/kernel/tracing/events/skb/kfree_skb/format"
VXLAN_PORTS = (8472, 4789)

# Runs in the private mount namespace: mount tracefs there, print the reason table, exec bpftrace.
_WRAPPER = f"""set -e
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || {{ echo "KPEMU-DROPS-NO-TRACEFS"; exit 3; }}
sed -n 's/.*__print_symbolic(REC->reason, //p' {FORMAT} | tr '}}' '\\n' \\
  | sed -n 's/^[ ,]*{{ *\\([0-9]*\\), *"\\([A-Za-z0-9_]*\\)".*/REASON \\1 \\2/p'
exec bpftrace -B line -e "$KPEMU_DROPS_PROG"
"""


def bpf_program(inodes: list[int]) -> str:
    """The bpftrace program: one `DROP` line per IPv4 packet dropped in one of `inodes`' namespaces.

    Fields: monotonic ns, netns inode, ifindex, reason number, function, IP protocol, src, dst,
    sport, dport (or ICMP type/code), then the inner IP protocol, src, dst, sport, dport of a VXLAN
    packet (zeros otherwise), then the packet's length in bytes.
    """
    cond = " || ".join(f"$ns == {i}" for i in inodes) or "0"
    vx = " || ".join(f"$dp == {p}" for p in VXLAN_PORTS)
    return f"""
tracepoint:skb:kfree_skb /args->protocol == 0x0800/
{{
  $skb = (struct sk_buff *)args->skbaddr;
  if ($skb->dev != 0) {{
    $ns = $skb->dev->nd_net.net->ns.inum;
    if ({cond}) {{
      $nh = $skb->head + $skb->network_header;
      $ip = (struct iphdr *)$nh;
      $l4 = $nh + ((*(uint8 *)$nh & 15) * 4);
      $sp = bswap(*(uint16 *)$l4);
      $dp = bswap(*(uint16 *)($l4 + 2));
      $ip2 = (struct iphdr *)($l4 + 30);
      $in = (uint8)0; $isrc = (uint32)0; $idst = (uint32)0; $isp = (uint16)0; $idp = (uint16)0;
      if ($ip->protocol == 17 && ({vx})) {{
        $in = $ip2->protocol; $isrc = $ip2->saddr; $idst = $ip2->daddr;
        $l42 = ($l4 + 30) + ((*(uint8 *)($l4 + 30) & 15) * 4);
        $isp = bswap(*(uint16 *)$l42); $idp = bswap(*(uint16 *)($l42 + 2));
      }}
      printf("DROP %llu %u %d %d %s %u %s %s %u %u %u %s %s %u %u %u\\n", nsecs, $ns, $skb->dev->ifindex,
             args->reason, ksym(args->location), $ip->protocol, ntop($ip->saddr), ntop($ip->daddr), $sp, $dp,
             $in, ntop($isrc), ntop($idst), $isp, $idp, $skb->len);
    }}
  }}
}}
BEGIN {{ printf("{READY}\\n"); }}
"""


def netns_inode(netns: str) -> int | None:
    """The inode of a named namespace (the `ns.inum` the kernel reports)."""
    try:
        return os.stat(f"/run/netns/{netns}").st_ino
    except OSError:
        return None


def why_unavailable() -> str | None:
    """Why this kernel or machine cannot trace drops, or None when it can (cheap checks only)."""
    if os.geteuid() != 0:
        return "tracing drops needs root (BPF and tracefs)"
    if shutil.which("bpftrace") is None:
        return "bpftrace is not installed (Debian package bpftrace; make setup installs it)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed: tracefs cannot be mounted privately"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "this kernel has no BTF (/sys/kernel/btf/vmlinux): bpftrace cannot read the dropped packet"
    return None


@dataclass
class DropSession:
    """A running drop tracer; `stop()` returns its text (`REASON n NAME` and `DROP ...` lines)."""

    path: Path
    members: dict[int, str] = field(default_factory=dict)  # netns inode -> lab member
    proc: subprocess.Popen | None = None
    unavailable: str | None = None
    text: str = ""

    def wait_ready(self, timeout: float = ATTACH_TIMEOUT) -> None:
        """Block until the probes are attached; on failure record why and stop."""
        if self.proc is None:
            return
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            text = self.path.read_text(errors="replace") if self.path.exists() else ""
            if READY in text:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        last = [ln for ln in self.text.splitlines() if ln.strip() and "RLIMIT_MEMLOCK" not in ln]
        if "KPEMU-DROPS-NO-TRACEFS" in self.text:
            self.unavailable = "tracefs could not be mounted (kernel without tracefs, or not allowed here)"
        else:
            self.unavailable = ("bpftrace did not attach to skb:kfree_skb: "
                                + (last[-1] if last else f"nothing within {scaled(timeout)}s"))

    def stop(self) -> str:
        """Stop bpftrace (its probes detach as it exits) and return what it printed."""
        if self.proc is not None:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGINT)
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=3)
            self.proc = None
            self.text = self.path.read_text(errors="replace") if self.path.exists() else ""
        return self.text


def start_drop_tracing(members: dict[str, str], path: Path) -> DropSession:
    """Start bpftrace for drops in the lab's namespaces (member -> netns); output goes to `path`.

    Returns at once (attaching takes a while): call `wait_ready()` before the traffic. A session
    that cannot run has `unavailable` set and collects nothing.
    """
    inodes = {ino: m for m, ns in members.items() if (ino := netns_inode(ns)) is not None}
    session = DropSession(path, inodes)
    session.unavailable = why_unavailable()
    if session.unavailable is not None:
        return session
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KPEMU_DROPS_PROG": bpf_program(sorted(inodes))}
    with path.open("w") as out:
        session.proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", _WRAPPER],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return session
