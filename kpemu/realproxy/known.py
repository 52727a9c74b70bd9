"""Differences between kpemu's model and the real kube-proxy that are known, each with its reason (pure).

A difference is known when its mode, release and part match an entry and one of its diff lines holds
the entry's text; everything else a conformance run finds is a difference to fix in the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.realproxy.compare import Difference


@dataclass(frozen=True)
class Known:
    modes: frozenset[str]  # the kube-proxy modes it is seen in
    minors: tuple[int, int]  # first and last release minor it applies to
    part: str  # a prefix of Difference.what
    line: str  # text one of its diff lines holds
    reason: str


KNOWN: tuple[Known, ...] = (
    Known(frozenset({"nftables"}), (29, 37), "nft list table ip kube-proxy: chain cluster-ips-check",
          'drop comment "Drop traffic to unallocated ClusterIPs"',
          "real kube-proxy behaviour at start: it learns the ServiceCIDRs from their own informer, and a change "
          "of them queues no sync (OnServiceCIDRsChanged, pkg/proxy/nftables/proxier.go, 1.29-1.37); when that "
          "informer syncs after the first sync, the rule dropping traffic to unallocated ClusterIPs is missing "
          "until kube-proxy's next sync, where kpemu's model shows it"),
    Known(frozenset({"nftables"}), (29, 34), "nft list table ip kube-proxy", 'iif != "',
          "kube-proxy's nftables local-traffic detector matched detectLocalMode BridgeInterface and "
          "InterfaceNamePrefix with `iif` (the interface's index) until upstream made it `iifname`: 1.35.0 has "
          "`iifname`, and so does the 1.34.4 patch, where 1.29.6, 1.30.14, 1.31.13, 1.32.9, 1.33.5 and 1.34.1 "
          "have `iif` (pkg/proxy/util/localdetector.go); kpemu models a minor, not a patch, and writes the "
          "fixed `iifname` (with a prefix, `iif` never matches)"),
)


def known_reason(d: Difference, mode: str, minor: int) -> str | None:
    """The reason of the known difference `d` is, or None."""
    for k in KNOWN:
        if (mode in k.modes and k.minors[0] <= minor <= k.minors[1] and d.what.startswith(k.part)
                and any(k.line in line for line in d.diff[2:])):
            return k.reason
    return None
