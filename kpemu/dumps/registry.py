"""One entry per kind of kube-proxy state a node's dumps hold (`ProxyMode.walks`): which dump files
carry it, how `kpemu check-node` compares them with what kube-proxy would program, and how
`kpemu trace` walks a packet through them. Pure.

- xtables (iptables and IPVS mode): `iptables-save`, `ipvsadm -Sn`, `ipset save` (kpemu.dumps.xtables);
- nft (nftables mode): `nft list ruleset` (kpemu.dumps.nft).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kpemu.analyse.oracle.types import Packet, Prediction
from kpemu.dumps.drift import Drift
from kpemu.dumps.files import DumpFiles
from kpemu.dumps.nft.drift import check_nft_dump
from kpemu.dumps.nft.trace import nft_node_of, nft_trace_json, render_nft_trace, run_nft_trace
from kpemu.dumps.xtables.drift import check_dumps
from kpemu.dumps.xtables.trace import node_rules, render_trace, run_trace, trace_json
from kpemu.model.topology import Topology
from kpemu.proxy.modes import mode_of

Walked = TypeVar("Walked")  # what a trace walks: the node's rules or table, its addresses (`local`), their source


@dataclass(frozen=True)
class NodeDumps(Generic[Walked]):
    """How one kind of kube-proxy state is read from a node's dumps, checked and walked."""

    files: tuple[str, ...]  # the DumpFiles fields that hold this kind
    check: Callable[[Topology, str, str, DumpFiles], Drift]  # (topology, its file, node, dumps) -> the drift
    walked: Callable[[Topology | None, str, list[str], DumpFiles], Walked]  # (topology, node, --node-ip, dumps)
    run: Callable[[Walked, Packet], Prediction]
    trace_json: Callable[[Walked, Prediction, str], dict[str, Any]]  # (walked, prediction, origin)
    render_trace: Callable[[Walked, Prediction, str], str]

    def given(self, dumps: DumpFiles) -> bool:
        """Whether any of `dumps` is of this kind."""
        return any(getattr(dumps, f) for f in self.files)


# ProxyMode.walks -> how its nodes' dumps are read
DUMPS: dict[str, NodeDumps[Any]] = {
    "xtables": NodeDumps(("iptables_save", "ipvs", "ipset"), check_dumps, node_rules, run_trace, trace_json,
                         render_trace),
    "nft": NodeDumps(("nft",), check_nft_dump, nft_node_of, run_nft_trace, nft_trace_json, render_nft_trace),
}
# with neither a dump nor a topology, `kpemu trace` says which dumps it takes: the iptables ones
WITHOUT_TOPOLOGY = "xtables"


def dumps_for(dumps: DumpFiles, topo: Topology | None) -> NodeDumps[Any]:
    """The entry of the dumps given, else of the topology's mode, else WITHOUT_TOPOLOGY's."""
    given = next((d for d in DUMPS.values() if d.given(dumps)), None)
    if given is not None:
        return given
    return DUMPS[mode_of(topo).walks if topo is not None else WITHOUT_TOPOLOGY]
