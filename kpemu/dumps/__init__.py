"""A real node's dumps (`iptables-save`, `ipvsadm -Sn`, `ipset save`, `nft list ruleset`): read
strictly, compared with what kube-proxy would program (`check-node`), and walked offline by the
oracle (`trace`); one package per kind of state (`xtables/`, `nft/`, each with read, check, drift
and trace), listed in kpemu.dumps.registry.DUMPS. Pure code."""
