"""The real kube-proxy's part of a collect job, on the kernel that runs the lab: the control plane on this
machine's loopback, the topology's objects written to it, one kube-proxy per node namespace behind its
relay, the wait for every node's sync; after the traffic, the check that nothing was written again
(the API is frozen: nothing writes to it once the nodes have synced, and syncPeriod is an hour), and
the stop of all of it. Everything lives in the lab's scratch directory, which `destroy` stops and
removes (kpemu.controlplane.procs).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kpemu.controlplane import flags
from kpemu.controlplane.plane import start_with_ranges
from kpemu.controlplane.write import write_objects
from kpemu.jobs.schema import RealKubeProxy
from kpemu.realproxy import nodes
from kpemu.realproxy.config import kubeconfig
from kpemu.statedir import scratch_dir


@contextlib.contextmanager
def running(lab: str, spec: RealKubeProxy, namespaces: dict[str, str], say: Callable[[str], None],
            report: dict[str, Any], logs: Path) -> Iterator[None]:
    """The real kube-proxy programming every node of `lab` (`namespaces`: node -> namespace) while the block
    runs; `report` receives its version, build, the control plane's and each node's seconds, and what
    was written again during the block; each node's kube-proxy log is kept as `logs/<node>.log`."""
    report.update({"implementation": "upstream", "version": spec.version, "binary": spec.binary,
                   "build": spec.build})
    t0 = time.monotonic()
    cp = start_with_ranges(lab, spec.service_cidr, spec.node_port_range,
                           {"etcd": Path(spec.etcd), "kube-apiserver": Path(spec.apiserver)}, say)
    try:
        report["controlPlaneSeconds"] = round(cp.seconds_to_ready, 2)
        # every object before kube-proxy starts: its first sync follows the full lists of its informers
        write_objects(cp.client, list(spec.objects), list(spec.statuses), lab)
        say(f"kube-proxy {spec.version}: starting one in each of {len(namespaces)} node namespaces")
        real = nodes.start(spec.binary, spec.configs, namespaces, kubeconfig(str(cp.client.ca), cp.client.token),
                           (flags.HOST, cp.ports.apiserver), scratch_dir(lab) / "kube-proxy")
        try:
            nodes.wait_synced(real, say)
            report["syncSeconds"] = {r.node: round(r.synced_in or 0.0, 2) for r in real}
            report["readySeconds"] = round(time.monotonic() - t0, 2)
            yield
            report["resynced"] = nodes.resynced(real)
        finally:
            nodes.stop(real)
            logs.mkdir(parents=True, exist_ok=True)
            for r in real:
                with contextlib.suppress(OSError):
                    shutil.copyfile(r.proc.log, logs / f"{r.node}.log")
    finally:
        cp.stop()
