"""nftables mode's node dump (`nft list ruleset`): read strictly (read, check), compared with what
kube-proxy would program (drift), walked offline (trace). Pure."""
