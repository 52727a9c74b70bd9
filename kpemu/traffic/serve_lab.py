"""`python -m kpemu.traffic.serve_lab SPEC LOG`: a deployed lab's pod servers, until the lab is destroyed.

`kpemu deploy --serve` starts it (kpemu.traffic.labserver): one process serving every pod of the SPEC
file ({"pods": [{pod, ns, tcp, udp, sctp}], "health": [HealthSpec]}; a bare list is pods only) from
sockets opened in each pod's namespace, as a run's own servers are, and kube-proxy's health servers in
each node's (kpemu.traffic.health); it prints `ready` once every socket is bound and serves until SIGTERM (or destroy's
SIGKILL). Standard library only (and kpemu's traffic and netns modules), as the guest's agent.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

from kpemu.traffic.health import HealthSpec, serve_health
from kpemu.traffic.server import kernel_has_sctp, serve_pods


def main(argv: list[str]) -> int:
    """Serve the pods of the spec file `argv[0]` until SIGTERM or SIGINT."""
    spec = json.loads(Path(argv[0]).read_text())
    spec, health_specs = (spec, []) if isinstance(spec, list) else (spec["pods"], spec["health"])
    sctp = kernel_has_sctp()  # without it no client opens SCTP either: a pod's SCTP ports are not served
    servers = serve_pods([(p["pod"], p["ns"], list(p["tcp"]), list(p["udp"]), list(p.get("sctp", ())) if sctp else [])
                          for p in spec])
    health = serve_health([HealthSpec.from_json(h) for h in health_specs])
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print("ready", flush=True)
    try:
        stop.wait()
    finally:
        servers.close()
        health.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
