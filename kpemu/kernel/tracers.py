"""One packet tracer per way a mode's packets are traced (`ProxyMode.trace`, carried in the job as
`trace_kind`) (effects): TRACE rules read by `xtables-monitor --trace` (kpemu.kernel.trace), or an
nftrace table read by `nft monitor trace` (kpemu.kernel.nfttrace)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kpemu.kernel.nfttrace import start_nft_tracing
from kpemu.kernel.trace import TraceSession, start_tracing
from kpemu.plan.tracing import FlowMatch

# (node -> its namespace, the flow's tuples, kubeProxy.backend, the lab's scratch directory) -> a started session
Tracer = Callable[[dict[str, str], FlowMatch, str, Path], TraceSession]


def _xtables_monitor(nodes: dict[str, str], match: FlowMatch, backend: str, workdir: Path) -> TraceSession:
    return start_tracing(nodes, match, backend, workdir=workdir)


def _nft_monitor(nodes: dict[str, str], match: FlowMatch, backend: str, workdir: Path) -> TraceSession:
    # the nftrace table is nft's own: no iptables binary is involved, whichever backend kube-proxy uses
    return start_nft_tracing(nodes, match, workdir=workdir)


# ProxyMode.trace -> its tracer
TRACERS: dict[str, Tracer] = {"iptables-trace": _xtables_monitor, "nft-monitor": _nft_monitor}
