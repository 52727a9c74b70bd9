"""Scenario files: valid ones load and resolve; each kind of mistake names its field path (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kpemu.cli import main
from kpemu.errors import InputError
from kpemu.inputs.scenario import load_file, load_scenario
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from tests.helpers import ROOT, without_places

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
BASE = {
    "name": "t-scn",
    "topology": str(ROOT / "topologies" / "flannel-vxlan.yaml"),
    "flows": [{"name": "f", "from": "client", "to": {"node": "node1", "nodePort": 30080}}],
    "expect": [{"flow": "f", "reply": True}],
}


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def paths_of(tmp_path: Path, data: dict) -> list[str]:
    with pytest.raises(InputError) as e:
        load_scenario(write(tmp_path, data))
    return [p.path for p in e.value.problems]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.name == path.stem
    assert sc.topology.name == sc.name  # the lab is named after the scenario, not the topology
    assert isinstance(load_file(path), Scenario)


def test_topology_file_is_not_a_scenario() -> None:
    assert isinstance(load_file(ROOT / "topologies" / "flannel-vxlan.yaml"), Topology)


def test_targets_resolve(tmp_path: Path) -> None:
    data = dict(BASE, flows=[
        {"name": "np", "from": "client", "to": {"node": "node2", "nodePort": 30080}},
        {"name": "cip", "from": "client-0", "to": {"service": "default/web", "via": "clusterIP"}},
        {"name": "pod", "from": "node1", "to": {"pod": "web-1"}, "connections": 3},
        {"name": "addr", "from": "client", "to": {"address": "10.244.0.2", "port": 80}, "protocol": "UDP"},
    ], expect=[])
    flows = {f.flow.name: f for f in load_scenario(write(tmp_path, data)).flows}
    assert (flows["np"].dst_ip, flows["np"].dst_port) == ("192.168.1.101", 30080)
    assert set(flows["np"].candidates) == {"web-0", "web-1", "web-2"}
    assert (flows["cip"].dst_ip, flows["cip"].dst_port, flows["cip"].protocol) == ("10.96.0.10", 80, "TCP")
    assert (flows["pod"].dst_ip, flows["pod"].flow.connections) == ("10.244.1.5", 3)
    assert flows["addr"].protocol == "UDP"


def test_overrides_apply(tmp_path: Path) -> None:
    sc = load_scenario(write(tmp_path, dict(BASE, overrides={"kubeProxy": {"mode": "ipvs", "version": "1.20"}})))
    assert (sc.topology.kubeProxy.mode, sc.topology.kubeProxy.version) == ("ipvs", "1.20")
    assert sc.topology.kubeProxy.clusterCIDR == "10.244.0.0/16"  # deep merge keeps the rest


@pytest.mark.parametrize(("change", "path"), [
    ({"flows": [{"name": "f", "from": "nobody", "to": {"pod": "web-0"}}]}, "flows[0].from"),
    ({"flows": [{"name": "f", "from": "client", "to": {"pod": "web-9"}}]}, "flows[0].to.pod"),
    ({"flows": [{"name": "f", "from": "client", "to": {"service": "default/nope"}}]}, "flows[0].to.service"),
    ({"flows": [{"name": "f", "from": "client", "to": {"pod": "web-0", "service": "default/web"}}]}, "flows[0].to"),
    ({"flows": [{"name": "f", "from": "client", "to": {"pod": "web-0"}, "connections": 1000}]},
     "flows[0].connections"),
    ({"flows": [{"name": "f", "from": "client", "to": {"service": "default/web", "via": "externalIP"}}]},
     "flows[0].to.via"),
    ({"flows": [{"name": "f", "form": "client", "to": {"pod": "web-0"}}]}, "flows[0].form"),
    ({"expect": [{"flow": "g", "reply": True}]}, "expect[0].flow"),
    ({"expect": [{"flow": "f", "backends": ["web-7"]}]}, "expect[0].backends[0]"),
    ({"expect": [{"flow": "f", "hops": [{"at": "web-0/eth9"}]}]}, "expect[0].hops[0].at"),
    ({"expect": [{"flow": "f", "hops": [{"at": "web-0"}]}]}, "expect[0].hops[0].at"),
    ({"expect": [{"flow": "f", "hops": [{"at": "web-0/eth0", "dst": "10.0.0.300:80"}]}]},
     "expect[0].hops[0].dst"),
    ({"expect": [{"flow": "f", "reply": True, "outcome": "refused"}]}, "expect[0]"),
    ({"expect": [{"flow": "f", "rules": [{"node": "node9", "contains": ["x"]}]}]}, "expect[0].rules[0].node"),
    ({"topology": "missing.yaml"}, "topology"),
    ({"topology": {"name": "x", "nodes": [{"name": "n1", "ip": "10.246.0.2", "podCIDR": "10.244.0.0/33"}]},
      "flows": [{"name": "f", "from": "n1", "to": {"address": "10.0.0.1", "port": 1}}], "expect": []},
     "topology.nodes[0].podCIDR"),
])
def test_mistakes_name_their_field(tmp_path: Path, change: dict, path: str) -> None:
    assert path in paths_of(tmp_path, dict(BASE, **change))


def test_override_mistake_names_the_topology_field(tmp_path: Path) -> None:
    assert "kubeProxy.mode" in paths_of(tmp_path, dict(BASE, overrides={"kubeProxy": {"mode": "nft"}}))


def test_cli_validate_exits_2_with_file_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, dict(BASE, flows=[{"name": "f", "from": "client", "to": {"pod": "web-9"}}]))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    pod = bad.read_text().splitlines().index("    pod: web-9") + 1  # the file as yaml.safe_dump wrote it
    assert f"{bad}:{pod}:5: flows[0].to.pod: unknown pod 'web-9'" in err


def test_cli_validate_names_a_hop_at_no_capture_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, dict(BASE, expect=[{"flow": "f", "hops": [{"at": "node1/flannel.9"}]}]))
    assert main(["validate", str(bad)]) == 2
    err = without_places(capsys.readouterr().err, bad)
    assert f"{bad}: expect[0].hops[0].at: no capture point 'node1/flannel.9'; expected member/interface" in err
    assert "'node1/flannel.1'" in err


def test_cli_run_rejects_bad_scenario_before_building(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, dict(BASE, expect=[{"flow": "zzz"}]))
    assert main(["run", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "expect[0].flow" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
