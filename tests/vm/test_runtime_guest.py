"""Kernel features the guest runtime exists for: IPVS through pyroute2, dummy, IPIP via tunl0.

These run natively where the kernel has ip_vs/ipip/dummy, else inside the guest (see conftest).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

PREFIX = f"kp-vmt-{os.getpid()}-"


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    if ns:
        argv = ("ip", "netns", "exec", ns, *argv)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


@pytest.fixture
def netns() -> Iterator:
    """A factory for named namespaces (kp-vmt-<pid>-NAME), all deleted afterwards."""
    made: list[str] = []

    def make(name: str) -> str:
        full = PREFIX + name
        sh("ip", "netns", "add", full)
        made.append(full)
        sh("ip", "link", "set", "lo", "up", ns=full)
        return full

    yield make
    for ns in made:
        subprocess.run(["ip", "netns", "pids", ns], capture_output=True, check=False)
        for pid in sh("ip", "netns", "pids", ns, check=False).split():
            subprocess.run(["kill", "-9", pid], check=False)
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_ip_vs_module_loads_and_ipvs_via_pyroute2(netns) -> None:
    from pyroute2 import IPVS, IPVSDest, IPVSService

    subprocess.run(["modprobe", "ip_vs"], check=False, capture_output=True)  # built in or autoloaded elsewhere
    ns = netns("ipvs")
    svc = IPVSService(addr="10.96.0.10", port=80, protocol=socket.IPPROTO_TCP, sched_name="rr")
    with IPVS(netns=ns) as ipvs:
        ipvs.service("add", service=svc)
        ipvs.dest("add", service=svc, dest=IPVSDest(addr="192.168.97.10", port=8080, fwd_method=0))
        dumped = [IPVSService.from_message(m) for m in ipvs.service("dump")]
    assert [(s["addr"], s["port"]) for s in dumped] == [("10.96.0.10", 80)]
    saved = sh("ipvsadm", "-Sn", ns=ns).splitlines()
    assert "-A -t 10.96.0.10:80 -s rr" in saved, saved
    assert "-a -t 10.96.0.10:80 -r 192.168.97.10:8080 -m -w 1" in saved, saved


def test_dummy_device_like_kube_ipvs0(netns) -> None:
    ns = netns("dummy")
    sh("ip", "link", "add", "kube-ipvs0", "type", "dummy", ns=ns)
    sh("ip", "addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0", ns=ns)
    out = sh("ip", "-d", "-o", "addr", "show", "dev", "kube-ipvs0", ns=ns)
    assert "10.96.0.10/32" in out
    assert "dummy" in sh("ip", "-d", "link", "show", "kube-ipvs0", ns=ns)


SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(1); s.settimeout(60)
print("ready", flush=True)
c, addr = s.accept(); data = c.recv(100); c.sendall(b"echo:" + data + b" from:" + addr[0].encode()); c.close()
"""
CLIENT = """
import socket
c = socket.create_connection(("192.168.98.10", 8080), timeout=20)
c.sendall(b"hello"); print(c.recv(200).decode())
"""


def test_tcp_between_pods_over_ipip_tunl0(netns) -> None:
    tag = str(os.getpid())[-4:]
    va, vb = f"kpu{tag}a", f"kpu{tag}b"
    tmp = netns("veth")  # the underlay veth pair is made here, then each end moves into its node
    sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb, ns=tmp)
    node_a, pod_a = _node_from(netns, tmp, "a", va, "10.246.0.1", "192.168.97.0", "192.168.97.10",
                               "10.246.0.2", "192.168.98.0/24")
    _node_b, pod_b = _node_from(netns, tmp, "b", vb, "10.246.0.2", "192.168.98.0", "192.168.98.10",
                               "10.246.0.1", "192.168.97.0/24")
    dump = subprocess.Popen(["ip", "netns", "exec", node_a, "tcpdump", "-l", "-nn", "-i", va, "-c", "4",
                             "ip proto 4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = subprocess.Popen(["ip", "netns", "exec", pod_b, sys.executable, "-c", SERVER],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert "listening on" in dump.stderr.readline() + dump.stderr.readline()
        assert server.stdout.readline().strip() == "ready"
        reply = sh(sys.executable, "-c", CLIENT, ns=pod_a).strip()
        assert reply == "echo:hello from:192.168.97.10", reply  # no NAT: the pod address arrives
        out, _ = dump.communicate(timeout=20)
    finally:
        for p in (dump, server):
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = out.splitlines()
    assert lines, "tcpdump saw no IPIP (protocol 4) packet on the underlay"
    assert any("10.246.0.1 > 10.246.0.2: IP 192.168.97.10." in ln and "> 192.168.98.10.8080: Flags [S]" in ln
               for ln in lines), lines
    assert any("10.246.0.2 > 10.246.0.1: IP 192.168.98.10.8080 > 192.168.97.10." in ln for ln in lines), lines


def _node_from(netns, scratch: str, name: str, veth: str, underlay: str, block: str, pod: str,
               peer_ip: str, peer_block: str) -> tuple[str, str]:
    """Make node and pod namespaces, move the underlay veth end from `scratch` into the node."""
    node_ns, pod_ns = netns(name), netns(name + "-pod")
    sh("ip", "link", "set", veth, "netns", node_ns, ns=scratch)
    return _configure_node(node_ns, pod_ns, name, veth, underlay, block, pod, peer_ip, peer_block)


def _configure_node(node: str, podns: str, name: str, veth: str, underlay: str, block: str, pod: str,
                    peer_ip: str, peer_block: str) -> tuple[str, str]:
    """Calico style: tunl0 with the block's .1, remote block via tunl0 onlink, proxy-ARP cali veth."""
    sh("ip", "addr", "add", f"{underlay}/24", "dev", veth, ns=node)
    sh("ip", "link", "set", veth, "up", ns=node)
    links = sh("ip", "-o", "link", "show", ns=node)
    assert "tunl0" in links, f"no fallback tunl0 in a new namespace (ipip not loaded): {links}"
    sh("ip", "addr", "add", f"{block.rsplit('.', 1)[0]}.1/32", "dev", "tunl0", ns=node)
    sh("ip", "link", "set", "tunl0", "mtu", "1480", "up", ns=node)
    sh("ip", "route", "add", peer_block, "via", peer_ip, "dev", "tunl0", "onlink", ns=node)
    # Without a default route proxy ARP for 169.254.1.1 answers nothing (DESIGN.md section 6).
    sh("ip", "route", "add", "default", "dev", veth, ns=node)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=node)
    cali = f"cali{name}"
    sh("ip", "link", "add", cali, "type", "veth", "peer", "name", "eth0", "netns", podns, ns=node)
    sh("ip", "link", "set", cali, "up", ns=node)
    sh("sysctl", "-qw", f"net.ipv4.conf.{cali}.proxy_arp=1", ns=node)
    sh("ip", "route", "add", f"{pod}/32", "dev", cali, ns=node)
    sh("ip", "addr", "add", f"{pod}/32", "dev", "eth0", ns=podns)
    sh("ip", "link", "set", "eth0", "up", ns=podns)
    sh("ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link", ns=podns)
    sh("ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0", ns=podns)
    return node, podns
