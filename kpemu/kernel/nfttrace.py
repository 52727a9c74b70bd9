"""Trace one flow's packets through nftables in node namespaces with `nft monitor trace` (effects).

nftables mode's equivalent of kernel/trace.py: a table `ip kpemu-trace` with prerouting and
output chains at priority -350 (before conntrack and every kube-proxy chain) whose rules set
`meta nftrace set 1` for the flow's packets only (the tuples of plan.tracing.trace_rule_args: client ->
service, -> each backend, and the replies), then `nft monitor trace` in every node namespace,
confirmed subscribed to the trace multicast group before traffic is sent. Stopping deletes the
table, so nothing else in the namespace is touched.
"""

from __future__ import annotations

from pathlib import Path

from kpemu.kernel.netns import run_in
from kpemu.kernel.trace import TraceSession, install
from kpemu.plan.tracing import FlowMatch

TRACE_TABLE = "kpemu-trace"


def trace_table_text(m: FlowMatch) -> str:
    """`nft -f` input creating the trace table for one flow (pure)."""
    p = m.proto.lower()
    syn = " tcp flags & syn == syn" if m.syn_only and p == "tcp" else \
        " sctp chunk init exists" if m.syn_only and p == "sctp" else ""
    matches = [
        f"{f'ip saddr {m.client} ' if m.client else ''}ip daddr {m.dst} {p} dport {m.dport}",
        f"ip saddr {m.dst} {f'ip daddr {m.client} ' if m.client else ''}{p} sport {m.dport}",
    ]
    for ip, port in m.backends:
        matches += [f"ip daddr {ip} {p} dport {port}", f"ip saddr {ip} {p} sport {port}"]
    lines = [f"add table ip {TRACE_TABLE}"]
    for chain, hook in (("pre", "prerouting"), ("out", "output")):
        lines.append(f"add chain ip {TRACE_TABLE} {chain} {{ type filter hook {hook} priority -350 ; }}")
        lines += [f"add rule ip {TRACE_TABLE} {chain} {x}{syn} meta nftrace set 1" for x in matches]
    return "\n".join(lines) + "\n"


def start_nft_tracing(nodes: dict[str, str], match: FlowMatch, *, workdir: Path) -> TraceSession:
    """Install the flow's trace table and start a confirmed `nft monitor trace` in every namespace
    (writing into temporary files in `workdir`, the lab's scratch directory)."""

    def remove(ns: str) -> None:
        run_in(ns, ["nft", "delete", "table", "ip", TRACE_TABLE])

    session = TraceSession(match, dict(nodes), remove)
    try:
        install(session, ["nft", "-f", "-"], trace_table_text(match), "the nftrace table")
        session.monitors.start(nodes, ["nft", "monitor", "trace"], workdir, "nft monitor trace")
    except BaseException:
        session.stop()
        raise
    return session
