"""The kube-proxy releases and modes kpemu models, and what validating a topology needs to know of
each mode (pure).

One row per mode. The model cannot import kpemu.proxy, so these facts live here; the proxy-mode
registry (kpemu.proxy.modes) builds each mode's behaviour on its row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLDEST_MINOR, NEWEST_MINOR = 10, 37  # kube-proxy releases 1.10 .. 1.37 are modelled (see proxy/versions.py)
NEWEST_KUBE_PROXY = f"1.{NEWEST_MINOR}"
# nftables mode (alpha in 1.29) releases kpemu models (kpemu.proxy.nftables.eras).
OLDEST_NFT_MINOR, NEWEST_NFT_MINOR = 29, 37


@dataclass(frozen=True)
class ModeFacts:
    """What `kubeProxy.mode: <name>` allows."""

    name: str
    title: str  # how reports write it
    first_minor: int  # oldest kube-proxy release (1.<minor>) kpemu models the mode for
    last_minor: int | None  # newest one, None: every modelled release
    releases: str  # which releases kpemu models the mode for, and why not others
    scheduler: bool = False  # whether kubeProxy.scheduler applies
    config_section: str = "iptables"  # the KubeProxyConfiguration section it reads masqueradeBit/-All from
    service_chains: bool = False  # Services are iptables chains (KUBE-SVC/KUBE-SEP) an iptables-restore re-syncs
    # nft element comments: the release (1.<minor>) from which kube-proxy cuts them to nft's 128 bytes
    # (truncateNFTablesComment); None: the mode writes none
    nft_comments_cut_from: int | None = None
    # the KubeProxyNFTablesLocalhostNodePorts gate serves loopback nodePortAddresses from a userspace proxy
    localhost_nodeport_proxy: bool = False
    chain_names: str = r"KUBE-[A-Z0-9-]+"  # (a regex) what kube-proxy's chains are called in this mode
    # (gate, minor): the feature gate the real kube-proxy needs on for this mode before release 1.<minor>
    gated_until: tuple[str, int] | None = None

    def names_a_chain(self, word: str) -> bool:
        """Whether `word` (a `died: by:`) is the name of one of this mode's kube-proxy chains (or maps)."""
        return re.fullmatch(self.chain_names, word) is not None

    def accepts(self, minor: int) -> bool:
        """Whether kpemu models this mode for release 1.<minor>."""
        return minor >= self.first_minor and (self.last_minor is None or minor <= self.last_minor)


MODE_FACTS: dict[str, ModeFacts] = {f.name: f for f in (
    ModeFacts("iptables", "iptables", 10, None, "iptables mode is modelled from kube-proxy 1.10", service_chains=True),
    ModeFacts("ipvs", "IPVS", 11, None, "IPVS mode is modelled from kube-proxy 1.11 (GA)", scheduler=True),
    ModeFacts("nftables", "nftables", OLDEST_NFT_MINOR, NEWEST_NFT_MINOR,
              f"nftables mode exists from kube-proxy 1.29 (alpha); kpemu models 1.{OLDEST_NFT_MINOR} to "
              f"1.{NEWEST_NFT_MINOR}", config_section="nftables", nft_comments_cut_from=37,
              localhost_nodeport_proxy=True, chain_names=r"[a-z][a-z0-9]*(?:-[a-z0-9/_.]+)+",
              gated_until=("NFTablesProxyMode", 31)),  # alpha 1.29-1.30, beta (on) from 1.31
)}
