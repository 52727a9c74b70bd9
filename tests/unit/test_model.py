"""Topology loading and validation: good files load, each malformed one gets exit 2 with its path."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from kpemu.cli import main
from kpemu.cni.calico_ipip.plan import calico_ifname
from kpemu.cni.flannel_vxlan.plan import flannel_ifname
from kpemu.errors import InputError
from kpemu.inputs.topology import load_topology
from kpemu.model import topology_from_data
from kpemu.model.names import short_ifname
from tests.helpers import TOPOLOGIES, without_places

BASE = yaml.safe_load((TOPOLOGIES / "flannel-vxlan.yaml").read_text())


def mutate(fn) -> dict:  # type: ignore[no-untyped-def]
    data = copy.deepcopy(BASE)
    fn(data)
    return data


def _set(path: list, value):  # type: ignore[no-untyped-def]
    def apply(d: dict) -> None:
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value

    return apply


MALFORMED = [
    ("nodePort outside range", _set(["services", 0, "ports", 0, "nodePort"], 8080),
     "services[0].ports[0].nodePort", "30000-32767"),
    ("pod outside podCIDR", _set(["pods", 0, "ip"], "10.244.1.77"), "pods[0].ip", "outside podCIDR"),
    ("unknown node", _set(["pods", 0, "node"], "node9"), "pods[0].node", "unknown node"),
    ("selector matches nothing", _set(["services", 0, "selector"], {"app": "nope"}),
     "services[0].selector", "matches no pod"),
    ("duplicate pod name", lambda d: d["pods"].append({**d["pods"][0], "ip": "10.244.0.9"}),
     "pods[4].name", "already used"),
    ("duplicate address", _set(["pods", 1, "ip"], "10.244.0.2"), "pods[1].ip", "already used"),
    ("overlapping podCIDRs", _set(["nodes", 1, "podCIDR"], "10.244.0.0/23"), "nodes[1].podCIDR", "overlaps"),
    ("clusterIP outside serviceCIDR", _set(["services", 0, "clusterIP"], "10.200.0.10"),
     "services[0].clusterIP", "outside serviceCIDR"),
    ("unknown field", _set(["nodes", 0, "ipaddr"], "1.2.3.4"), "nodes[0].ipaddr", "unknown field"),
    ("not an address", _set(["nodes", 0, "ip"], "192.168.1.300"), "nodes[0].ip", "IPv4 address"),
    ("unknown cni", _set(["cni"], "weave"), "cni", "flannel-vxlan"),
    ("bad version", _set(["kubeProxy", "version"], "2.0"), "kubeProxy.version", "kube-proxy release"),
    ("version not modelled", _set(["kubeProxy", "version"], "1.9"), "kubeProxy.version", "1.10 to"),
    ("no nodes", lambda d: d.pop("nodes"), "nodes", "required"),
    ("node outside underlay", _set(["nodes", 0, "ip"], "192.168.2.100"), "nodes[0].ip", "underlay"),
    ("nodePort on ClusterIP", lambda d: d["services"][0].update(type="ClusterIP"),
     "services[0].ports[0].nodePort", "NodePort or LoadBalancer"),
    ("several unnamed ports", lambda d: d["services"][0].update(
        ports=[{"port": 80, "nodePort": 30080}, {"port": 81, "nodePort": 30081}]),
     "services[0].ports[0].name", "needs a name"),
    ("eTP Local on ClusterIP", lambda d: d["services"][0].update(
        type="ClusterIP", externalTrafficPolicy="Local", ports=[{"port": 80}]),
     "services[0].externalTrafficPolicy", "NodePort and LoadBalancer"),
    ("external inside underlay", _set(["externals", 0, "ip"], "192.168.1.50"), "externals[0].ip", "underlay"),
    ("pod on the gateway address", _set(["pods", 0, "ip"], "10.244.0.1"), "pods[0].ip", "gateway"),
    ("targetPort not served", _set(["services", 0, "ports", 0, "targetPort"], 8080),
     "services[0].ports[0].targetPort", "does not serve"),
    ("bad protocol", _set(["services", 0, "ports", 0, "protocol"], "ICMP"),
     "services[0].ports[0].protocol", "TCP"),
    ("podCIDR not a network", _set(["nodes", 0, "podCIDR"], "10.244.0.1/24"), "nodes[0].podCIDR", "network"),
    ("duplicate nodePort", lambda d: d["services"].append({
        "name": "web2", "type": "NodePort", "clusterIP": "10.96.0.11", "selector": {"app": "web"},
        "ports": [{"port": 80, "nodePort": 30080}]}), "services[1].ports[0].nodePort", "already used"),
    ("loadBalancerIPs on NodePort", _set(["services", 0, "loadBalancerIPs"], ["192.168.1.240"]),
     "services[0].loadBalancerIPs", "type: LoadBalancer"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_topology_names_field_and_expectation(case, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _, change, path, expected = case
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(mutate(change)))
    code = main(["validate", str(f)])
    err = capsys.readouterr().err
    assert code == 2
    assert re.search(rf"^{re.escape(str(f))}:\d+:\d+: {re.escape(path)}:", err, re.M), err  # line and column
    err = without_places(err, f)
    lines = [ln for ln in err.splitlines() if f"{f}: {path}:" in ln]
    assert lines, f"no problem reported at {path}:\n{err}"
    assert any(expected in ln for ln in lines), err
    assert "Traceback" not in err


def test_yaml_syntax_error_names_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "broken.yaml"
    f.write_text("name: x\nnodes:\n  - {name: a, ip: 1.2.3.4\n")
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}: line" in err and "not valid YAML" in err


def test_missing_file_is_input_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", "/nonexistent/topo.yaml"]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_unknown_cli_option_is_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", "--bogus", "x.yaml"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(p.name for p in TOPOLOGIES.glob("*.yaml")))
def test_shipped_topologies_are_valid(name: str) -> None:
    load_topology(TOPOLOGIES / name)


def test_every_problem_is_reported_not_just_the_first() -> None:
    data = mutate(_set(["pods", 0, "ip"], "10.244.1.77"))
    data["services"][0]["ports"][0]["nodePort"] = 99
    with pytest.raises(InputError) as e:
        topology_from_data(data, "t.yaml")
    paths = {p.path for p in e.value.problems}
    assert {"pods[0].ip", "services[0].ports[0].nodePort"} <= paths


def test_long_kubernetes_names_get_short_interface_names() -> None:
    long = "a-very-long-deployment-name-7d9f8c6b5-x2x9z"
    data = mutate(lambda d: d["pods"].append(
        {"name": long, "node": "node2", "ip": "10.244.1.9", "labels": {"app": "web"}, "ports": [80]}))
    topo = topology_from_data(data, "t.yaml")
    assert topo.pods[-1].name == long
    for name in (short_ifname("n-", long), calico_ifname("default", long), flannel_ifname("default", long)):
        assert len(name) <= 15
    assert short_ifname("n-", long) != short_ifname("n-", long + "x")


def test_calico_interface_name_matches_calico() -> None:
    # VethNameForWorkload: "cali" + sha1("<namespace>.<pod>")[:11]; reference value for default/nginx.
    assert calico_ifname("default", "nginx") == "calic440f455693"
