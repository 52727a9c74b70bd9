"""A flow's trace (pure): which packets it covers, and what it brought back.

`FlowMatch` holds the tuples a flow's packets can carry, and `trace_restore_text` the iptables TRACE
rules that select them: built on the host (kpemu.analyse.explain.flow_match), carried in the job,
installed by kpemu.kernel.trace / kernel.nfttrace wherever the job runs. `TraceData` is what the
executor brings back for the flow (trace texts, the `CounterSnapshot`s around it, kernel drops), carried
in collected.json to the analysis (kpemu.analyse.explain).
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOST_EVENTS = "No buffer space available"  # xtables-monitor's last words when its socket overflowed


@dataclass(frozen=True)
class FlowMatch:
    """The tuples a flow's packets can carry: client -> service, and after DNAT -> backends."""

    proto: str  # tcp | udp
    client: str | None  # source address (None: any source)
    dst: str
    dport: int
    backends: tuple[tuple[str, int], ...] = ()
    tag: str = "flow"
    # TCP: trace only packets with SYN set (each connection's SYN and SYN-ACK). xtables-monitor
    # looks every traced rule up while printing; a whole connection's packets traced at full
    # speed overflow its netlink socket (ENOBUFS) and it exits, losing every later event.
    syn_only: bool = False


def trace_rule_args(m: FlowMatch) -> list[tuple[str, ...]]:
    """The match arguments of the TRACE rules for one flow (pure; same rules for both chains)."""
    p = m.proto.lower()
    com = ("-m", "comment", "--comment", f"kpemu-trace:{m.tag}")
    src = ("-s", m.client) if m.client else ()
    back = ("-d", m.client) if m.client else ()
    syn = ("--tcp-flags", "SYN", "SYN") if m.syn_only and p == "tcp" else ()
    out = [
        (*src, "-d", m.dst, "-p", p, "-m", p, "--dport", str(m.dport), *syn, *com, "-j", "TRACE"),
        ("-s", m.dst, *back, "-p", p, "-m", p, "--sport", str(m.dport), *syn, *com, "-j", "TRACE"),
    ]
    for ip, port in m.backends:
        # after DNAT (and SNAT on the way to another node) the source is no longer the client's
        out.append(("-d", ip, "-p", p, "-m", p, "--dport", str(port), *syn, *com, "-j", "TRACE"))
        out.append(("-s", ip, "-p", p, "-m", p, "--sport", str(port), *syn, *com, "-j", "TRACE"))
    return out


def trace_restore_text(m: FlowMatch, op: str = "-A") -> str:
    """iptables-restore input adding (`-A`) or deleting (`-D`) the flow's TRACE rules."""
    lines = ["*raw"]
    for chain in ("PREROUTING", "OUTPUT"):
        for args in trace_rule_args(m):
            lines.append(" ".join([op, chain, *(f'"{a}"' if " " in a else a for a in args)]))
    return "\n".join([*lines, "COMMIT"]) + "\n"


@dataclass(frozen=True)
class CounterSnapshot:
    """Per node: `iptables-save -c` text; `ipvsadm -Ln --stats` text when the mode balances with IPVS
    (read by kpemu.kernel.snapshot)."""

    iptables: dict[str, str] = field(default_factory=dict)
    ipvs_stats: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceData:
    """What the kernel side collected for one flow (texts only; empty when tracing was off)."""

    texts: dict[str, str] = field(default_factory=dict)  # node -> xtables-monitor --trace output
    unavailable: str | None = None
    before: CounterSnapshot | None = None  # the counters just before the flow, and just after
    after: CounterSnapshot | None = None
    drops_unavailable: str | None = None
    drop_members: dict[str, str] = field(default_factory=dict)  # netns inode -> lab member
    drops: str = ""  # the kernel drop tracer's text inside this flow's window (kernel/drops.py)
