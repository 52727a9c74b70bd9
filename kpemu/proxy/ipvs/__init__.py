"""kube-proxy's IPVS mode: ipsets, its small iptables rule set, kube-ipvs0, IPVS virtual servers and
sysctls of a node (generate, iptables, ipset_text, ipvsadm_text) and its registry entry `MODE`. Pure."""

from kpemu.proxy.ipvs.generate import DUMMY_DEVICE, IpvsState, ipvs_rules
from kpemu.proxy.ipvs.mode import MODE

__all__ = ["DUMMY_DEVICE", "MODE", "IpvsState", "ipvs_rules"]
