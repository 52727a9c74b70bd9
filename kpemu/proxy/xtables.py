"""The iptables binaries kube-proxy's text is restored and saved with, per backend (standard library only:
the lab's job executor imports it)."""

RESTORE = {"nft": "iptables-nft-restore", "legacy": "iptables-legacy-restore"}
SAVE = {"nft": "iptables-nft-save", "legacy": "iptables-legacy-save"}
