"""kube-proxy's iptables mode: the rules it (and kubelet) leave on a node (generate) and its
registry entry `MODE` (mode: texts, apply steps, read-back, trace, oracle, kernel features). Pure."""

from kpemu.proxy.iptables.generate import iptables_rules, needs_route_localnet, restore_text, uses_nfacct
from kpemu.proxy.iptables.mode import MODE

__all__ = ["MODE", "iptables_rules", "needs_route_localnet", "restore_text", "uses_nfacct"]
