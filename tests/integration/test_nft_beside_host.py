"""The nft walker's other tables on the kernel: a kernel-printed `nft list ruleset` with tables beside
kube-proxy's (tests/data/nft-dump/beside-firewall.nft: a firewall's forward policy drop; beside-docker.nft:
docker's iptables-nft FORWARD policy drop) loaded into a throwaway node namespace with the interfaces the
packet uses (eth0 to the client, cni0 to a local endpoint, flannel.1 to the other node's), a real NodePort
SYN sent, its path read with `nft monitor trace` (kpemu's own trace monitors), and `kpemu trace` on the
same dump: the kernel's rules, in order, across every table, and its verdict are one of the walker's
outcomes for the endpoint the kernel chose (the walker is not told the interface out, so it is undecided
between them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kpemu.kernel import netns as nsmod
from kpemu.kernel.trace import Monitors
from tests.helpers import ROOT, cli, needs_root
from tests.netlinks import Link, node_with, send_syn

pytestmark = [needs_root, pytest.mark.root]

DATA = ROOT / "tests" / "data" / "nft-dump"
PREFIX = "kp-it-nftbeside-"
NODE = PREFIX + "n"
CLIENT, NODE_IP, NODEPORT, SPORT = "10.242.72.50", "192.168.1.100", 30080, 40000
LINKS = (Link("eth0", "192.168.1.100/24", "10.242.72.50/24", "10.242.72.0/24 dev eth0"),
         Link("cni0", "10.244.0.1/24", "10.244.0.2/24"),
         Link("flannel.1", "10.244.1.0/32", "10.244.1.5/24", "10.244.1.0/24 dev flannel.1"))
# marks the client's SYN for `nft monitor trace`, before every table of the dump (priority -500)
TRACE = (f"table ip kp-trace {{\n\tchain pre {{\n\t\ttype filter hook prerouting priority -500; policy accept;\n"
         f"\t\tip saddr {CLIENT} tcp sport {SPORT} tcp dport {NODEPORT} meta nftrace set 1\n\t}}\n}}\n")
_EVENT = re.compile(r"^trace id \S+ (ip6?|inet|arp|bridge|netdev) (\S+) (\S+) (?:rule (.*) \(verdict (.+)\)|"
                    r"policy (\S+)(?: .*)?)$")


def _counterless(rule: str) -> str:
    return re.sub(r"counter packets \d+ bytes \d+", "counter", rule)


def kernel_path(dump: Path, peers: dict[str, str], workdir: Path) -> tuple[list[tuple[str, str, str, str]], str]:
    """The SYN's events in the dump's tables as (table, chain, rule or `policy V`, verdict), and its verdict."""
    res = nsmod.run_in(NODE, ["nft", "-f", "-"], input=dump.read_text() + TRACE)
    assert res.returncode == 0, res.stderr
    monitors = Monitors()
    try:
        monitors.start({"n": NODE}, ["nft", "monitor", "trace"], workdir, "nft monitor trace")
        send_syn(peers["eth0"], CLIENT, SPORT, NODE_IP, NODEPORT)
    finally:
        out = monitors.stop().get("n", "")
    events = []
    for line in out.splitlines():
        m = _EVENT.match(line.strip())
        # a base chain that falls through to policy accept: the walker writes no step for it
        if m and m[2] != "kp-trace" and m[6] != "accept":
            rule, verdict = (m[4], m[5]) if m[4] is not None else (f"policy {m[6]}", m[6])
            events.append((f"{m[1]} {m[2]}", m[3], _counterless(rule), verdict))
    assert events, f"no trace of the SYN:\n{out}"
    # the first packet only: the kernel traces the SYN's retransmissions too, each from prerouting again
    cut = next((i for i, e in enumerate(events) if i and e[:3] == events[0][:3]), len(events))
    first = events[:cut]
    verdict = "DROP" if any(v == "drop" for *_, v in first) else "ACCEPT"
    return first, verdict


def walker_outcomes(dump: Path) -> list[tuple[list[tuple[str, str, str, str]], str]]:
    res = cli("trace", "--nft", str(dump), "--node", "n", "--node-ip", NODE_IP, "--src", CLIENT, "--dst",
              f"{NODE_IP}:{NODEPORT}", "--iif", "eth0", "-o", "json")
    assert res.returncode == 0, res.stderr
    out = []
    for o in json.loads(res.stdout)["outcomes"]:
        path = []
        for s in o["path"]:
            family, _, rest = s["baseChain"].partition(" ")
            table = f"{family} {rest.partition(' ')[0]}" if rest else "ip kube-proxy"
            path.append((table, s["chain"], _counterless(s["rule"]), s["verdict"]))
        out.append((path, o["verdict"]))
    return out


@pytest.mark.parametrize("dump", ["beside-firewall.nft", "beside-docker.nft"])
def test_the_walker_takes_the_kernels_path_across_the_tables(dump: str, tmp_path: Path) -> None:
    outcomes = walker_outcomes(DATA / dump)
    with node_with(NODE, PREFIX, LINKS) as peers:
        kernel, verdict = kernel_path(DATA / dump, peers, tmp_path)
    assert (kernel, verdict) in outcomes, "\n".join(map(str, [kernel, verdict, *outcomes]))
    assert any(t != "ip kube-proxy" for t, *_ in kernel)  # the other tables' chains ran, and the walk has them
