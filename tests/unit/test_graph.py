"""`kpemu graph`: the topology with addresses, in Mermaid, dot and HTML."""

from __future__ import annotations

import re

import pytest

from kpemu.cli import main
from kpemu.inputs.topology import load_topology
from tests.helpers import TOPOLOGIES


def test_mermaid_has_every_node_pod_and_address() -> None:
    from kpemu.report.graph import render_graph

    t = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    text = render_graph(t, "mermaid")
    assert text.startswith("flowchart LR")
    assert "node1: 10.246.198.17 pods 192.168.97.0/24 tunl0 192.168.97.1" in text
    assert "default/nginx-0 192.168.97.10" in text and "IPIP (tunl0)" in text
    assert "default/nginx NodePort 192.168.96.165 80/TCP nodePort 30080" in text


def test_dot_is_balanced_and_labels_links(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(TOPOLOGIES / "flannel-vxlan.yaml"), "--format", "dot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('graph "flannel" {') and out.rstrip().endswith("}")
    assert out.count("{") == out.count("}")
    assert '"node:node1" -- underlay [label="192.168.1.100"];' in out
    assert 'label="VXLAN VNI 1 (flannel.1, UDP 8472)"' in out


def test_html_is_self_contained(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(TOPOLOGIES / "flannel-vxlan.yaml"), "--format", "html"]) == 0
    out = capsys.readouterr().out
    assert "<svg" in out and "10.244.1.6" in out
    assert not re.search(r"(src|href)=\"https?:", out)


def test_unknown_format_is_an_input_error() -> None:
    assert main(["graph", str(TOPOLOGIES / "flannel-vxlan.yaml"), "--format", "png"]) == 2
