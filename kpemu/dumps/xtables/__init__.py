"""iptables and IPVS mode's node dumps (`iptables-save`, `ipvsadm -Sn`, `ipset save`): read strictly
(read, check), compared with what kube-proxy would program (drift), walked offline (trace). Pure."""
