"""Mermaid sequence diagram of a hops.json flow."""

from __future__ import annotations

from kpemu.report.mermaid import sequence_diagram

FLOW = {"name": "np", "from": "client", "to": "192.168.1.100:30080", "hops": [
    {"member": "client", "interface": "eth0", "direction": "request", "src": "10.242.72.50", "sport": 1,
     "dst": "192.168.1.100", "dport": 30080, "flags": "S", "outer": None, "changed_by": []},
    {"member": "node1", "interface": "flannel.1", "direction": "request", "src": "10.244.0.0", "sport": 2,
     "dst": "10.244.1.5", "dport": 80, "flags": "S", "outer": None, "changed_by": [
         {"kind": "DNAT", "field": "dst", "from": "192.168.1.100:30080", "to": "10.244.1.5:80",
          "by": ["DNAT by KUBE-SEP-THCUGE4PYEGQIHCR (default/web:http)"]}]},
    {"member": "node1", "interface": "flannel.1", "direction": "reply", "src": "10.244.1.5", "sport": 80,
     "dst": "10.244.0.0", "dport": 2, "flags": "S.", "outer": None, "changed_by": []}]}


def test_participants_messages_and_notes() -> None:
    text = sequence_diagram(FLOW)
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert "    participant client_eth0 as client/eth0" in lines
    assert "    participant node1_flannel_1 as node1/flannel.1" in lines
    assert "    client_eth0->>node1_flannel_1: 10.242.72.50:1 > 192.168.1.100:30080 [S]" not in lines
    assert "    client_eth0->>node1_flannel_1: 10.244.0.0:2 > 10.244.1.5:80 [S]" in lines
    note = [x for x in lines if x.startswith("    Note over node1_flannel_1: DNAT")]
    assert note == ["    Note over node1_flannel_1: DNAT dst 192.168.1.100:30080 -> 10.244.1.5:80: "
                    "DNAT by KUBE-SEP-THCUGE4PYEGQIHCR (default/web:http)"]
    assert any("-->>" in x for x in lines)  # the reply is drawn dashed
    assert lines.count("    participant node1_flannel_1 as node1/flannel.1") == 1
