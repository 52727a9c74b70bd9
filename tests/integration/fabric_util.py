"""Helpers for integration tests on real namespaces: root snapshots, tiny TCP peers, captures."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import LabState
from kpemu.model import topology_from_data
from kpemu.model.topology import Topology
from kpemu.runtimes.host import deploy_lab

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(8); s.settimeout(10)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept(); c.sendall(sys.argv[3].encode()); c.close()
"""
CLIENT = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
print(s.recv(100).decode())
"""


def root_snapshot() -> dict[str, str]:
    """What a lab must never change in the root namespace: links, routes, rules, namespaces."""

    def run(*argv: str) -> str:
        res = subprocess.run(argv, capture_output=True, text=True)
        return "\n".join(ln for ln in (res.stdout + res.stderr).splitlines() if not ln.startswith("#"))

    return {
        "links": run("ip", "-d", "-o", "link", "show"),
        "addresses": run("ip", "-o", "addr", "show"),
        "routes": run("ip", "route", "show", "table", "all"),
        "iptables-nft": run("iptables-nft-save"),
        "iptables-legacy": run("iptables-legacy-save"),
    }


def lab_topology(file: Path, name: str) -> Topology:
    """A shipped topology under another lab name, so tests never collide with real labs."""
    data = yaml.safe_load(file.read_text())
    data["name"] = name
    return topology_from_data(data, str(file))


@contextlib.contextmanager
def deployed_lab(file: Path, name: str) -> Iterator[tuple[Topology, LabState]]:
    """Deploy a shipped topology as lab `name`; on exit destroy it and check that nothing is left and
    that the root namespace's links, addresses, routes and rules are byte-identical to before."""
    topo = lab_topology(file, name)
    before = root_snapshot()
    state = deploy_lab(topo, file.name)
    try:
        yield topo, state
    finally:
        lab.destroy(topo.name)
    assert not nsmod.list_netns(f"kp-{name}-")
    assert root_snapshot() == before


def serve(ns: str, port: int, answer: str, count: int = 1) -> subprocess.Popen[str]:
    """A TCP server in `ns` that answers `count` connections with `answer` (bounded by a timeout)."""
    proc = nsmod.popen_in(ns, [sys.executable, "-c", SERVER, str(port), str(count), answer], text=True)
    time.sleep(0.3)
    return proc


def connect(ns: str, ip: str, port: int) -> str:
    res = nsmod.run_in(ns, [sys.executable, "-c", CLIENT, ip, str(port)], timeout=10)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


class Capture:
    """tcpdump on one interface of a namespace, confirmed listening before traffic starts."""

    def __init__(self, ns: str, iface: str, pcap: Path, bpf: str = "") -> None:
        self.pcap = pcap
        argv = ["tcpdump", "-p", "--immediate-mode", "-U", "-nn", "-i", iface, "-w", str(pcap), *bpf.split()]
        self.proc = nsmod.popen_in(ns, argv, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        assert "listening on" in line, line

    def stop(self) -> str:
        """Stop and return the tcpdump -nn text of what was captured."""
        time.sleep(0.3)
        self.proc.terminate()
        self.proc.wait(timeout=5)
        return subprocess.run(["tcpdump", "-nn", "-r", str(self.pcap)], capture_output=True, text=True).stdout
