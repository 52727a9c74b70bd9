"""kube-proxy's UDP conntrack reconciler (1.32+), as a pure function on a node's conntrack table.

pkg/proxy/conntrack/cleanup.go `CleanStaleEntries` lists the table and deletes every UDP entry whose
original destination is a UDP Service frontend (ClusterIP, LoadBalancer IP or externalIP with the
service port) or a NodePort, and whose reply source is not one of that Service's serving endpoints.
The plan (which frontends, which endpoints serve them) is made on the host from the topology
(kpemu.proxy.ctplan); this module reads `conntrack -L` text, selects, and writes the `conntrack -D`
that deletes one selected entry by its original tuple. Standard library only: the guest runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# kube-proxy (<1.32) treats this conntrack tool message as success: nothing matched the filter
NO_ENTRY = "0 flow entries have been deleted"
_FIELD = re.compile(r"\b(src|dst|sport|dport)=(\S+)")


@dataclass(frozen=True)
class Entry:
    """One UDP conntrack entry: its original tuple and the source of its reply tuple."""

    src: str
    dst: str
    sport: int
    dport: int
    reply_src: str
    reply_sport: int

    def delete_argv(self) -> tuple[str, ...]:
        """The conntrack tool command that deletes exactly this entry."""
        return ("conntrack", "-D", "-p", "udp", "--orig-src", self.src, "--orig-dst", self.dst,
                "--orig-port-src", str(self.sport), "--orig-port-dst", str(self.dport))


def parse_entries(text: str) -> list[Entry]:
    """The UDP entries of `conntrack -L -p udp` output (other lines are skipped)."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != "udp":
            continue
        fields = _FIELD.findall(line)
        if len(fields) < 8 or [k for k, _ in fields[:8]] != ["src", "dst", "sport", "dport"] * 2:
            continue
        v = [value for _, value in fields[:8]]
        out.append(Entry(v[0], v[1], int(v[2]), int(v[3]), v[4], int(v[6])))
    return out


def _reply_key(e: Entry, endpoint_port: bool) -> str:
    return f"{e.reply_src}:{e.reply_sport}" if endpoint_port else e.reply_src


def stale(entries: list[Entry], plan: dict[str, Any]) -> list[Entry]:
    """The entries CleanStaleEntries deletes. `plan`: {"frontends": {"ip:port": [serving endpoint
    keys]}, "nodePorts": {"port": [keys]}, "endpointPort": bool}; an endpoint key is "ip:port" when
    endpointPort (1.34+), else "ip"."""
    frontends: dict[str, list[str]] = plan.get("frontends", {})
    node_ports: dict[str, list[str]] = plan.get("nodePorts", {})
    by_port = bool(plan.get("endpointPort"))
    out = []
    for e in entries:
        reply = _reply_key(e, by_port)
        serving = frontends.get(f"{e.dst}:{e.dport}")
        if serving is not None and reply not in serving:
            out.append(e)
            continue
        serving = node_ports.get(str(e.dport))
        if serving is not None and reply not in serving:
            out.append(e)
    return out
