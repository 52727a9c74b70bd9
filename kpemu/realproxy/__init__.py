"""The real kube-proxy in a lab: its configuration per node (config), the relay that carries a node's
API traffic to the host's loopback (relay), and the processes, their sync and their stop (nodes)."""
