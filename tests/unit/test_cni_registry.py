"""The CNI registry is the one place a CNI is known: a CNI registered there (and nowhere else) is
validated, planned, given its node addresses, drawn, decoded, probed for, recognised on import and
named when its kernel lacks a device; an unknown name is an input error; the arrows hold."""

from __future__ import annotations

import ast
import copy
import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kpemu import cni as registry
from kpemu.analyse.oracle import node_local_addresses
from kpemu.cni import catalog, cni_of
from kpemu.cni.pods import pod_namespace
from kpemu.cni.spec import Cni, DeviceNeed
from kpemu.errors import EnvironmentProblem, InputError
from kpemu.faults import plan_fault
from kpemu.inputs.topology import read_objects
from kpemu.jobs.build import deploy_job
from kpemu.jobs.execute import _failure
from kpemu.k8s.convert import topology_data
from kpemu.kernel.probe import requirements
from kpemu.labplan import lab_plan
from kpemu.model import topology_from_data
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Node, Topology
from kpemu.plan.batch import Step
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.parts import Parts
from kpemu.plan.types import Route
from kpemu.proxy.ipvs import ipvs_rules
from kpemu.report.graph import topology_dot, topology_html, topology_mermaid
from kpemu.report.wireshark import open_options
from tests.helpers import ROOT, TOPOLOGIES

TOY = "toy-gw"
TOY_BRIDGE = "toy0"


def _gateway(node: Node) -> str:
    return str(ipaddress.IPv4Network(node.podCIDR).network_address + 1)


def _toy_plan(topo: Topology, p: Parts) -> None:
    """Pods on a bridge with the podCIDR's first address; other nodes' pods routed via their node IP."""
    for node in topo.nodes:
        ns = netns_name(topo.name, node.name)
        p.bridge(ns, TOY_BRIDGE, topo.mtu)
        p.address(ns, TOY_BRIDGE, f"{_gateway(node)}/24")
        for i, pod in enumerate(topo.pods_on(node.name)):
            pns = pod_namespace(topo, p, pod)
            p.veth(pns, "eth0", ns, f"toyv{i}", topo.mtu)
            p.port(ns, f"toyv{i}", TOY_BRIDGE)
        p.routes += [Route(ns, peer.podCIDR, via=peer.ip, dev="eth0") for peer in topo.nodes if peer is not node]


def _toy_recognise(annotations: dict[str, str]) -> tuple[str, dict[str, str]] | None:
    return (TOY, {}) if "toy.example/gateway" in annotations else None


TOY_CNI = Cni(
    name=TOY, project="toy", plan=_toy_plan, addresses=lambda n: (_gateway(n),),
    pod_device=TOY_BRIDGE, tunnel_device="eth0", overlay_label="host routes (toy)", node_label=TOY_BRIDGE,
    features=("match:physdev",), vxlan_ports=(4789,), annotations=("toy.example/gateway",),
    device_needs=(DeviceNeed(TOY_BRIDGE, "Unknown device type", "no bridge module, which cni: toy-gw needs",
                             "modprobe bridge"),),
    recognise=_toy_recognise,
)

BASE = yaml.safe_load((TOPOLOGIES / "flannel-vxlan.yaml").read_text())


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Topology:
    """A topology whose CNI exists only as a registry entry made here."""
    monkeypatch.setitem(registry.CNIS, TOY, TOY_CNI)
    return topology_from_data({**copy.deepcopy(BASE), "cni": TOY}, "toy.yaml")


def test_a_registered_cni_is_planned_from_its_spec_alone(toy: Topology) -> None:
    plan = plan_fabric(toy, cni_of(toy).plan)
    node1, node2 = (n.name for n in toy.nodes[:2])
    assert {(b.ns, b.name) for b in plan.bridges if b.name == TOY_BRIDGE} == {
        (netns_name(toy.name, n.name), TOY_BRIDGE) for n in toy.nodes}
    assert Route(plan.netns(node1), toy.node(node2).podCIDR, via=toy.node(node2).ip, dev="eth0") in plan.routes
    assert {p.name for p in toy.pods} <= {n.member for n in plan.namespaces if n.kind == "pod"}
    assert not plan.vxlans and not plan.tunnels  # nothing of flannel's: the fallback is gone


def test_every_consumer_asks_the_registry(toy: Topology, tmp_path: Path) -> None:
    n1 = toy.nodes[0]
    assert registry.node_addresses(toy, n1.name) == (n1.ip, _gateway(n1))
    assert node_local_addresses(toy, n1.name) == {"127.0.0.1", n1.ip, _gateway(n1)}
    assert set(ipvs_rules(toy, n1.name).node_addresses) - {"127.0.0.1"} == {n1.ip, _gateway(n1)}
    fault = plan_fault(toy, Fault(kind="rp-filter", node=n1.name, source="10.0.0.0/8"))
    assert fault.commands[-1] == ("ip", "route", "replace", "10.0.0.0/8", "dev", TOY_BRIDGE)
    assert "host routes (toy)" in topology_mermaid(toy) and "host routes (toy)" in topology_dot(toy)
    assert f">{TOY_BRIDGE}</text>" in topology_html(toy)
    assert open_options()[:4] == ["-d", "udp.port==8472,vxlan", "-d", "udp.port==4789,vxlan"]
    assert "match:physdev" in requirements(TOY, "iptables") and "vxlan" not in requirements(TOY, "iptables")
    job = deploy_job(lab_plan(toy, (6, 1)))
    with pytest.raises(EnvironmentProblem, match="no bridge module, which cni: toy-gw needs"):
        _failure(Step("run", "toy bridge", argv=("ip",), input=f"link add {TOY_BRIDGE} type bridge\n"),
                 "Unknown device type", job.device_needs)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {"toy.example/gateway": "y"}},
            "spec": {"podCIDR": "10.244.0.0/24"}, "status": {"addresses": [{"type": "InternalIP",
                                                                             "address": "192.168.1.10"}]}}
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump(node))
    imported = topology_data(read_objects([str(tmp_path / "nodes.yaml")]))
    assert imported.data["cni"] == TOY and f"cni {TOY} inferred from the node annotations" in imported.notes
    assert "Node" not in imported.unmodelled  # the toy's annotation is read, not listed as dropped


def test_a_cni_without_a_tunnel_address_rejects_tunnel_ip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.CNIS, TOY, TOY_CNI)
    data = {**copy.deepcopy(BASE), "cni": TOY}
    data["nodes"][0]["tunnelIP"] = "10.244.0.1"
    with pytest.raises(InputError) as e:
        topology_from_data(data, "toy.yaml")
    assert str(e.value) == "toy.yaml: nodes[0].tunnelIP: tunnelIP is only used with cni: calico-ipip; remove it"


def test_the_calico_device_need_travels_with_the_job() -> None:
    topo = topology_from_data(yaml.safe_load((TOPOLOGIES / "calico-ipip.yaml").read_text()), "calico.yaml")
    job = deploy_job(lab_plan(topo, (6, 1)))
    step = Step("run", "tunl0", argv=("ip", "-batch", "-"), input="link set tunl0 mtu 1480\n")
    with pytest.raises(EnvironmentProblem, match=r"no IPIP tunnel \(module ipip\), which cni: calico-ipip needs"):
        _failure(step, 'Cannot find device "tunl0"', job.device_needs)
    assert _failure(step, "RTNETLINK answers: File exists", job.device_needs).endswith("File exists")


def test_unknown_names_are_input_errors() -> None:
    with pytest.raises(InputError) as e:
        registry.cni("weave")
    assert str(e.value) == "cni: expected flannel-vxlan or calico-ipip, the CNIs kpemu models (got 'weave')"
    with pytest.raises(InputError, match=r"cni: expected flannel-vxlan or calico-ipip.*\(got 'weave'\)"):
        topology_from_data({**copy.deepcopy(BASE), "cni": "weave"}, "t.yaml")
    with pytest.raises(ValueError, match="unknown cni 'weave'"):
        requirements("weave", "iptables")


def test_the_registry_is_a_leaf_and_model_validation_loads_no_plan_code() -> None:
    code = ("import sys; import kpemu.cni; print(sorted(m for m in sys.modules if m.startswith('kpemu'))); "
            "from kpemu.inputs.topology import load_topology; load_topology('topologies/calico-ipip.yaml'); "
            "print(sorted(m for m in sys.modules if m.startswith(('kpemu.plan', 'kpemu.cni.calico_ipip.plan'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.splitlines() == ["['kpemu', 'kpemu.cni', 'kpemu.cni.catalog', 'kpemu.errors']", "[]"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_no_module_outside_the_cni_packages_names_a_cni() -> None:
    """No CNI name literal or `cni ==` test outside kpemu/cni; fabric imports no CNI (it is given the
    CNI's planner) and the CNI packages do not import fabric."""
    kpemu = ROOT / "kpemu"
    names = "|".join(map(re.escape, catalog.names()))
    literal = re.compile(rf"""["']({names})["']|\.cni\s*(==|!=)""")
    naming = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in kpemu.rglob("*.py")
              if (kpemu / "cni") not in p.parents for m in [literal.search(p.read_text())] if m]
    assert naming == []
    assert {m for m in _imports(kpemu / "plan" / "fabric.py") if m.startswith("kpemu.cni")} == set()
    for p in (kpemu / "cni").rglob("*.py"):
        assert "kpemu.plan.fabric" not in _imports(p), p
