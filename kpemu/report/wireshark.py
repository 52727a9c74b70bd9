"""How a user opens a run in Wireshark or tshark (pure): file names, one connection's display filter,
the decode-as VXLAN needs, the options that keep Wireshark from misreading hops as retransmissions."""

from __future__ import annotations

import shlex

from kpemu.cni import vxlan_ports

RUN_PCAPNG = "run.pcapng"


def flow_pcapng(flow: str) -> str:
    """Where a flow's pcapng goes, relative to the run directory."""
    return f"pcaps/flow-{flow}.pcapng"


def conn_tag(flow: str, conn: int) -> str:
    """The comment prefix that names one connection: `[flow#conn]`."""
    return f"[{flow}#{conn}]"


def display_filter(flow: str, conn: int) -> str:
    """The Wireshark display filter that shows one connection's hops."""
    return f'frame.comment contains "{conn_tag(flow, conn)} hop"'


def tshark_argv(pcapng: str, flow: str, conn: int) -> list[str]:
    """tshark listing one connection hop by hop: frame, capture point, comment (VXLAN decoded)."""
    return ["tshark", "-r", pcapng, *open_options(), "-Y", display_filter(flow, conn), "-T", "fields",
            "-e", "frame.number", "-e", "frame.interface_name", "-e", "frame.comment"]


def open_options() -> list[str]:
    """The CNIs' VXLAN ports (flannel's 8472) are not Wireshark's default (4789): decode them as VXLAN.
    The same packet seen at several hops is not a TCP retransmission: leave sequence analysis off."""
    decode = [arg for port in vxlan_ports() for arg in ("-d", f"udp.port=={port},vxlan")]
    return [*decode, "-o", "tcp.analyze_sequence_numbers:FALSE"]


def commands(pcapng: str, flow: str, conn: int) -> tuple[str, str]:
    """(tshark command, Wireshark command) that show one connection hop by hop, for a shell."""
    tshark = shlex.join(tshark_argv(pcapng, flow, conn))
    wireshark = shlex.join(["wireshark", "-r", pcapng, *open_options(), "-Y", display_filter(flow, conn)])
    return tshark, wireshark
