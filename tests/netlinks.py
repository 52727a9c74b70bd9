"""A throwaway node namespace wired as a real node's dump expects, for the tests that load a real dump into
the kernel and trace one SYN through it (tests/integration/test_real_dumps_host.py, test_nft_beside_host.py).

Each `Link` is a veth: its `name` (with `address`) in the node namespace, its peer `eth0` (with `peer`) in a
namespace of its own whose default route is the node; `route` is a route the node adds through it."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kpemu.kernel import netns as nsmod


@dataclass(frozen=True)
class Link:
    """A veth from the node namespace to a peer namespace (see the module docstring)."""

    name: str
    address: str
    peer: str
    route: str | None = None


def ip(ns: str, *args: str) -> None:
    """`ip ARGS` in `ns`, asserted to succeed."""
    res = nsmod.run_in(ns, ["ip", *args])
    assert res.returncode == 0, f"{ns}: ip {' '.join(args)}: {res.stderr}"


@contextlib.contextmanager
def node_with(node: str, prefix: str, links: Sequence[Link]) -> Iterator[dict[str, str]]:
    """Namespace `node` with the links (peers named `{prefix}p{i}`), forwarding on and rp_filter off; link
    name -> peer namespace. Every namespace is deleted on the way out."""
    made: list[str] = []
    peers: dict[str, str] = {}
    try:
        nsmod.create_netns(node)
        made.append(node)
        ip(node, "link", "set", "lo", "up")
        for i, link in enumerate(links):
            peer = f"{prefix}p{i}"
            nsmod.create_netns(peer)
            made.append(peer)
            peers[link.name] = peer
            ip(node, "link", "add", link.name, "type", "veth", "peer", "name", "eth0", "netns", peer)
            ip(node, "addr", "add", link.address, "dev", link.name)
            ip(node, "link", "set", link.name, "up")
            ip(peer, "addr", "add", link.peer, "dev", "eth0")
            ip(peer, "link", "set", "eth0", "up")
            ip(peer, "link", "set", "lo", "up")
            ip(peer, "route", "add", "default", "via", link.address.split("/")[0], "dev", "eth0", "onlink")
        for link in links:
            if link.route:
                ip(node, "route", "replace", *link.route.split())
        for knob in ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"):
            assert nsmod.run_in(node, ["sysctl", "-qw", knob]).returncode == 0, knob
        yield peers
    finally:
        for ns in reversed(made):
            nsmod.delete_netns(ns)


def send_syn(peer: str, src: str, sport: int, dst: str, dport: int) -> None:
    """One connection attempt from `src:sport` in namespace `peer` (its first SYN is what is traced)."""
    with nsmod.inside(peer):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((src, sport))
        s.settimeout(0.5)
        with contextlib.suppress(OSError):
            s.connect((dst, dport))
