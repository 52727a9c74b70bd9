"""A real node's dumps (`iptables-save`, `ipvsadm -Sn`, `ipset save`, `nft list ruleset`): read
strictly, compared with what kube-proxy would program (`drift`, `nftdrift`), and walked offline by
the oracle (`trace`, `nftpath`). Pure code."""
