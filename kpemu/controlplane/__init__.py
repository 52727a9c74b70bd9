"""A control plane of real parts for a lab: etcd and kube-apiserver (built by kpemu/upstream) on the
host's loopback, and kpemu as the API client that writes the topology's objects.

Pure: flags.py (command lines, the service range, the state directory's layout). I/O: pki.py
(openssl), procs.py (processes and pid files), client.py (HTTPS + JSON), plane.py (start, ready,
stop), write.py (the objects through the API).
"""
