"""A real node's dumps (`iptables-save`, `ipvsadm -Sn`, `ipset save`): read strictly, compared with
what kube-proxy would program (`drift`), and walked offline by the oracle (`trace`). Pure code."""
