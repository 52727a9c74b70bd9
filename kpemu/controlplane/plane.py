"""A control plane of real parts for one lab: etcd and kube-apiserver on the host's loopback, in the
lab's state directory (`<state>/<lab>.d/controlplane/`, removed with the lab), ready when the API
server's /readyz says so.

    with control_plane(lab, topo, binaries, say) as cp:
        write_topology(cp.client, topo)

`destroy NAME` and `destroy --all` stop what its pid files name and remove the directory, also after
the kpemu process that started it was killed.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.controlplane import flags, pki, procs
from kpemu.controlplane.client import ApiError, Client
from kpemu.errors import EnvironmentProblem
from kpemu.kernel.runowner import my_token
from kpemu.model.topology import Topology
from kpemu.statedir import scratch_dir

READY_LIMIT = 120.0  # seconds from start to /readyz; a few on an idle host, more under load


def state_dir(lab: str) -> Path:
    """The control plane's directory in the lab's scratch directory."""
    return scratch_dir(lab) / "controlplane"


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports nothing listens on now (the kernel's choice of ephemeral ports)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((flags.HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class ControlPlane:
    lab: str
    layout: flags.Layout
    client: Client
    ports: flags.Ports
    service_cidr: str
    procs: list[procs.Proc] = field(default_factory=list)
    seconds_to_ready: float = 0.0

    @property
    def server(self) -> str:
        return self.client.server

    def stop_processes(self) -> None:
        """Stop the API server, then etcd."""
        for p in reversed(self.procs):
            procs.stop(p)
        self.procs.clear()

    def stop(self) -> None:
        """Stop the API server, then etcd, and remove the state directory (and the lab's scratch
        directory when nothing else is in it)."""
        self.stop_processes()
        _remove(self.layout)


def _remove(layout: flags.Layout) -> None:
    shutil.rmtree(layout.root, ignore_errors=True)
    with contextlib.suppress(OSError):
        layout.root.parent.rmdir()


def _wait_ready(cp: ControlPlane, limit: float) -> None:
    """Poll /readyz until it answers `ok`; a process that exits or a deadline passed is an
    EnvironmentProblem carrying the end of that process's log."""
    deadline = time.monotonic() + limit
    last = ""
    while True:
        for p in cp.procs:
            if not p.running():
                raise EnvironmentProblem(f"{p.name} of lab {cp.lab} exited (code {p.popen.returncode}) before the "
                                         f"API server was ready; the end of {p.log}:\n    {p.log_tail()}")
        try:
            if cp.client.request("GET", "/readyz", timeout=5) == "ok" and _has_default_service_cidr(cp):
                return
        except ApiError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"kube-apiserver of lab {cp.lab} was not ready {limit:.0f}s after its start "
                                     f"(last answer: {last or 'none'}); the end of its log:\n    "
                                     f"{cp.procs[-1].log_tail()}")
        time.sleep(0.2)  # the poll interval: readiness is what ends the wait


def _has_default_service_cidr(cp: ControlPlane) -> bool:
    """Whether the API server has made its default ServiceCIDR (a controller of its own does, a moment
    after /readyz): kube-proxy learns it without a sync of its own, so it must exist before one starts."""
    try:
        cp.client.request("GET", DEFAULT_SERVICE_CIDR, timeout=5)
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    return True


DEFAULT_SERVICE_CIDR = "/apis/networking.k8s.io/v1/servicecidrs/kubernetes"
PORT_TRIES = 3  # a port chosen free may be taken before etcd or the API server binds it: choose again


def start(lab: str, topo: Topology, binaries: dict[str, Path], say: Callable[[str], None],
          ready_limit: float = READY_LIMIT) -> ControlPlane:
    """Start etcd and kube-apiserver for `lab` and wait until the API server is ready."""
    return start_with_ranges(lab, flags.service_range(topo), topo.kubeProxy.nodePortRange, binaries, say,
                             ready_limit)


def start_with_ranges(lab: str, service_cidr: str, node_port_range: str, binaries: dict[str, Path],
                      say: Callable[[str], None], ready_limit: float = READY_LIMIT) -> ControlPlane:
    """`start` given the service range and the NodePort range themselves (what a job carries)."""
    layout = flags.Layout(state_dir(lab))
    layout.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    procs.record_owner(layout.root, my_token())
    t0 = time.monotonic()
    try:
        token = pki.make(layout)
        for attempt in range(1, PORT_TRIES + 1):
            ports = flags.Ports(*free_ports(3))
            cp = ControlPlane(lab, layout, Client(f"https://{flags.HOST}:{ports.apiserver}", token,
                                                  layout.serving_cert), ports, service_cidr)
            try:
                _launch(cp, node_port_range, binaries, say, ready_limit)
                break
            except EnvironmentProblem as e:
                cp.stop_processes()
                if "address already in use" not in str(e) or attempt == PORT_TRIES:
                    raise
                shutil.rmtree(layout.etcd_data, ignore_errors=True)
                say(f"control plane: a port was taken before it was bound; choosing again ({e.reason[:80]})")
    except BaseException:
        _remove(layout)  # the processes of the attempt that failed are stopped already
        raise
    cp.seconds_to_ready = time.monotonic() - t0
    say(f"control plane: ready in {cp.seconds_to_ready:.1f}s")
    return cp


def _launch(cp: ControlPlane, node_port_range: str, binaries: dict[str, Path], say: Callable[[str], None],
            ready_limit: float) -> None:
    layout, ports = cp.layout, cp.ports
    say(f"control plane: etcd on {flags.HOST}:{ports.etcd_client}, kube-apiserver on {cp.server} "
        f"(services {cp.service_cidr}, NodePorts {node_port_range})")
    try:
        cp.procs.append(procs.start("etcd", flags.etcd_argv(binaries["etcd"], layout, ports), layout.log("etcd"),
                                    layout.pidfile("etcd")))
        cp.procs.append(procs.start("kube-apiserver", flags.apiserver_argv(
            binaries["kube-apiserver"], layout, ports, cp.service_cidr, node_port_range),
            layout.log("kube-apiserver"), layout.pidfile("kube-apiserver")))
        _wait_ready(cp, ready_limit)
    except BaseException:
        cp.stop_processes()
        raise


@contextlib.contextmanager
def control_plane(lab: str, topo: Topology, binaries: dict[str, Path],
                  say: Callable[[str], None]) -> Iterator[ControlPlane]:
    """A started control plane, stopped (and its directory removed) however the block ends."""
    cp = start(lab, topo, binaries, say)
    try:
        yield cp
    finally:
        cp.stop()
