"""tcpdump per capture point (effects): start in the interface's namespace, confirm it listens,
stop with SIGINT after the traffic drained, then render each pcap as `tcpdump -nn -r` text."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kpemu.capture.points import capture_file_stem
from kpemu.errors import EnvironmentProblem
from kpemu.kernel import netns as nsmod
from kpemu.kernel.runowner import dies_with_parent
from kpemu.pace import scaled
from kpemu.plan.types import Interface
from kpemu.traffic.procs import wait_for_lines

LISTEN_TIMEOUT = 5.0
STOP_TIMEOUT = 3.0
# What the text renderings (the ledger's goldens) show: IPv4 TCP/UDP/SCTP/ICMP and IPIP (protocol 4, calico's
# underlay); not ARP, whose timing differs run to run.
FILTER = ["ip", "and", "(tcp", "or", "udp", "or", "sctp", "or", "icmp", "or", "ip", "proto", "4)"]
# What the pcaps hold: that and ARP, which Wireshark users (and a verdict that cites ARP) look for.
CAPTURE_FILTER = ["arp", "or", "(", *FILTER, ")"]
SNAPLEN = 512  # bytes kept of each frame: every header kpemu reads, the start of the payload


@dataclass
class Capture:
    """One running tcpdump and where its files go."""

    iface: Interface
    pcap: Path
    proc: subprocess.Popen


def start_captures(points: list[Interface], pcap_dir: Path, snaplen: int = SNAPLEN) -> list[Capture]:
    """Start tcpdump -U -w on every point (`snaplen` bytes of each frame), in parallel; return once each
    printed "listening on"."""
    pcap_dir.mkdir(parents=True, exist_ok=True)
    caps: list[Capture] = []
    try:
        for i in points:
            pcap = pcap_dir / f"{capture_file_stem(i)}.pcap"
            # -p: a promiscuous cni0 would hand every bridged frame to the node's IP stack too, which
            # then forwards a second copy (br_netfilter + ip_forward): captures must not change traffic.
            # -Z root: tcpdump would switch to its own user, and a change of user clears the parent-death
            # signal that makes it die with this run
            argv = ["tcpdump", "-p", "-Z", "root", "-i", i.name, "-U", "--immediate-mode", "-nn", "-s", str(snaplen),
                    "--time-stamp-precision=nano", "-w", str(pcap), *CAPTURE_FILTER]
            proc = nsmod.popen_in(i.ns, dies_with_parent(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
            caps.append(Capture(i, pcap, proc))
        late = wait_for_lines({capture_file_stem(c.iface): c.proc for c in caps}, "listening on",
                           scaled(LISTEN_TIMEOUT), "stderr")
    except BaseException:
        stop_captures(caps)
        raise
    if late:
        stop_captures(caps)
        raise EnvironmentProblem(f"tcpdump did not start listening on {', '.join(late)}",
                                 "check that tcpdump is installed and may capture (root, no AppArmor denial)")
    return caps


def stop_captures(caps: list[Capture]) -> None:
    """SIGINT every tcpdump (it flushes and exits), then wait; kill those that hang."""
    for c in caps:
        if c.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                c.proc.send_signal(signal.SIGINT)
    for c in caps:
        try:
            c.proc.wait(timeout=scaled(STOP_TIMEOUT))
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
        if c.proc.stderr:
            c.proc.stderr.close()


def render_text(caps: list[Capture], text_dir: Path) -> dict[str, Path]:
    """`tcpdump -nn -r` every capture's pcap into text_dir/<netns>_<iface>.txt (in parallel)."""
    return render_pcaps([c.pcap for c in caps], text_dir)


def render_pcaps(pcaps: list[Path], text_dir: Path) -> dict[str, Path]:
    """`tcpdump -nn -r` every pcap into text_dir/<stem>.txt (in parallel), its IP packets (FILTER);
    stem -> text file."""
    text_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    out: dict[str, Path] = {}
    for pcap in pcaps:
        if not pcap.exists():
            continue
        txt = text_dir / f"{pcap.stem}.txt"
        fh = txt.open("w")
        procs.append((subprocess.Popen(["tcpdump", "-nn", "-r", str(pcap), *FILTER], stdout=fh,
                                       stderr=subprocess.DEVNULL), fh))
        out[pcap.stem] = txt
    for p, fh in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        fh.close()
    return out
