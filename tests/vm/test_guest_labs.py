"""A calico/IPVS lab you can stay in: deploy, exec, inspect, destroy reach it wherever it lives (the warm
guest on a kernel without IPVS/IPIP). Deploy checks every node's iptables, ipsets and IPVS table read
back from the kernel against kube-proxy's text, in each IPVS era."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import TOPOLOGIES, kpemu

pytestmark = pytest.mark.vm


def topology(tmp: Path, name: str, version: str = "1.20") -> Path:
    data = yaml.safe_load((TOPOLOGIES / "calico-ipip.yaml").read_text())
    data["name"] = name
    data["kubeProxy"]["version"] = version
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def lab(runtime: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    res = kpemu("deploy", str(topology(tmp_path_factory.mktemp("lab"), "itcal")))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lab itcal deployed" in res.stdout
    yield "itcal"
    kpemu("destroy", "itcal")


def test_ipvs_virtual_servers_in_the_node(lab: str) -> None:
    res = kpemu("exec", lab, "node1", "--", "ipvsadm", "-Sn")
    assert res.returncode == 0, res.stderr
    assert "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n" in res.stdout


def test_pod_to_pod_crosses_the_underlay_as_ipip(lab: str) -> None:
    script = ("tcpdump -c 1 -nn -l -i n-node1 'ip proto 4' 2>/dev/null & sleep 1; "
              "ip netns exec kp-itcal-nginx-0 busybox ping -c 1 -W 5 192.168.98.11 >/dev/null; wait")
    res = kpemu("exec", lab, "underlay", "--", "timeout", "60", "sh", "-c", script)
    assert res.returncode == 0, res.stdout + res.stderr
    # outer header node1 -> node2, inner packet pod -> pod (older tcpdumps add "(ipip-proto-4)")
    assert "IP 10.246.198.17 > 10.246.198.18: IP 192.168.97.10 > 192.168.98.11: ICMP echo request" in res.stdout


def test_tunl0_and_proxy_arp(lab: str) -> None:
    link = kpemu("exec", lab, "node1", "--", "ip", "-d", "link", "show", "tunl0").stdout
    assert "mtu 1480" in link and "ipip" in link, link
    assert kpemu("exec", lab, "nginx-0", "--", "busybox", "ping", "-c", "1", "-W", "5", "10.246.198.17").returncode == 0
    neigh = kpemu("exec", lab, "nginx-0", "--", "ip", "neigh", "show", "169.254.1.1").stdout
    assert "ee:ee:ee:ee:ee:ee" in neigh, neigh


@pytest.mark.long  # ~48 s: `make test` stays under 10 minutes; .ci/run runs test-long too
def test_inspect_and_a_second_deploy_refused(lab: str, tmp_path: Path) -> None:
    res = kpemu("inspect", lab, "--json")
    assert res.returncode == 0, res.stderr
    assert '"lab": "itcal"' in res.stdout and "kp-itcal-node1" in res.stdout
    again = kpemu("deploy", str(topology(tmp_path, "itcal")))
    said = " ".join((again.stdout + again.stderr).split())
    assert again.returncode == 3 and ("lab 'itcal' is deployed (kpemu deploy) fix: kpemu destroy itcal, or build "
                                      "this one under another lab name: --name itcal-2") in said, said


@pytest.mark.parametrize("version", ["1.15", "1.33"])
def test_each_ipvs_era_reads_back_equal(runtime: str, tmp_path: Path, version: str) -> None:
    name = f"itera{version.replace('.', '')}"
    res = kpemu("deploy", str(topology(tmp_path, name, version)))
    try:
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        gone = kpemu("destroy", name)
    assert gone.returncode == 0 and f"kp-{name}-node1" in gone.stdout
    assert kpemu("exec", name, "node1", "--", "true").returncode == 2  # no such lab any more
